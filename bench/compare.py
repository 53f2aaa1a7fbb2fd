#!/usr/bin/env python3
"""Tables from bench/results.jsonl (stdlib only).

  python3 bench/compare.py                 the latest call with llama.cpp beside baro-top,
                                           as the README's speed table
  python3 bench/compare.py --round 33      every call of a round (rounds/NN.md), bench rows
                                           and `bench ab` pairs
  python3 bench/compare.py --commit 3518ac2 --model 8b --spread
  python3 bench/compare.py --list          the calls: date, round, commits, rows, peer or not
  python3 bench/compare.py --ingest OUT/call.log --round 35 --command "bash bench/run.sh 35" [--write]
                                           a device call's log (bench/run.sh's `bench` and `ab`
                                           steps) as rows: printed, or appended with --write

A row is one measurement (bench/README.md, "results.jsonl"). Rows are grouped by `call`
(one device call); a ratio is only ever computed between rows of the same call: baro-top's
best median over llama.cpp's mean on the same file and depth, or a `bench ab` pair's B over A.
"""
import argparse
import json
import os
import sys
from decimal import ROUND_HALF_UP, Decimal

HERE = os.path.dirname(os.path.abspath(__file__))
PEER = "llama.cpp CUDA"
# The README names where each file comes from on its first row of that quant.
ORIGIN = {"Q4_0": "`model gen`", "Q4_K_M": "`llama-quantize`"}
HEADER = {"f32 act": "f32 act", "q8 act": "`--act q8`"}


def load(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if line:
                r = json.loads(line)
                r["_n"] = n
                rows.append(r)
    return rows


def select(rows, a):
    out = []
    for r in rows:
        if a.round and r.get("round") != a.round:
            continue
        if a.call and r.get("call") != a.call:
            continue
        if a.commit and not any(str(c or "").startswith(a.commit) for c in (r.get("commit"), r.get("binary"))):
            continue
        if a.model and a.model not in (r.get("model") or ""):
            continue
        out.append(r)
    # a `bench ab` pair travels whole: its other arm too
    pairs = {r["ab"]["pair"] for r in out if r.get("ab")}
    return [r for r in rows if r in out or (r.get("ab") and r["ab"]["pair"] in pairs)]


def calls_in_order(rows):
    first = {}
    for r in rows:
        first.setdefault(r["call"], (r.get("date") or "", r["_n"]))
    return sorted(first, key=lambda c: first[c])


def fmt(v, nd=1):
    """Half up from the recorded decimal (890.25 -> 890.3), as the tables were written."""
    if v is None:
        return "—"
    return str(Decimal(repr(v)).quantize(Decimal(1).scaleb(-nd), rounding=ROUND_HALF_UP))


def label(r, seen, depths):
    size = (r.get("model") or "?").replace("llama-", "").upper()
    q = r.get("quant") or ""
    s = "%s %s" % (size, q)
    if q in ORIGIN and q not in seen:
        seen.add(q)
        s += " (%s)" % ORIGIN[q]
    # A call of one depth names it unless it is 0 (round 64c: a table of depth-4096 rows read
    # as depth 0).
    if len(depths) > 1 or (r.get("depth") or 0) != 0:
        s += " d%s" % r.get("depth")
    return s


def bench_table(rows, spread):
    """One call's plain measurements: a line per file (model, quant, depth), a column per arm."""
    rows = [r for r in rows if not r.get("ab")]
    if not rows:
        return []
    peers = [r for r in rows if r.get("tool") == "llama-bench"]
    ours = [r for r in rows if r.get("tool") != "llama-bench"]
    arms = []
    for r in ours:
        if r["arm"] not in arms:
            arms.append(r["arm"])
    keys = []
    for r in rows:
        k = (r.get("model"), r.get("quant"), r.get("depth"))
        if k not in keys:
            keys.append(k)
    depths = {k[2] for k in keys}
    head = ["file"] + [HEADER.get(a, a) for a in arms]
    if peers:
        head += [PEER, "best / llama.cpp"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    seen = set()
    for k in keys:
        same = [r for r in rows if (r.get("model"), r.get("quant"), r.get("depth")) == k]
        cells, best = [], None
        for a in arms:
            rs = [r for r in same if r["arm"] == a and r.get("tool") != "llama-bench"]
            if not rs:
                cells.append("")
                continue
            r = rs[0]
            if r.get("median") is None:
                cells.append("refused" if "refused" in (r.get("note") or "") else "—")
                continue
            c = fmt(r["median"])
            if spread and r.get("min") is not None:
                c += " (%s, %s)" % (fmt(r["min"]), fmt(r["max"]))
            cells.append(c)
            best = r["median"] if best is None else max(best, r["median"])
        if peers:
            p = [r for r in same if r.get("tool") == "llama-bench"]
            if p and p[0].get("mean") is not None:
                cells.append("%s ± %s" % (fmt(p[0]["mean"]), fmt(p[0].get("stddev"))))
                cells.append(fmt(best / p[0]["mean"], 2) + "×" if best else "—")
            else:
                cells += ["", ""]
        out.append("| " + " | ".join([label(same[0], seen, depths)] + cells) + " |")
    return out


def ab_table(rows):
    pairs = {}
    for r in rows:
        if r.get("ab"):
            # The stored pair name has the shape, not the file: one call's pairs on two files
            # of one shape (1B IQ4_XS and 1B Q4_K_M, round 71) are told apart by the quant.
            pairs.setdefault((r["ab"]["pair"], r.get("quant")), {})[r["ab"]["role"]] = r
    pairs = {k: p for k, p in pairs.items() if "A" in p and "B" in p}
    if not pairs:
        return []
    out = ["| model | act | depth | A → B | generation tok/s | Δ | predicted | verdict | parity |",
           "|---|---|---|---|---|---|---|---|---|"]
    for p in pairs.values():
        a, b = p["A"], p["B"]
        d = (b["median"] / a["median"] - 1) * 100
        ab = b["ab"]
        out.append("| %s | %s | %s | %s → %s | %.2f → %.2f | %+.2f %% | %s | %s | %s |" % (
            " ".join(x for x in (a.get("model"), a.get("quant")) if x), a.get("act") or "", a.get("depth") or 0,
            a["arm"], b["arm"], a["median"],
            b["median"], d, ab.get("predicted") or "", ab.get("verdict") or "", ab.get("parity") or ""))
    return out


def caption(rows):
    r = rows[0]
    commits = sorted({c for c in (x.get("commit") for x in rows) if c})
    runs = sorted({x.get("runs") for x in rows if x.get("runs") and x.get("tool") == "bench"})
    s = "%s, driver %s, %s, commit %s, call `%s`" % (
        r.get("device"), r.get("driver") or "?", r.get("date"), "/".join(commits) or "?", r["call"])
    metric = r.get("metric") or ""
    s += ": %s" % metric
    if runs:
        s += ", one run" if runs == [1] else ", median of %s runs" % "/".join(map(str, runs))
    if any(x.get("tool") == "llama-bench" for x in rows):
        s += "; llama.cpp CUDA (llama-bench, mean ± sd) in the same call on the same files"
    reverted = sorted({x["reverted"] for x in rows if x.get("reverted")})
    if reverted:
        s += " (reverted in %s: not main's build)" % "/".join(reverted)
    return s


def quant_of(name):
    """`bench` step file names: llama-1b (Q4_0 from `model gen`), llama-1b-q4_k_m,
    llama-1b-iq4_xs, ... (`model gen --quant MIX`: a last part that names a ggml type or mix)."""
    import re

    m = re.match(r"(.+?)-((?:i?q\d|bf16|f16|f32)\w*)$", name)
    return (m.group(1), m.group(2).upper()) if m else (name, "Q4_0")


def ingest(path, a):
    """Rows from a run.sh (or h200_call.sh) call.log: the `bench` and `ab` steps' lines."""
    import datetime
    import re

    date = a.date or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    base = dict(round=a.round, call=a.call or "%s %s" % (date, a.command or os.path.basename(path)), date=date,
                time=None, device=a.device, driver=a.driver, commit=a.commit, command=a.command)
    rows, cur, pend, spread = [], None, None, {}
    for n, line in enumerate(open(path, encoding="utf-8", errors="replace"), 1):
        line = line.rstrip("\n")
        m = re.match(r"(NVIDIA [^,]+), ([\d.]+), ", line)
        if m and not (a.device or base["device"]):
            base["device"], base["driver"] = m.group(1), m.group(2)
            continue
        m = re.match(r"== \[\d+ s\] build under test (\w+)", line)
        if m and not a.commit:
            base["commit"] = m.group(1)[:7]
            continue
        m = re.match(r"== \[\d+ s\] (.*)", line)
        if m:
            cur, pend, spread = m.group(1), None, {}
            continue
        # `bench ab`'s table: an arm's generation median (min, max) over its samples (run.sh
        # prints it since round 81; older logs leave an ab row's min and max null).
        t = re.match(r"(A|B)\s+tg\d+\s+([\d.]+) \(([\d.]+), ([\d.]+)\)", line)
        if t:
            spread[t.group(1)] = (float(t.group(3)), float(t.group(4)))
            continue
        src = "%s:%d" % (os.path.basename(path), n)
        # "baro-top FILE act ACT[ dDEPTH][ ARGS]": run.sh's `bench[:DEPTHS[:ARGS]]` step
        m = re.match(r"baro-top (\S+) act (\w+)(?: d(\d+))?(?: (.+))?$", cur or "")
        t = re.match(r"(mega|multi)\s+(tg\d+)(?: @ d(\d+))?\s+([\d.]+) \(([\d.]+), ([\d.]+)\)", line)
        if m and t:
            model, quant = quant_of(m.group(1))
            arm = "%s act" % m.group(2) if t.group(1) == "mega" else "multi %s act" % m.group(2)
            if m.group(4):
                arm += " " + m.group(4)
            rows.append(dict(base, tool="bench", model=model, quant=quant, depth=int(t.group(3) or m.group(3) or 0),
                             act=m.group(2), dispatch=t.group(1), arm=arm,
                             metric="%s tok/s" % t.group(2), median=float(t.group(4)), min=float(t.group(5)),
                             max=float(t.group(6)), runs=3, source=src))
            continue
        m = re.match(r"llama\.cpp (\S+)", cur or "")
        t = re.search(r"\|\s+(tg\d+)(?: @ d(\d+))?\s+\|\s+([\d.]+) ± ([\d.]+) \|", line)
        if m and t:
            model, quant = quant_of(m.group(1))
            rows.append(dict(base, tool="llama-bench", model=model, quant=quant, depth=int(t.group(2) or 0), act=None,
                             dispatch=None, arm=PEER, metric="%s tok/s" % t.group(1), median=None, min=None, max=None,
                             mean=float(t.group(3)), stddev=float(t.group(4)), runs=3, source=src))
            continue
        m = re.match(r"ab (\S+): (\S+) -> (\S+) '([^']*)'(?: -> '([^']*)')?(?: depth (\d+))?(?: pairs (\d+))?", cur or "")
        if m and line.startswith("parity of logits:"):
            pend = line.split(":", 1)[1].strip().split(" (")[0]
        t = re.match(r"verdict: (\w+) — predicted (\S+), measured (\S+) \(A ([\d.]+), B ([\d.]+) (\w+) tok/s, mode (\w+)\)", line)
        if m and t:
            model, quant = quant_of(m.group(1))
            # The arms' arguments belong to the pair: one call may run the same two binaries
            # on one model with different arguments (--act f32 and --act q8).
            # B may run with its own arguments (one binary, two settings): "'A ARGS' -> 'B ARGS'".
            bargs = m.group(5) if m.group(5) is not None else m.group(4)
            pair = "%s %s %s->%s '%s'" % (base["call"], model, m.group(2), m.group(3), m.group(4))
            if m.group(5) is not None:
                pair += " -> '%s'" % bargs
            depth = int(m.group(6) or 0)
            if depth:
                pair += " d%d" % depth
            npairs = int(m.group(7) or 2)
            if m.group(7):
                pair += " p%d" % npairs
            # The same arms again in one call (a repeat, a null arm run twice): the k-th is its
            # own pair, not a second B for the first.
            k = sum(1 for r in rows if r.get("ab") and r["ab"]["role"] == "A"
                    and r["ab"]["pair"].split(" #")[0] == pair)
            if k:
                pair += " #%d" % (k + 1)
            act = "q8" if "--act q8" in m.group(4) else "f32"
            for role, binary, v, args in (("A", m.group(2), t.group(4), m.group(4)), ("B", m.group(3), t.group(5), bargs)):
                ab = dict(pair=pair, role=role)
                lo, hi = spread.get(role, (None, None))
                if role == "B":
                    ab.update(predicted=t.group(2), measured=t.group(3), verdict=t.group(1), parity=pend)
                rows.append(dict(base, tool="bench ab", model=model, quant=quant, depth=depth, act=act, dispatch="mega",
                                 arm="%s %s" % (os.path.basename(binary), args), binary=binary,
                                 metric="tg128 tok/s", median=float(v), min=lo, max=hi, pairs=npairs,
                                 mode=t.group(7),
                                 ab=ab, source=src))
    for r in rows:
        if r["tool"] != "llama-bench":
            ps = [p for p in rows if p["tool"] == "llama-bench"
                  and (p["model"], p["quant"], p["depth"]) == (r["model"], r["quant"], r["depth"])]
            r["peer"] = ps[0]["mean"] if ps else None
        else:
            r["peer"] = None
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--file", default=os.path.join(HERE, "results.jsonl"))
    ap.add_argument("--round", help="a rounds/NN.md name: 01, 07b, 33, sessions, ...")
    ap.add_argument("--call", help="one call, as its `call` field")
    ap.add_argument("--commit", help="rows whose commit (or binary) starts with this")
    ap.add_argument("--model", help="rows whose model contains this (1b, llama-8b)")
    ap.add_argument("--spread", action="store_true", help="median (min, max) where recorded")
    ap.add_argument("--list", action="store_true", help="list the calls")
    ap.add_argument("--ingest", metavar="CALL_LOG", help="rows from a device call's log")
    ap.add_argument("--date", help="with --ingest: the call's UTC date (default today)")
    ap.add_argument("--command", help="with --ingest: the command the call ran")
    ap.add_argument("--write", action="store_true", help="with --ingest: append the rows to --file")
    ap.add_argument("--device", help="with --ingest: the device, where the log lacks nvidia-smi's line")
    ap.add_argument("--driver", help="with --ingest: the driver, likewise (h200_call.sh logged neither)")
    a = ap.parse_args(argv)
    if a.ingest:
        new = ingest(a.ingest, a)
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in new)
        if a.write:
            with open(a.file, "a", encoding="utf-8") as f:
                f.write(text)
            print("%d rows appended to %s (call `%s`)" % (len(new), a.file, new[0]["call"] if new else ""))
        else:
            sys.stdout.write(text)
        return 0
    rows = select(load(a.file), a)
    if not rows:
        print("no rows match", file=sys.stderr)
        return 1
    order = calls_in_order(rows)
    if a.list:
        for c in order:
            rs = [r for r in rows if r["call"] == c]
            commits = sorted({x.get("commit") for x in rs if x.get("commit")})
            peer = "peer" if any(x.get("tool") == "llama-bench" for x in rs) else ""
            print("%s  round %-8s %-48s %3d rows  %s %s" % (rs[0].get("date"), rs[0].get("round"), c, len(rs),
                                                           ",".join(commits), peer))
        return 0
    if not (a.round or a.call or a.commit or a.model):
        # A call whose rows say `reverted` measured a build main no longer has.
        with_peer = [c for c in order if any(r["call"] == c and r.get("tool") == "llama-bench" for r in rows)
                     and not any(r["call"] == c and r.get("reverted") for r in rows)]
        order = with_peer[-1:]
    for i, c in enumerate(order):
        rs = [r for r in rows if r["call"] == c]
        if i:
            print()
        print(caption(rs))
        print()
        t = bench_table(rs, a.spread)
        for line in t:
            print(line)
        ab = ab_table(rs)
        if ab:
            if t:
                print()
            for line in ab:
                print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
