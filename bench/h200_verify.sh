#!/usr/bin/env bash
# Short verification of the committed kernel on the H200. Carry .gl and .bin.
set -u
. bench/h200_env.sh
echo "== gate stories"; $B gate --steps 200 2>&1 | grep -E "GATE|bit-identical"
$B generate --backend vulkan -n 200 2>/dev/null > /tmp/m.txt; $B generate -n 200 2>/dev/null | cmp - /tmp/m.txt && echo "golden mega OK"
for q in f32 f16 q8_0 q4_0; do $B model gen --shape tiny --quant $q -o /tmp/t_$q.gguf 2>/dev/null; echo "== gate tiny $q"; $B gate -m /tmp/t_$q.gguf --steps 32 2>&1 | grep -E "GATE"; done
for s in llama-1b llama-8b; do
  $B model gen --shape $s --quant q4_0 --margin-steps 0 -o /tmp/$s.gguf >/dev/null 2>&1
  echo "== gate $s"; $B gate -m /tmp/$s.gguf --steps 8 2>&1 | grep -E "GATE|bit-identical|rel-L2"
  echo "== bench $s"; $B bench -m /tmp/$s.gguf --tokens 128 --runs 5 2>&1 | tail -6
done
