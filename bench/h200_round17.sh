#!/usr/bin/env bash
# Round 17 (bench/README.md): rows in flight per team and the workgroup shape, one binary
# (.bin/baro-top): `bench ab` rows 1 vs 4, rows 1 vs 2, 1024 x 132 vs 512 x 264 (with a gate),
# one prompt, both shapes, frozen predictions. Carry .gl and .bin.
set -u
. bench/h200_env.sh
exec > >(tee "$O/round17${TAG:-}.log") 2>&1
t() { echo "== [$SECONDS s] $*"; }
t "build $(cat .bin/COMMIT)"
for s in llama-1b llama-8b; do [ -s /tmp/$s.gguf ] || $B model gen --shape $s --quant q4_0 --seq 16384 --margin-steps 0 -o /tmp/$s.gguf >/dev/null 2>&1; done
echo "Once upon a time" > /tmp/one.txt
ab() { # shape A B predict
  t "ab $1: A [$2] B [$3]"
  $B bench ab -m /tmp/$1.gguf --prompts /tmp/one.txt --tokens 128 --pairs 3 \
    --a "--dispatch mega $2" --b "--dispatch mega $3" --predict "$4" --log $O/predictions.log 2>&1 | tail -4
}
ab llama-1b "--rows 1" "--rows 4" "-3%..3%"; ab llama-8b "--rows 1" "--rows 4" "0%..6%"
ab llama-1b "--rows 1" "--rows 2" "-2%..2%"; ab llama-8b "--rows 1" "--rows 2" "-2%..2%"
t "gate 512 x 264"
for s in llama-1b llama-8b; do $B gate -m /tmp/$s.gguf --steps 8 --wg-size 512 --grid 264 2>&1 | grep -E "GATE|bit-identical|rel-L2|rror|grid"; done
ab llama-1b "--wg-size 1024 --grid 132" "--wg-size 512 --grid 264" "-8%..4%"
ab llama-8b "--wg-size 1024 --grid 132" "--wg-size 512 --grid 264" "-8%..4%"
nvidia-smi --query-gpu=clocks.sm,pstate,temperature.gpu,power.draw --format=csv,noheader
t "done"
