#!/usr/bin/env python3
"""Where a megakernel level's time goes, workgroup by workgroup, from a recording's spans.

Usage: baro-top export REC.baro --spans-every 1 --perfetto T.json && python3 bench/anatomy.py T.json [MIN_PASS]

Reads the Trace Event JSON export of a recording with spans (`--spans-every 1`: every pass
with spans keeps its workgroup tracks; passes from MIN_PASS on, default 0) and prints, per stage kind over its levels and passes (medians):
- `wgs`: workgroups whose span in the stage is longer than the idle threshold (they held
  units), of the grid;
- `unit`: the slowest of those workgroups' span (what the level waits for), and the median
  of theirs;
- `idle`: the median span of a workgroup without units (what merely passing through the
  stage costs: reading its records, the stamps);
and per level of a layer: `wall`, from the first span's start to the last exit from the
barrier that closes it, and `tail`, from the last span's end to that exit (the barrier's own
latency as the last arriver sees it).
The spans are the kernel's own stamps (busy: stage start to the workgroup's end of it).
"""
import collections
import json
import signal
import statistics
import sys

signal.signal(signal.SIGPIPE, signal.SIG_DFL)

# A layer's levels: the barrier's name (`wait NAME.lN`) and the stage kinds it closes.
LEVELS = {"qkv": ("q", "k", "v"), "attn": ("attn",), "wo": ("wo",), "ffn": ("ffn_up",),
          "down": ("ffn_down",)}
IDLE_US = 1.5  # a span at most this long held no unit (an idle pass-through is ~0.6 µs)


def main():
    path = sys.argv[1]
    min_pass = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    # The export's slices are begin/end pairs per track (tid): passes on tid 1, workgroup w
    # on tid 1000 + w (telemetry/src/recording/export).
    by_track = collections.defaultdict(list)  # tid -> [slice]
    open_ = collections.defaultdict(list)
    for e in json.load(open(path))["traceEvents"]:
        if e.get("ph") == "B":
            open_[e["tid"]].append(e)
        elif e.get("ph") == "E":
            b = open_[e["tid"]].pop()
            by_track[e["tid"]].append({"name": b["name"], "args": b.get("args", {}),
                                       "ts": b["ts"], "dur": e["ts"] - b["ts"]})
    passes = by_track.pop(1, [])
    wgs = {t: v for t, v in by_track.items() if t >= 1000}
    for v in wgs.values():
        v.sort(key=lambda e: e["ts"])
    # One pass: the stage and barrier spans of every workgroup inside it.
    per_pass = {}
    for p in passes:
        if p["args"]["pass"] >= min_pass and p["args"].get("spans") == "all":
            per_pass[p["args"]["pass"]] = p
    rows = collections.defaultdict(lambda: collections.defaultdict(list))
    levels = collections.defaultdict(lambda: collections.defaultdict(list))
    grid = 0
    for p in per_pass.values():
        spans = collections.defaultdict(list)  # name -> [(ts, dur)]
        t0, t1 = p["ts"] - 0.01, p["ts"] + p["dur"] + 0.01
        ran = 0
        for v in wgs.values():
            inside = [e for e in v if t0 <= e["ts"] <= t1]
            ran += bool(inside)
            for e in inside:
                spans[e["name"]].append((e["ts"], e["dur"]))
        grid = max(grid, ran)
        for name, sp in spans.items():
            if name.startswith("wait "):
                continue
            kind = name.split(".")[0]
            busy = sorted(d for _, d in sp)
            work = [d for d in busy if d > IDLE_US]
            idle = [d for d in busy if d <= IDLE_US]
            r = rows[kind]
            r["wgs"].append(len(work))
            r["unit"].append(busy[-1])
            if work:
                r["unit_med"].append(statistics.median(work))
            if idle:
                r["idle"].append(statistics.median(idle))
        # Levels: the stages a barrier closes (by layer), first span start -> last exit.
        for lvl, kinds in LEVELS.items():
            for tag in {n.split(".", 1)[1] for n in spans if "." in n and n.split(".")[0] in kinds}:
                sp = [x for k in kinds for x in spans.get(f"{k}.{tag}", [])]
                waits = spans.get(f"wait {lvl}.{tag}")
                if not sp or not waits:
                    continue
                start = min(t for t, _ in sp)
                end = max(t + d for t, d in sp)
                exit_last = max(t + d for t, d in waits)
                lv = levels[lvl]
                lv["wall"].append(exit_last - start)
                lv["tail"].append(exit_last - end)
    def med(v):
        return statistics.median(v) if v else float("nan")
    print(f"{'stage':<9} {'wgs':>9} {'unit max':>9} {'unit med':>9} {'idle':>6}  (µs)")
    for kind in sorted(rows):
        r = rows[kind]
        print(f"{kind:<9} {med(r['wgs']):>4.0f}/{grid:<4} {med(r['unit']):>9.2f} {med(r['unit_med']):>9.2f} "
              f"{med(r['idle']):>6.2f}")
    print(f"{'level':<9} {'wall':>9} {'tail':>9}  (µs; per layer)")
    for lvl in LEVELS:
        lv = levels[lvl]
        print(f"{lvl:<9} {med(lv['wall']):>9.2f} {med(lv['tail']):>9.2f}")

if __name__ == "__main__":
    main()
