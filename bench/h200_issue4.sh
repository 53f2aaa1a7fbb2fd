#!/usr/bin/env bash
# Issues 3+4 on the H200 in one device call: gates, mega vs multi throughput, instrumentation
# overhead (ring on vs off, interleaved), a JSON excerpt. Carry .gl and .bin.
set -u
. bench/h200_env.sh
{
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
echo "== gate stories"; $B gate --steps 200 2>&1 | tail -8
$B generate --backend vulkan --dispatch mega -n 200 2>/dev/null > /tmp/m.txt; $B generate -n 200 2>/dev/null > /tmp/c.txt; cmp /tmp/m.txt /tmp/c.txt && echo "golden mega OK"
$B generate --backend vulkan --dispatch multi -n 200 2>/dev/null > /tmp/u.txt; cmp /tmp/u.txt /tmp/c.txt && echo "golden multi OK"
for q in f32 f16 q8_0 q4_0; do $B model gen --shape tiny --quant $q -o /tmp/t_$q.gguf 2>/dev/null; echo "== gate tiny $q"; $B gate -m /tmp/t_$q.gguf --steps 64 2>&1 | grep -E "GATE|bit-identical|rel-L2"; done
echo "== oversubscribed"; $B gate --steps 2 --grid 20000 --dispatch mega 2>&1 | grep -E "^pass|GATE"
echo "== stall"; $B gate --steps 2 --dispatch mega --inject-stall-wg 3 2>&1 | grep -E "^pass|GATE"
for s in llama-1b llama-8b; do
  $B model gen --shape $s --quant q4_0 --margin-steps 0 -o /tmp/$s.gguf >/dev/null 2>&1
  echo "== gate $s"; $B gate -m /tmp/$s.gguf --steps 16 2>&1 | tail -8
  echo "== bench $s mega vs multi"; $B bench -m /tmp/$s.gguf --tokens 128 --runs 5 2>&1 | tail -6
  echo "== bench $s instrumentation overhead (mega)"; $B bench -m /tmp/$s.gguf --tokens 128 --runs 7 --dispatch mega --instrument both 2>&1 | tail -6
  echo "== bench $s instrumentation overhead (multi)"; $B bench -m /tmp/$s.gguf --tokens 128 --runs 5 --dispatch multi --instrument both 2>&1 | tail -6
done
echo "== run --json llama-1b (3 passes)"; $B run --json --passes 3 -m /tmp/llama-1b.gguf 2>&1 | cut -c1-1500
echo "== run llama-8b"; $B run --passes 4 -m /tmp/llama-8b.gguf 2>&1 | tail -5
} > "$O/issue4.txt" 2>&1
$B run --json --spans --passes 2 -m /tmp/llama-1b.gguf > "$O/run_1b.jsonl" 2>/dev/null
tail -c 9000 "$O/issue4.txt"
