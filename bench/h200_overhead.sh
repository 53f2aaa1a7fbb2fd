#!/usr/bin/env bash
# Event-ring overhead only (round 5). Carry .gl and .bin.
set -u
. bench/h200_env.sh
echo "== gate stories"; $B gate --steps 64 2>&1 | grep -E "GATE|bit-identical"
for s in llama-1b llama-8b; do
  $B model gen --shape $s --quant q4_0 --margin-steps 0 -o /tmp/$s.gguf >/dev/null 2>&1
  echo "== gate $s"; $B gate -m /tmp/$s.gguf --steps 8 2>&1 | grep -E "GATE|bit-identical"
  echo "== overhead $s mega"; $B bench -m /tmp/$s.gguf --tokens 128 --runs 9 --dispatch mega --instrument both 2>&1 | tail -5
  echo "== overhead $s multi"; $B bench -m /tmp/$s.gguf --tokens 128 --runs 5 --dispatch multi --instrument both 2>&1 | tail -5
done
