#!/usr/bin/env bash
# Round 4 (bench/README.md). Carry .gl and .bin.
set -u
. bench/h200_env.sh
{
echo "== gate stories"; $B gate --steps 200 2>&1 | tail -3
for s in llama-1b llama-8b; do
  $B model gen --shape $s --quant q4_0 --margin-steps 0 -o /tmp/$s.gguf >/dev/null 2>&1
  for w in 256 512 1024; do
    echo "== gate $s wg $w"; $B gate -m /tmp/$s.gguf --steps 8 --wg-size $w 2>&1 | grep -E "GATE|bit-identical|rel-L2"
    echo "== bench $s wg $w"; $B bench -m /tmp/$s.gguf --tokens 128 --runs 5 --wg-size $w 2>&1 | tail -6
  done
done
echo "== run llama-8b"; $B run --passes 3 -m /tmp/llama-8b.gguf 2>&1 | tail -4
} > "$O/round4.txt" 2>&1
cat "$O/round4.txt"
