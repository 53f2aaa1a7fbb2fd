#!/usr/bin/env bash
# End-of-session verification on the H200: gates, throughput at the default workgroup size,
# event-ring overhead, run/--json. Carry .gl and .bin.
set -u
. bench/h200_env.sh
{
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
echo "== gate stories"; $B gate --steps 200 2>&1 | tail -7
$B generate --backend vulkan --mode mega -n 200 2>/dev/null > /tmp/m.txt; $B generate -n 200 2>/dev/null > /tmp/c.txt; cmp /tmp/m.txt /tmp/c.txt && echo "golden mega OK"
$B generate --backend vulkan --mode multi -n 200 2>/dev/null > /tmp/u.txt; cmp /tmp/u.txt /tmp/c.txt && echo "golden multi OK"
for q in f32 f16 q8_0 q4_0; do $B model gen --shape tiny --quant $q -o /tmp/t_$q.gguf 2>/dev/null; echo "== gate tiny $q"; $B gate -m /tmp/t_$q.gguf --steps 64 2>&1 | grep -E "GATE|bit-identical"; done
echo "== oversubscribed"; $B gate --steps 2 --grid 20000 --modes mega 2>&1 | grep -E "^pass" | cut -c1-260
echo "== stall"; $B gate --steps 2 --modes mega --inject-stall-wg 3 2>&1 | grep -E "^pass" | cut -c1-260
for s in llama-1b llama-8b; do
  $B model gen --shape $s --quant q4_0 --margin-steps 0 -o /tmp/$s.gguf >/dev/null 2>&1
  echo "== gate $s"; $B gate -m /tmp/$s.gguf --steps 16 2>&1 | tail -7
  echo "== bench $s"; $B bench -m /tmp/$s.gguf --tokens 128 --runs 5 2>&1 | tail -6
  echo "== overhead $s"; $B bench -m /tmp/$s.gguf --tokens 128 --runs 7 --arms mega+instr,mega 2>&1 | tail -5
done
echo "== run 8b ring on"; $B run --passes 3 -m /tmp/llama-8b.gguf 2>&1 | tail -4
echo "== run 8b ring off"; $B run --passes 3 --no-instrument -m /tmp/llama-8b.gguf 2>&1 | tail -4
echo "== probe 1b"; $B devices --probe --probe-max 1024 -m /tmp/llama-1b.gguf 2>&1 | tail -1
} > "$O/final.txt" 2>&1
$B run --json --passes 2 -m /tmp/llama-1b.gguf > "$O/run_1b.jsonl" 2>/dev/null
cat "$O/final.txt"
