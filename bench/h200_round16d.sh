#!/usr/bin/env bash
# Round 16c's build as it lands (.bin/baro-top, shader = 8470523) against main before round 16
# (.bin/baro-top-old, 08ce98e, in extra.tar.xz) at depth 16256, both shapes: the context rule
# on the landed build. Carry .gl and .bin.
set -u
. bench/h200_env.sh
exec > >(tee "$O/round16d${TAG:-}.log") 2>&1
t() { echo "== [$SECONDS s] $*"; }
[ -e .bin/extra.tar.xz ] && tar xJf .bin/extra.tar.xz -C .bin
A=.bin/baro-top-old
t "new $(cat .bin/COMMIT) old $(cat .bin/COMMIT-old)"
for s in llama-1b llama-8b; do [ -s /tmp/$s.gguf ] || $B model gen --shape $s --quant q4_0 --seq 16384 --margin-steps 0 -o /tmp/$s.gguf >/dev/null 2>&1; done
echo "Once" > /tmp/once.txt
for s in llama-1b llama-8b; do
  t "ab $s depth 16256 (A old, B new)"
  $B bench ab -m /tmp/$s.gguf --prompts /tmp/once.txt --depth 16250 --tokens 128 --pairs 2 --a-binary $A --b-binary $B \
    --a "--dispatch mega" --b "--dispatch mega" --predict "2%..6%" --log $O/predictions.log 2>&1 | tail -4
done
nvidia-smi --query-gpu=clocks.sm,pstate,temperature.gpu,power.draw --format=csv,noheader
t "done"
