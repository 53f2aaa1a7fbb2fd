#!/usr/bin/env python3
"""Summarise `baro-top run --json` lines (stdin) per stage kind, by position bucket.

Per bucket of positions (edges given as arguments, e.g. `64 128`: [0,64) [64,128) [128,inf)),
prints the passes' median GPU time and, per stage kind, the median over passes of the sum of
its stages' busy and charged µs, the weight bytes it streams per pass over that busy and
that charged time (GB/s; `busy` is the mean over workgroups, so bytes / busy is the rate per
unit of whole-grid time), the median per-pass sum of barrier arrival spreads, and the
passes' power modes and contention (a disturbed bucket is labelled, not read as a result).
A bucket whose passes ran in more than one power mode reads its stage rows from the passes of
its most common mode (fast on a tie) and says so: a median over a mix moves with the mix
(round 89: a window with 12 slow passes in 75 read ≈ 1.5 % slower on every stage than
another build's all-fast window, where the plain passes put the two builds level).
Used by bench/run.sh (step stages) to compare two builds stage by stage in one device call.
`stage_summary.py --test` checks that rule (scripts/test.sh runs it).
"""
import json
import signal
import statistics
import sys

# A closed pipe (`| head`) ends the script quietly, as it would a shell tool.
signal.signal(signal.SIGPIPE, signal.SIG_DFL)

MODES = ("fast", "slow", "unknown")


def read(lines, edges):
    """The frames of `run --json` lines, by bucket: (pos, gpu_ns, busy, charged, spread, mode,
    quiet) per pass; and each stage kind's weight bytes."""
    kinds, kind_bytes, buckets = {}, {}, {}
    for line in lines:
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
            mode = d.get("mode") if d.get("mode") in MODES else "unknown"
            buckets.setdefault(b, []).append((d["pos"], d.get("gpu_ns") or 0, busy, charged,
                                              spread, mode, quiet))
    return buckets, kind_bytes


def tally(rows):
    """The passes of each power mode."""
    return {m: sum(1 for r in rows if r[5] == m) for m in MODES}


def stage_passes(rows, counts):
    """The passes a bucket's stage rows read: all of them when they share one power mode,
    else those of the most common mode (fast first on a tie); and that mode."""
    mode = max(MODES, key=lambda m: (counts[m], m == "fast"))
    return [r for r in rows if r[5] == mode], mode


def med(v):
    return statistics.median(v) / 1e3 if v else float("nan")


def summary(buckets, kind_bytes):
    out = []
    for b in sorted(buckets):
        rows = buckets[b]
        lo = min(r[0] for r in rows)
        hi = max(r[0] for r in rows)
        modes = tally(rows)
        contended = sum(1 for r in rows if not r[6])
        out.append(f"  positions {lo}..{hi} ({len(rows)} passes): gpu {med([r[1] for r in rows]):.1f} µs, "
                   f"arrival spread {med([r[4] for r in rows]):.1f} µs; modes {modes['fast']} fast "
                   f"{modes['slow']} slow {modes['unknown']} ?, contended {contended}")
        sel, mode = stage_passes(rows, modes)
        if len(sel) < len(rows):
            out.append(f"    stage rows: the {len(sel)} {mode} passes (gpu {med([r[1] for r in sel]):.1f} µs); "
                       f"{len(rows) - len(sel)} in other modes left out")
        for k in sorted({k for r in sel for k in r[2]}):
            bu = med([r[2].get(k, 0) for r in sel])
            c = med([r[3].get(k, 0) for r in sel])
            line = f"    {k:<9} busy {bu:8.1f}  charged {c:8.1f} µs"
            wb = kind_bytes.get(k, 0)
            if wb and bu > 0 and c > 0:
                # bytes / µs = 1e6 bytes/s: / 1e3 more is GB/s.
                line += f"  {wb / (bu * 1e3):7.1f} / {wb / (c * 1e3):7.1f} GB/s"
            out.append(line)
    return out


def self_test():
    """A mixed window's stage rows are its fast passes' medians, a one-mode window reads every
    pass, and a window mostly slow reads its slow passes, labelled."""
    def lines(modes):
        yield json.dumps({"type": "start", "stages": [{"id": 0, "kind": "ffn_up", "weight_bytes": 1000}]})
        for i, m in enumerate(modes):
            ns = 1000 + 100 * i if m == "fast" else 3000
            yield json.dumps({"type": "frame", "pos": 70 + i, "gpu_ns": ns * 10, "mode": m,
                              "stages": [{"stage": 0, "busy_ns": ns, "charged_ns": ns}],
                              "barriers": [{"arrival_spread_ns": 0}]})
    mixed = summary(*read(lines(["fast"] * 5 + ["slow"] * 4), [65]))
    assert "stage rows: the 5 fast passes" in mixed[1], mixed
    # Fast passes 1.0..1.4 µs: their median 1.2; over all nine passes it would be 1.4.
    assert "busy      1.2  charged      1.2" in mixed[2], mixed
    whole = summary(*read(lines(["fast"] * 3), [65]))
    assert len(whole) == 2 and "busy      1.1" in whole[1], whole
    slow = summary(*read(lines(["fast"] * 2 + ["slow"] * 5 + [None]), [65]))
    assert "the 5 slow passes" in slow[1] and "3 in other modes" in slow[1], slow
    assert "busy      3.0" in slow[2], slow
    print("stage_summary: OK")


if __name__ == "__main__":
    if sys.argv[1:] == ["--test"]:
        self_test()
    else:
        print("\n".join(summary(*read(sys.stdin, [int(a) for a in sys.argv[1:]]))))
