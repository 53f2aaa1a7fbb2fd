#!/usr/bin/env bash
# Issue 12 on the H200: goldens, gates and throughput unchanged after the hardening commits;
# a hung pass exits within seconds of the watchdog; NaN weights raise the non-finite bit.
# Carry .gl and .bin. Output: $OUT/hardening.log.
set -u
. bench/h200_env.sh
exec > >(tee "$O/hardening.log") 2>&1
ts() { date +%s.%N; }
echo "== commit $(cat .bin/COMMIT 2>/dev/null)"
echo "== gate stories 200"; $B gate --steps 200 2>&1 | grep -E "GATE|bit-identical|fail word"
$B generate --backend vulkan -n 200 2>/dev/null > /tmp/m.txt; $B generate -n 200 2>/dev/null | cmp - /tmp/m.txt && echo "golden mega OK"
$B generate --backend vulkan --mode multi -n 200 2>/dev/null | cmp - /tmp/m.txt && echo "golden multi OK"
for q in f32 f16 q8_0 q4_0; do $B model gen --shape tiny --quant $q -o /tmp/t_$q.gguf 2>/dev/null; echo "== gate tiny $q"; $B gate -m /tmp/t_$q.gguf --steps 32 2>&1 | grep -E "GATE"; done
echo "== NaN classifier tail (tiny f32, last 256 bytes NaN)"
cp /tmp/t_f32.gguf /tmp/nan.gguf
python3 - <<'PY'
import os, struct
p='/tmp/nan.gguf'; n=os.path.getsize(p)
with open(p,'r+b') as f:
    f.seek(n-256); f.write(struct.pack('<f', float('nan'))*64)
PY
$B generate --backend vulkan -m /tmp/nan.gguf -n 3 > /tmp/nan.out 2>&1; echo "status $?"; grep -E "fail-word|error" /tmp/nan.out | head -3
$B gate -m /tmp/nan.gguf --steps 3 2>&1 | tail -9
echo "== stall injection"; t0=$EPOCHREALTIME; $B gate --inject-stall-wg 3 --steps 3 2>&1 | grep -E "FAIL|GATE" | head -3; echo "took $(echo "$(ts) - $t0" | bc) s"
echo "== hung: generate multi grid 65535 (automatic watchdog)"
t0=$(ts); $B generate --backend vulkan --mode multi --grid 65535 -n 5 2>&1 | while IFS= read -r l; do echo "[$(echo "$(ts) - $t0" | bc)] $l"; done; echo "[$(echo "$(ts) - $t0" | bc)] exited"
echo "== hung: gate grid 65535 steps 3"
t0=$(ts); $B gate --grid 65535 --steps 3 2>&1 | while IFS= read -r l; do echo "[$(echo "$(ts) - $t0" | bc)] $l"; done | grep -E "watchdog|GATE|error|FAIL" | head -6; echo "[$(echo "$(ts) - $t0" | bc)] exited"
for s in llama-1b llama-8b; do
  $B model gen --shape $s --quant q4_0 --margin-steps 0 -o /tmp/$s.gguf >/dev/null 2>&1
  echo "== gate $s"; $B gate -m /tmp/$s.gguf --steps 8 2>&1 | grep -E "GATE|bit-identical|rel-L2"
  echo "== bench $s"; $B bench -m /tmp/$s.gguf --tokens 128 --runs 5 2>&1 | tail -6
done
