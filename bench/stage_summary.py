#!/usr/bin/env python3
"""Summarise `baro-top run --json` lines (stdin) per stage kind, by position bucket.

Per bucket of positions (edges given as arguments, e.g. `64 128`: [0,64) [64,128) [128,inf)),
prints the passes' median GPU time and, per stage kind, the median over passes of the sum of
its stages' busy and charged µs, the weight bytes it streams per pass over that busy and
that charged time (GB/s; `busy` is the mean over workgroups, so bytes / busy is the rate per
unit of whole-grid time), the median per-pass sum of barrier arrival spreads, and the
passes' power modes and contention (a disturbed bucket is labelled, not read as a result).
Used by bench/run.sh (step stages) to compare two builds stage by stage in one device call.
"""
import json
import signal
import statistics
import sys

# A closed pipe (`| head`) ends the script quietly, as it would a shell tool.
signal.signal(signal.SIGPIPE, signal.SIG_DFL)

edges = [int(a) for a in sys.argv[1:]]
kinds = {}
kind_bytes = {}
buckets = {}
for line in sys.stdin:
    try:
        d = json.loads(line)
    except json.JSONDecodeError:
        continue
    if d.get("type") == "start":
        kinds = {s["id"]: s["kind"] for s in d["stages"]}
        kind_bytes = {}
        for s in d["stages"]:
            kind_bytes[s["kind"]] = kind_bytes.get(s["kind"], 0) + s.get("weight_bytes", 0)
    elif d.get("type") == "frame" and isinstance(d.get("stages"), list):
        b = sum(1 for e in edges if d["pos"] >= e)
        busy, charged = {}, {}
        for s in d["stages"]:
            k = kinds.get(s["stage"], "?")
            busy[k] = busy.get(k, 0) + s["busy_ns"]
            charged[k] = charged.get(k, 0) + s["charged_ns"]
        spread = sum(x["arrival_spread_ns"] for x in d["barriers"])
        quiet = not (d.get("contention") or {}).get("reasons")
        buckets.setdefault(b, []).append((d["pos"], d.get("gpu_ns") or 0, busy, charged, spread,
                                          d.get("mode") or "unknown", quiet))


def med(v):
    return statistics.median(v) / 1e3 if v else float("nan")


for b in sorted(buckets):
    rows = buckets[b]
    lo = min(r[0] for r in rows)
    hi = max(r[0] for r in rows)
    modes = {m: sum(1 for r in rows if r[5] == m) for m in ("fast", "slow", "unknown")}
    contended = sum(1 for r in rows if not r[6])
    print(f"  positions {lo}..{hi} ({len(rows)} passes): gpu {med([r[1] for r in rows]):.1f} µs, "
          f"arrival spread {med([r[4] for r in rows]):.1f} µs; modes {modes['fast']} fast "
          f"{modes['slow']} slow {modes['unknown']} ?, contended {contended}")
    for k in sorted({k for r in rows for k in r[2]}):
        b = med([r[2].get(k, 0) for r in rows])
        c = med([r[3].get(k, 0) for r in rows])
        line = f"    {k:<9} busy {b:8.1f}  charged {c:8.1f} µs"
        wb = kind_bytes.get(k, 0)
        if wb and b > 0 and c > 0:
            # bytes / µs = 1e6 bytes/s: / 1e3 more is GB/s.
            line += f"  {wb / (b * 1e3):7.1f} / {wb / (c * 1e3):7.1f} GB/s"
        print(line)
