#!/usr/bin/env bash
# One device call: gate + bench + recordings on the H200 (see bench/README.md).
# Usage (device tool, carry .gl and .bin): bash bench/h200.sh [smoke|full]
set -u
what=${1:-full}
. bench/h200_env.sh
run() { local name=$1; shift; echo "== $name: $*"; ( time "$@" ) >"$O/$name.txt" 2>&1; echo "rc=$?" >>"$O/$name.txt"; tail -n 12 "$O/$name.txt"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$O/nvidia-smi.txt" 2>&1
run devices $B devices
run gate_stories $B gate --steps 200
$B generate --backend vulkan --dispatch mega -n 200 >"$O/gen_mega.txt" 2>"$O/gen_mega.err"; echo "gen mega rc=$?"
$B generate --backend vulkan --dispatch multi -n 200 >"$O/gen_multi.txt" 2>"$O/gen_multi.err"; echo "gen multi rc=$?"
$B generate -n 200 >"$O/gen_cpu.txt" 2>/dev/null
cmp "$O/gen_mega.txt" "$O/gen_cpu.txt" && echo "golden mega OK"; cmp "$O/gen_multi.txt" "$O/gen_cpu.txt" && echo "golden multi OK"
for q in f32 f16 q8_0 q4_0; do
  $B model gen --shape tiny --quant $q -o /tmp/tiny_$q.gguf 2>/dev/null
  run gate_tiny_$q $B gate -m /tmp/tiny_$q.gguf --steps 64
done
run oversubscribed $B gate --steps 4 --grid 20000 --dispatch mega
run stall $B gate --steps 4 --dispatch mega --inject-stall-wg 3
[ "$what" = smoke ] && exit 0
for s in llama-1b llama-8b; do
  $B model gen --shape $s --quant q4_0 --margin-steps 4 -o /tmp/$s.gguf >"$O/gen_$s.txt" 2>&1
  run gate_$s $B gate -m /tmp/$s.gguf --steps 16
  run bench_$s $B bench -m /tmp/$s.gguf --tokens 128 --runs 5 --out "$O/bench_$s.json"
done
