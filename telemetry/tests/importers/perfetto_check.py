"""Reads .pftrace files with Perfetto's own generated protos (the PyPI `perfetto` package's
perfetto_trace_pb2, not baro-top's types) and prints, per file, one JSON line describing what
a trace processor would build from it: tracks (uuid, parent, name, rank, counter unit), per
track the slices (count, deepest nesting, names) and counter samples, and every problem found
(an end without a begin, a slice left open, an event on an undeclared track, a name iid never
interned, a packet off the sequence, a slice outside every pass). Timestamps follow
Perfetto's clock rules: a clock snapshot defines the sequence's incremental clock, each later
packet's timestamp is a delta on it. Used by telemetry/tests/it/trace_importers.rs."""

import gzip
import json
import sys

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

TYPE_BEGIN = pb.TrackEvent.TYPE_SLICE_BEGIN
TYPE_END = pb.TrackEvent.TYPE_SLICE_END
TYPE_COUNTER = pb.TrackEvent.TYPE_COUNTER


def check(path):
    data = open(path, "rb").read()
    if path.endswith(".gz"):
        data = gzip.decompress(data)
    trace = pb.Trace()
    trace.ParseFromString(data)
    problems = []
    tracks = {}
    names = {}
    ann_names = {}
    incremental = {}  # clock id -> last value
    default_clock = None
    state_cleared = False
    stacks = {}
    slices = {}  # uuid -> {"count", "max_depth", "names": {name: count}}
    counters = {}  # uuid -> samples
    passes = []  # (begin, end) on the passes track
    leaf = []  # (uuid, begin, end) of every other slice
    last_ts = None
    pass_args = None
    for i, p in enumerate(trace.packet):
        if p.trusted_packet_sequence_id != 1:
            problems.append(f"packet {i}: sequence {p.trusted_packet_sequence_id}, not 1")
        if p.sequence_flags & 1:
            state_cleared = True
        elif not state_cleared:
            problems.append(f"packet {i}: incremental state used before it was cleared")
        if p.HasField("trace_packet_defaults"):
            default_clock = p.trace_packet_defaults.timestamp_clock_id
        if p.HasField("clock_snapshot"):
            for c in p.clock_snapshot.clocks:
                if c.is_incremental:
                    incremental[c.clock_id] = c.timestamp
            continue
        for n in p.interned_data.event_names:
            names[n.iid] = n.name
        for n in p.interned_data.debug_annotation_names:
            ann_names[n.iid] = n.name
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            tracks[d.uuid] = {
                "uuid": d.uuid,
                "parent": d.parent_uuid if d.HasField("parent_uuid") else None,
                "name": d.process.process_name if d.HasField("process") else d.name,
                "rank": d.sibling_order_rank if d.HasField("sibling_order_rank") else None,
                "counter_unit": d.counter.unit_name if d.HasField("counter") else None,
                "explicit_order": d.child_ordering == pb.TrackDescriptor.EXPLICIT,
            }
            continue
        if not p.HasField("track_event"):
            problems.append(f"packet {i}: neither clock, track nor event")
            continue
        clock = p.timestamp_clock_id if p.HasField("timestamp_clock_id") else default_clock
        if clock not in incremental:
            problems.append(f"packet {i}: timestamp on clock {clock}, not an incremental clock")
            continue
        incremental[clock] += p.timestamp
        ts = incremental[clock]
        if last_ts is not None and ts < last_ts:
            problems.append(f"packet {i}: time goes back")
        last_ts = ts
        e = p.track_event
        uuid = e.track_uuid
        if uuid not in tracks:
            problems.append(f"packet {i}: event on undeclared track {uuid}")
            continue
        stack = stacks.setdefault(uuid, [])
        if e.type == TYPE_BEGIN:
            if e.HasField("name_iid"):
                if e.name_iid not in names:
                    problems.append(f"packet {i}: name iid {e.name_iid} never interned")
                name = names.get(e.name_iid, "?")
            else:
                name = e.name
            for a in e.debug_annotations:
                if a.HasField("name_iid") and a.name_iid not in ann_names:
                    problems.append(f"packet {i}: annotation iid {a.name_iid} never interned")
            if name.startswith("pass "):
                pass_args = sorted(ann_names.get(a.name_iid, "?") for a in e.debug_annotations)
            stack.append((name, ts))
            s = slices.setdefault(uuid, {"count": 0, "max_depth": 0, "names": {}})
            s["count"] += 1
            s["max_depth"] = max(s["max_depth"], len(stack))
            s["names"][name] = s["names"].get(name, 0) + 1
        elif e.type == TYPE_END:
            if not stack:
                problems.append(f"packet {i}: slice end on track {uuid} with nothing open")
                continue
            name, begin = stack.pop()
            if tracks[uuid]["name"] == "passes":
                passes.append((begin, ts))
            elif tracks[uuid]["name"] != "power mode":
                leaf.append((uuid, begin, ts))
        elif e.type == TYPE_COUNTER:
            counters[uuid] = counters.get(uuid, 0) + 1
        else:
            problems.append(f"packet {i}: event type {e.type}")
    for uuid, stack in stacks.items():
        for name, _ in stack:
            problems.append(f"track {tracks[uuid]['name']}: {name} left open")
    # Every grid and workgroup slice lies inside a pass.
    passes.sort()
    outside = 0
    import bisect

    starts = [b for b, _ in passes]
    for uuid, b, e in leaf:
        k = bisect.bisect_right(starts, b) - 1
        if k < 0 or e > passes[k][1]:
            outside += 1
    if outside:
        problems.append(f"{outside} slices lie outside every pass")
    def names_on(prefix):
        return sorted({n for u, t in tracks.items() if t["name"].startswith(prefix)
                       for n in slices.get(u, {"names": {}})["names"]})

    out = []
    for uuid, t in sorted(tracks.items()):
        s = slices.get(uuid, {"count": 0, "max_depth": 0, "names": {}})
        out.append({**t, "slices": s["count"], "max_depth": s["max_depth"],
                    "distinct_names": len(s["names"]), "counter_samples": counters.get(uuid, 0)})
    return {"file": path, "packets": len(trace.packet), "tracks": out, "problems": problems[:50],
            "problem_count": len(problems), "pass_annotations": pass_args,
            "wg_names": names_on("wg "), "grid_names": names_on("grid "),
            "duration_ns": (passes[-1][1] - passes[0][0]) if passes else 0}


for f in sys.argv[1:]:
    print(json.dumps(check(f)))
