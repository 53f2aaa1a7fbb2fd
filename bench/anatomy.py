#!/usr/bin/env python3
"""Where a megakernel level's time goes, workgroup by workgroup, from a recording's spans.

Usage: baro-top export REC.baro --perfetto T.json && python3 bench/anatomy.py T.json [MIN_PASS]

Reads the Perfetto (Chrome trace JSON) export of a recording with spans (passes from MIN_PASS
on, default 0) and prints, per stage kind over its levels and passes (medians):
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
    ev = [e for e in json.load(open(path))["traceEvents"] if e.get("ph") == "X"]
    by_track = collections.defaultdict(list)
    passes = []
    for e in ev:
        if e["cat"] == "pass":
            passes.append(e)
        else:
            by_track[(e["pid"], e["tid"])].append(e)
    for v in by_track.values():
        v.sort(key=lambda e: e["ts"])
    # One pass: every workgroup's pass span, then the stage and barrier spans inside it.
    per_pass = collections.defaultdict(list)
    for p in passes:
        if p["args"]["pass"] >= min_pass:
            per_pass[(p["pid"], p["args"]["pass"])].append(p)
    rows = collections.defaultdict(lambda: collections.defaultdict(list))
    levels = collections.defaultdict(lambda: collections.defaultdict(list))
    grid = 0
    for pes in per_pass.values():
        grid = max(grid, len(pes))
        spans = collections.defaultdict(list)  # name -> [(ts, dur)]
        for p in pes:
            t0, t1 = p["ts"] - 0.01, p["ts"] + p["dur"] + 0.01
            for e in by_track[(p["pid"], p["tid"])]:
                if t0 <= e["ts"] <= t1:
                    spans[e["name"]].append((e["ts"], e["dur"]))
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
