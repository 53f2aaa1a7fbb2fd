#!/usr/bin/env python3
"""bench/compare.py against bench/results.jsonl (run by scripts/test.sh: python3 bench/test_compare.py)."""
import io
import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
COMPARE = os.path.join(HERE, "compare.py")
RESULTS = os.path.join(HERE, "results.jsonl")
NINTH = "2026-12-02 s9 h200_call.sh bench"

# The README's speed table (ninth session, 2026-12-02, main 3518ac2).
README_TABLE = """\
| file | f32 act | `--act q8` | llama.cpp CUDA | best / llama.cpp |
|---|---|---|---|---|
| 1B Q4_0 (`model gen`) | 884.8 | 932.8 | 1014.9 ± 15.2 | 0.92× |
| 1B Q4_K_M (`llama-quantize`) | 764.7 | 873.4 | 890.3 ± 12.1 | 0.98× |
| 8B Q4_0 | 267.2 | 286.6 | 337.2 ± 5.3 | 0.85× |
| 8B Q4_K_M | 214.2 | 261.7 | 270.3 ± 1.9 | 0.97× |
"""

KEYS = ["round", "call", "date", "device", "driver", "commit", "command", "tool", "model", "arm",
        "metric", "median", "min", "max", "peer", "source"]


def run(*args):
    p = subprocess.run([sys.executable, COMPARE] + list(args), capture_output=True, text=True, check=True)
    return p.stdout


def ingest(log, rnd, table=False):
    """The rows compare.py --ingest reads from a call log's text (and, with table, the default
    table it prints from just those rows)."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "call.log")
        with open(path, "w", encoding="utf-8") as f:
            f.write(log)
        out = run("--ingest", path, "--round", rnd, "--date", "2026-12-03")
        rows = [json.loads(x) for x in out.splitlines()]
        if not table:
            return rows
        res = os.path.join(d, "results.jsonl")
        with open(res, "w", encoding="utf-8") as f:
            f.write(out)
        return rows, run("--file", res)


def ab_rows_table(rows):
    """compare.py's table of the `bench ab` pairs among rows (a call without llama.cpp)."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        res = os.path.join(d, "results.jsonl")
        with open(res, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
        return run("--file", res, "--round", rows[0]["round"]).splitlines()


class Compare(unittest.TestCase):
    def test_ninth_session_call_is_the_readme_table(self):
        out = run("--call", NINTH)
        self.assertIn(README_TABLE, out)
        self.assertIn("commit 3518ac2", out)

    def test_default_prints_the_latest_peer_call_in_the_readme_shape(self):
        out = run()
        self.assertIn("| file | ", out)
        self.assertIn("| llama.cpp CUDA | best / llama.cpp |", out)

    def test_the_speed_table_in_docs_guide_is_what_compare_prints(self):
        # docs/guide.md (the README's speed section) holds the table compare.py prints by
        # default: the latest call with llama.cpp beside baro-top.
        with open(os.path.join(HERE, "..", "docs", "guide.md"), encoding="utf-8") as f:
            guide = f.read()
        out = run()
        start = out.index("| file | ")
        end = out.find("\n\n", start)
        table = out[start:] if end < 0 else out[start:end + 1]
        self.assertIn(table, guide)

    def test_the_default_table_skips_a_call_whose_build_was_reverted(self):
        # Round 41's first call measured a build that main reverted: its rows stay (with
        # --round 41) but the default table, the README's, is the latest call of a kept build.
        out = run()
        self.assertNotIn("bash bench/run.sh 41`", out)
        self.assertIn("(reverted", run("--round", "41"))

    def test_rows_carry_the_fields(self):
        with io.open(RESULTS, encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()]
        self.assertGreater(len(rows), 300)
        for r in rows:
            for k in KEYS:
                self.assertIn(k, r, r)
            self.assertTrue(r["median"] is not None or r.get("mean") is not None or "refused" in (r.get("note") or ""), r)
        # a peer value is llama.cpp's in the same call on the same file
        for r in rows:
            if r["peer"] is not None:
                self.assertTrue(any(p["call"] == r["call"] and p["tool"] == "llama-bench" and p["mean"] == r["peer"]
                                    for p in rows), r)

    def test_filters_and_ab_pairs(self):
        out = run("--round", "34")
        self.assertIn("| llama-8b Q4_0 | q8 | 0 | main → s34 | 288.44 → 273.85 | -5.06 % |", out)
        out = run("--commit", "3518ac2", "--model", "8b", "--spread")
        self.assertIn("| 8B Q4_0 (`model gen`) | 267.2 (266.9, 267.3) | 286.6 (286.6, 286.6) | 337.2 ± 5.3 | 0.85× |", out)
        self.assertIn(NINTH, run("--list"))

    def test_ingest_reads_a_call_log(self):
        log = ("NVIDIA H200, 580.159.04, 1980 MHz, P0\n== [0 s] build under test 3518ac2c0ffe\n"
               "== [9 s] baro-top llama-8b-q4_k_m act q8\n"
               "mega                     tg128             261.7 (261.4, 261.8)        261.6 ± 0.1    435/0/0\n"
               "== [30 s] llama.cpp llama-8b-q4_k_m\n"
               "| llama 8B Q4_K - Medium | 4.58 GiB | 8.03 B | CUDA | 99 | tg128 | 270.28 ± 1.91 |\n")
        rows = ingest(log, "35")
        self.assertEqual([(r["tool"], r["quant"], r["act"], r["median"], r.get("mean")) for r in rows],
                         [("bench", "Q4_K_M", "q8", 261.7, None), ("llama-bench", "Q4_K_M", None, None, 270.28)])
        self.assertEqual((rows[0]["commit"], rows[0]["driver"], rows[0]["peer"]), ("3518ac2", "580.159.04", 270.28))

    def test_ingest_names_the_quant_of_every_mix_file_and_pairs_its_peer(self):
        # `model gen --quant MIX` files: llama-1b-iq4_xs is IQ4_XS of llama-1b, not a Q4_0
        # model called llama-1b-iq4_xs; its ratio is against llama.cpp on that file only.
        log = ("NVIDIA H200, 580.159.04, 1980 MHz, P0\n== [0 s] build under test 3518ac2c0ffe\n"
               "== [9 s] baro-top llama-1b-iq4_xs act q8\n"
               "mega                     tg128             900.5 (899.0, 901.2)        900.1 ± 0.5    435/0/0\n"
               "== [12 s] baro-top llama-1b act q8\n"
               "mega                     tg128             1100.0 (1099.0, 1101.0)        1100.0 ± 0.5    435/0/0\n"
               "== [30 s] llama.cpp llama-1b-iq4_xs\n"
               "| llama 1B IQ4_XS - 4.25 bpw | 0.6 GiB | 1.2 B | CUDA | 99 | tg128 | 850.00 ± 2.00 |\n"
               "== [40 s] llama.cpp llama-1b\n"
               "| llama 1B Q4_0 | 0.6 GiB | 1.2 B | CUDA | 99 | tg128 | 1000.00 ± 2.00 |\n")
        rows = ingest(log, "66")
        self.assertEqual([(r["tool"], r["model"], r["quant"], r["peer"]) for r in rows],
                         [("bench", "llama-1b", "IQ4_XS", 850.0), ("bench", "llama-1b", "Q4_0", 1000.0),
                          ("llama-bench", "llama-1b", "IQ4_XS", None), ("llama-bench", "llama-1b", "Q4_0", None)])

    def test_ingest_reads_bench_rows_at_depth_with_arguments_and_pairs_the_peer_by_depth(self):
        # run.sh's `bench:0,4096:ARGS`: the header names depth and arguments; the line says the
        # depth as llama-bench does; a ratio is only ever against the peer at the same depth.
        log = ("NVIDIA H200, 580.159.04, 1980 MHz, P0\n== [0 s] build under test 0123456789ab\n"
               "== [5 s] baro-top llama-1b act q8 d0 --prefetch-mib 0\n"
               "mega                     tg128             970.0 (969.0, 971.0)        970.0 ± 1.0    435/0/0\n"
               "== [9 s] baro-top llama-1b act q8 d4096 --prefetch-mib 0\n"
               "mega                     tg128 @ d4096     780.0 (779.0, 781.0)        780.0 ± 1.0    435/0/0\n"
               "== [30 s] llama.cpp llama-1b d0\n"
               "| llama 1B Q4_0 | 0.66 GiB | 1.24 B | CUDA | 99 | tg128 | 1000.00 ± 2.00 |\n"
               "== [40 s] llama.cpp llama-1b d4096\n"
               "| llama 1B Q4_0 | 0.66 GiB | 1.24 B | CUDA | 99 | tg128 @ d4096 | 890.00 ± 3.00 |\n")
        rows, table = ingest(log, "38", table=True)
        self.assertEqual([(r["tool"], r["depth"], r.get("arm"), r["median"], r["peer"]) for r in rows],
                         [("bench", 0, "q8 act --prefetch-mib 0", 970.0, 1000.0),
                          ("bench", 4096, "q8 act --prefetch-mib 0", 780.0, 890.0),
                          ("llama-bench", 0, "llama.cpp CUDA", None, None),
                          ("llama-bench", 4096, "llama.cpp CUDA", None, None)])
        self.assertIn("| 1B Q4_0 (`model gen`) d0 | 970.0 | 1000.0 ± 2.0 | 0.97× |", table)
        self.assertIn("| 1B Q4_0 d4096 | 780.0 | 890.0 ± 3.0 | 0.88× |", table)

    def test_ingest_reads_an_ab_pair_whose_arms_differ_in_arguments(self):
        # One binary, two settings: run.sh logs "'A ARGS' -> 'B ARGS'"; each arm carries its own.
        log = ("NVIDIA H200, 580.159.04, 1980 MHz, P0\n== [0 s] build under test 0123456789ab\n"
               "== [5 s] ab llama-1b: .bin/baro-top-s37 -> .bin/baro-top-s37 '--act q8 --prefetch-mib 0' -> '--act q8 --prefetch-mib 16'\n"
               "parity of logits: OK (bitwise)\n"
               "verdict: inside — predicted +3%..+12%, measured +5.00% (A 980.00, B 1029.00 generation tok/s, mode fast)\n")
        rows = ingest(log, "37")
        self.assertEqual([(r["ab"]["role"], r["arm"], r["median"], r["act"]) for r in rows],
                         [("A", "baro-top-s37 --act q8 --prefetch-mib 0", 980.0, "q8"),
                          ("B", "baro-top-s37 --act q8 --prefetch-mib 16", 1029.0, "q8")])
        self.assertEqual(rows[0]["ab"]["pair"], rows[1]["ab"]["pair"])
        self.assertEqual((rows[1]["ab"]["verdict"], rows[1]["ab"]["parity"]), ("inside", "OK"))


    def test_ingest_reads_an_ab_pairs_depth_and_keeps_pairs_at_two_depths_apart(self):
        # run.sh logs " depth N" after the arms when a pair runs at depth (bench ab --depth).
        head = "NVIDIA H200, 580.159.04, 1980 MHz, P0\n== [0 s] build under test 0123456789ab\n"
        pair = ("== [5 s] ab llama-1b: .bin/baro-top-s40 -> .bin/baro-top-s41 '--dispatch mega --act q8'%s\n"
                "parity of logits: DIFFER (A 1, B 2)\n"
                "verdict: below — predicted +6%%..+16%%, measured -0.42%% (A %s, B %s generation tok/s, mode fast)\n")
        log = head + pair % ("", "1127.73", "1122.94") + pair % (" depth 4096", "883.66", "889.45")
        rows = ingest(log, "41")
        table = "\n".join(ab_rows_table(rows))
        self.assertEqual([(r["ab"]["role"], r["depth"], r["median"]) for r in rows],
                         [("A", 0, 1127.73), ("B", 0, 1122.94), ("A", 4096, 883.66), ("B", 4096, 889.45)])
        self.assertNotEqual(rows[0]["ab"]["pair"], rows[2]["ab"]["pair"])
        self.assertIn("| llama-1b Q4_0 | q8 | 4096 |", table)
        self.assertIn("| llama-1b Q4_0 | q8 | 0 |", table)

    def test_ingest_keeps_a_repeated_ab_arm_apart_and_reads_its_pairs(self):
        # Round 80 ran m9 -> s85 twice on one file with the same arguments, and round 81 runs
        # null arms (one binary against itself) several times and with more pairs: each run is
        # its own pair, and the pair count comes from the step (" pairs N").
        head = "NVIDIA H100 80GB HBM3, 580.159.04, 1980 MHz, P0\n== [0 s] build under test 0123456789ab\n"
        pair = ("== [5 s] ab llama-1b: .bin/baro-top-m9 -> .bin/baro-top-m9 '--dispatch mega --act q8'%s\n"
                "parity of logits: OK (bitwise identical logits, checksum 1)\n"
                "verdict: inside — predicted -1%%..+1%%, measured %s (A %s, B %s generation tok/s, mode fast)\n")
        table8 = ("A                        tg128              1200.0 (1190.5, 1210.2)    1200.1 ± 7.0  1000/0/0\n"
                  "B                        tg128              1202.4 (1195.0, 1209.9)    1202.3 ± 5.1  1000/0/0\n")
        log = (head + pair % ("", "+2.36%", "1178.63", "1206.46") + pair % ("", "-0.10%", "1201.00", "1199.80")
               + (pair % (" pairs 8", "+0.20%", "1200.00", "1202.40")).replace("parity", table8 + "parity"))
        rows = ingest(log, "81")
        names = [r["ab"]["pair"] for r in rows]
        self.assertEqual(len(set(names)), 3, names)
        self.assertEqual([names[0], names[2]], [names[1], names[3]])
        self.assertEqual([r["pairs"] for r in rows], [2, 2, 2, 2, 8, 8])
        # The arms' spread where the log has `bench ab`'s table, null where it does not.
        self.assertEqual([(r["min"], r["max"]) for r in rows[3:]],
                         [(None, None), (1190.5, 1210.2), (1195.0, 1209.9)])
        table = "\n".join(ab_rows_table(rows))
        self.assertIn("1178.63 → 1206.46", table)
        self.assertIn("1201.00 → 1199.80", table)
        self.assertIn("1200.00 → 1202.40", table)

    def test_ab_pairs_on_two_files_of_one_shape_in_one_call_stay_apart(self):
        # Round 71 ran the same two binaries on 1B IQ4_XS, Q5_K_M and Q4_K_M in one call: the
        # stored pair name has the shape only, so the table must tell them apart by the quant.
        head = "NVIDIA H100 80GB HBM3, 580.159.04, 1980 MHz, P0\n== [0 s] build under test 0123456789ab\n"
        pair = ("== [5 s] ab llama-1b-%s: .bin/baro-top-m5 -> .bin/baro-top-s74 '--dispatch mega --act q8'\n"
                "parity of logits: OK (bitwise identical logits, checksum 1)\n"
                "verdict: inside — predicted +0%%..+8%%, measured %s (A %s, B %s generation tok/s, mode fast)\n")
        log = head + pair % ("iq4_xs", "+3.08%", "896.50", "924.15") + pair % ("q4_k_m", "+0.11%", "1088.88", "1090.13")
        table = "\n".join(ab_rows_table(ingest(log, "71")))
        self.assertIn("| llama-1b IQ4_XS | q8 | 0 | baro-top-m5 --dispatch mega --act q8 → baro-top-s74 "
                      "--dispatch mega --act q8 | 896.50 → 924.15 | +3.08 % |", table)
        self.assertIn("| llama-1b Q4_K_M | q8 | 0 | baro-top-m5 --dispatch mega --act q8 → baro-top-s74 "
                      "--dispatch mega --act q8 | 1088.88 → 1090.13 | +0.11 % |", table)


class RunEnd(unittest.TestCase):
    """bench/run.sh's run_end: a plain or stages run that ended before its passes says so."""

    def say(self, lines):
        import tempfile
        script = open(os.path.join(HERE, "run.sh"), encoding="utf-8").read()
        start = script.index("run_end() {")
        fn = script[start:script.index("\n}\n", start) + 3]
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.jsonl")
            with open(path, "w", encoding="utf-8") as f:
                f.write("".join(json.dumps(x) + "\n" for x in lines))
            p = subprocess.run(["bash", "-c", fn + 'run_end "$1"', "run_end", path],
                               capture_output=True, text=True, check=True)
        return p.stdout

    def test_a_refused_run_names_its_pass_count_and_reason_a_completed_one_prints_nothing(self):
        frame = {"type": "frame", "pass": 0}
        failed = {"type": "end", "passes": 65, "reason": {"failed_pass": {
            "pass": 64, "fail": "fail-word 0x00000208 FAIL non-finite-logits+output-poisoned"}}}
        out = self.say([frame, failed])
        self.assertIn("run ended early after 65 passes", out)
        self.assertIn("non-finite-logits", out)
        self.assertEqual(self.say([frame, {"type": "end", "passes": 1, "reason": "completed"}]), "")
        self.assertIn("without an end record", self.say([frame]))


class LoopLines(unittest.TestCase):
    """bench/run.sh's loop_lines: the listing lines a plain step prints (round 82's output)."""

    def test_keeps_the_counts_and_the_matvec_loops_and_drops_the_rest(self):
        script = open(os.path.join(HERE, "run.sh"), encoding="utf-8").read()
        start = script.index("loop_lines() {")
        fn = script[start:script.index("\n}\n", start) + 3]
        pre = "  c.cache image 0 loop "
        listing = "\n".join([
            "  c.cache image 0: 9272 instructions",
            "  dot loops with a load waiting on an earlier load's registers: 0 of 3",
            pre + "0x1d20..0x2130: 66 instructions, 8 global loads (32 bytes a lane a trip): IMAD 12, LDG 8",
            pre + "0x13700..0x14c60: 343 instructions, 4 global loads (40 bytes a lane a trip): LOP3 133, FADD 66, LDS 16",
            pre + "0x131d0..0x13940: 120 instructions, 4 global loads (40 bytes a lane a trip): LOP3 21, IDP 16",
            "image 0 opcode histogram: FFMA 900"]) + "\n"
        out = subprocess.run(["bash", "-c", fn + "loop_lines"], input=listing, capture_output=True,
                             text=True, check=True).stdout.splitlines()
        self.assertEqual(len(out), 4, out)
        self.assertTrue(out[0].endswith("9272 instructions"))
        self.assertIn("0 of 3", out[1])
        self.assertIn("LOP3 133", out[2])
        self.assertIn("IDP 16", out[3])
        self.assertTrue(all(x.startswith("   ") for x in out))
        self.assertNotIn("66 instructions", "\n".join(out))


if __name__ == "__main__":
    unittest.main()
