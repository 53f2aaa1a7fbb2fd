#!/usr/bin/env bash
# Round 14, second look (bench/README.md): where does branch att lose at short contexts?
# `run --json` (ring every pass, 140 passes from "Once upon a time") on main and att, 1b and
# 8b, summarised per stage kind for positions below 65 (one attention chunk in both builds)
# and from 65 (two or three chunks: att combines behind a device-scope fence).
set -u
. bench/h200_env.sh
exec > >(tee "$O/round14b${TAG:-}.log") 2>&1
t() { echo "== [$SECONDS s] $*"; }
t "main $(cat .bin/COMMIT) att $(cat .bin/COMMIT-att)"
for s in llama-1b llama-8b; do [ -s /tmp/$s.gguf ] || $B model gen --shape $s --quant q4_0 --seq 16384 --margin-steps 0 -o /tmp/$s.gguf >/dev/null 2>&1; done
for s in llama-1b llama-8b; do for b in baro-top baro-top-att baro-top baro-top-att; do
  t "$s $b"
  .bin/$b run -m /tmp/$s.gguf --json --passes 140 -i "Once upon a time" --check off --dispatch mega 2>/dev/null | python3 bench/stage_summary.py 65
done; done
t "done"
