#!/usr/bin/env bash
# Round 15c (bench/README.md): one query head per attention unit at short contexts (branch
# att-small, .bin/baro-top-small in extra.tar.xz) against main (.bin/baro-top): gates and
# goldens on both (main's last shader edit, the slow_work test hook, had run on lavapipe only),
# `run --json` stage sums 1b and 8b (two runs each, in turn), `bench ab` one prompt and depth
# 3968 with the frozen predictions. Carry .gl and .bin.
set -u
. bench/h200_env.sh
exec > >(tee "$O/round15c${TAG:-}.log") 2>&1
t() { echo "== [$SECONDS s] $*"; }
[ -e .bin/extra.tar.xz ] && [ ! -e .bin/baro-top-small ] && tar xJf .bin/extra.tar.xz -C .bin
S=.bin/baro-top-small
t "main $(cat .bin/COMMIT) small $(cat .bin/COMMIT-small)"
for s in llama-1b llama-8b; do [ -s /tmp/$s.gguf ] || $B model gen --shape $s --quant q4_0 --seq 16384 --margin-steps 0 -o /tmp/$s.gguf >/dev/null 2>&1; done
echo "Once upon a time" > /tmp/one.txt; echo "Once" > /tmp/once.txt
for b in $B $S; do
  t "gates $b"
  for kv in f32 f16; do echo "-- stories260K kv $kv"; $b gate --steps 200 --kv $kv 2>&1 | grep -E "GATE|bit-identical|rel-L2"; done
  for s in llama-1b llama-8b; do for kv in f32 f16; do echo "-- $s kv $kv"; $b gate -m /tmp/$s.gguf --steps 8 --kv $kv 2>&1 | grep -E "GATE|bit-identical|rel-L2"; done; done
  for m in mega multi; do a=$($b generate --backend vulkan --dispatch $m -n 200 2>/dev/null | md5sum | cut -c1-12); c=$($b generate -n 200 2>/dev/null | md5sum | cut -c1-12); echo "golden $m vulkan $a cpu $c $([ "$a" = "$c" ] && echo SAME || echo DIFFERENT)"; done
done
for s in llama-1b llama-8b; do for rep in 1 2; do for b in $B $S; do
  t "stages $s rep $rep $b"
  $b run -m /tmp/$s.gguf --json --passes 140 -i "Once upon a time" --check off --dispatch mega 2>/dev/null > /tmp/run.jsonl
  python3 bench/stage_summary.py 65 < /tmp/run.jsonl
done; done; done
ab() { # shape depth pairs predict
  t "ab $1 depth $2 (A main, B small)"
  local pr=/tmp/once.txt dd=$(( $2 > 6 ? $2 - 6 : 0 )); [ "$2" = 0 ] && pr=/tmp/one.txt
  $B bench ab -m /tmp/$1.gguf --prompts $pr --depth $dd --tokens 128 --pairs $3 --a-binary $B --b-binary $S \
    --a "--dispatch mega" --b "--dispatch mega" --predict "$4" --log $O/predictions.log 2>&1 | tail -4
}
ab llama-1b 0 3 "1%..3%";  ab llama-8b 0 3 "0%..1%"
ab llama-1b 3968 2 "-0.5%..0.5%"; ab llama-8b 3968 2 "-0.5%..0.5%"
nvidia-smi --query-gpu=clocks.sm,pstate,temperature.gpu,power.draw --format=csv,noheader
t "done"
