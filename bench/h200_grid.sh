#!/usr/bin/env bash
# Round 2: grid sweep (see bench/README.md). Carry .gl and .bin.
set -u
. bench/h200_env.sh
$B devices --probe --probe-max 2048 2>&1 | tail -3
for s in llama-1b llama-8b; do
  $B model gen --shape $s --quant q4_0 --margin-steps 0 -o /tmp/$s.gguf >/dev/null 2>&1
  for g in 132 264 528; do
    echo "== $s grid $g"; $B bench -m /tmp/$s.gguf --tokens 128 --runs 5 --grid $g 2>&1 | tail -6
  done
done
