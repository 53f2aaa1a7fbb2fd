#!/usr/bin/env bash
# Round 18 (bench/README.md): the Q4_0 row loop software-pipelined (.bin/baro-top) against
# 8470523 (.bin/baro-top-old, in extra.tar.xz): gates and goldens on the new build, `bench ab`
# with the frozen predictions (parity across the binaries must be OK), 8b stage sums and
# pipeline statistics. Carry .gl and .bin.
set -u
. bench/h200_env.sh
exec > >(tee "$O/round18${TAG:-}.log") 2>&1
t() { echo "== [$SECONDS s] $*"; }
[ -e .bin/extra.tar.xz ] && tar xJf .bin/extra.tar.xz -C .bin
A=.bin/baro-top-old
t "new $(cat .bin/COMMIT) old $(cat .bin/COMMIT-old)"
for s in llama-1b llama-8b; do [ -s /tmp/$s.gguf ] || $B model gen --shape $s --quant q4_0 --seq 16384 --margin-steps 0 -o /tmp/$s.gguf >/dev/null 2>&1; done
echo "Once upon a time" > /tmp/one.txt; echo "Once" > /tmp/once.txt
t "gates (new)"
for kv in f32 f16; do echo "-- stories260K kv $kv"; $B gate --steps 200 --kv $kv 2>&1 | grep -E "GATE|bit-identical|rel-L2"; done
for s in llama-1b llama-8b; do for kv in f32 f16; do echo "-- $s kv $kv"; $B gate -m /tmp/$s.gguf --steps 8 --kv $kv 2>&1 | grep -E "GATE|bit-identical|rel-L2"; done; done
for m in mega multi; do a=$($B generate --backend vulkan --dispatch $m -n 200 2>/dev/null | md5sum | cut -c1-12); c=$($B generate -n 200 2>/dev/null | md5sum | cut -c1-12); echo "golden $m vulkan $a cpu $c $([ "$a" = "$c" ] && echo SAME || echo DIFFERENT)"; done
ab() { # shape depth pairs predict
  t "ab $1 depth $2 (A old, B new)"
  local pr=/tmp/once.txt dd=$(( $2 > 6 ? $2 - 6 : 0 )); [ "$2" = 0 ] && pr=/tmp/one.txt
  $B bench ab -m /tmp/$1.gguf --prompts $pr --depth $dd --tokens 128 --pairs $3 --a-binary $A --b-binary $B \
    --a "--dispatch mega" --b "--dispatch mega" --predict "$4" --log $O/predictions.log 2>&1 | tail -4
}
ab llama-8b 0 3 "4%..12%"; ab llama-1b 0 3 "0%..4%"; ab llama-8b 3968 2 "3%..10%"
for b in $A $B; do
  t "stages llama-8b $b"
  $b run -m /tmp/llama-8b.gguf --json --passes 140 -i "Once upon a time" --check off --dispatch mega 2>/dev/null > /tmp/run.jsonl
  head -1 /tmp/run.jsonl | python3 -c "
import json,sys
d=json.loads(sys.stdin.readline())
for p in d.get('pipelines',[]): print('  ', p['pipeline'], '; '.join('%s=%s'%(s['name'],s['value']) for s in p['stats']))"
  python3 bench/stage_summary.py 65 < /tmp/run.jsonl
done
nvidia-smi --query-gpu=clocks.sm,pstate,temperature.gpu,power.draw --format=csv,noheader
t "done"
