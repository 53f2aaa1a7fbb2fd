#!/usr/bin/env bash
# Round 19 (bench/README.md): split-K (baro-top-sk, 08b6a10) and the rope pair over two teams
# (baro-top-skr, 82b046c; both from branch splitk, in .bin/extra.tar.xz) against main
# (.bin/baro-top): gates and goldens, 1b stage sums, `bench ab` with the frozen predictions;
# then the local-memory variant (baro-top-lm, branch attlm): pipeline statistics, stage
# sums, `bench ab` (its gates are not in this call: it is bit-identical, parity checks it).
# Carry .gl and .bin.
set -u
. bench/h200_env.sh
exec > >(tee "$O/round19${TAG:-}.log") 2>&1
t() { echo "== [$SECONDS s] $*"; }
[ -e .bin/extra.tar.xz ] && tar xJf .bin/extra.tar.xz -C .bin
SK=.bin/baro-top-sk; SKR=.bin/baro-top-skr
t "main $(cat .bin/COMMIT) sk $(cat .bin/COMMIT-sk 2>/dev/null) skr $(cat .bin/COMMIT-skr 2>/dev/null)"
for s in llama-1b llama-8b; do [ -s /tmp/$s.gguf ] || $B model gen --shape $s --quant q4_0 --seq 16384 --margin-steps 0 -o /tmp/$s.gguf >/dev/null 2>&1; done
echo "Once upon a time" > /tmp/one.txt; echo "Once" > /tmp/once.txt
for b in $SK $SKR; do
  t "gates $b"
  for kv in f32 f16; do echo "-- stories260K kv $kv"; $b gate --steps 200 --kv $kv 2>&1 | grep -E "GATE|bit-identical|rel-L2"; done
  for s in llama-1b llama-8b; do for kv in f32 f16; do echo "-- $s kv $kv"; $b gate -m /tmp/$s.gguf --steps 8 --kv $kv 2>&1 | grep -E "GATE|bit-identical|rel-L2"; done; done
  for m in mega multi; do a=$($b generate --backend vulkan --dispatch $m -n 200 2>/dev/null | md5sum | cut -c1-12); c=$($b generate -n 200 2>/dev/null | md5sum | cut -c1-12); echo "golden $m vulkan $a cpu $c $([ "$a" = "$c" ] && echo SAME || echo DIFFERENT)"; done
done
for rep in 1 2; do for b in $B $SK $SKR; do
  t "stages llama-1b rep $rep $b"
  $b run -m /tmp/llama-1b.gguf --json --passes 140 -i "Once upon a time" --check off --dispatch mega 2>/dev/null > /tmp/run.jsonl
  python3 bench/stage_summary.py 65 < /tmp/run.jsonl
done; done
ab() { # shape depth A B predict
  t "ab $1 depth $2: A $3 B $4"
  local pr=/tmp/once.txt dd=$(( $2 > 6 ? $2 - 6 : 0 )); [ "$2" = 0 ] && pr=/tmp/one.txt
  $B bench ab -m /tmp/$1.gguf --prompts $pr --depth $dd --tokens 128 --pairs 3 --a-binary $3 --b-binary $4 \
    --a "--dispatch mega" --b "--dispatch mega" --predict "$5" --log $O/predictions.log 2>&1 | tail -4
}
ab llama-1b 0 $B $SK "2%..7%"; ab llama-1b 0 $SK $SKR "1%..4%"
ab llama-8b 0 $B $SKR "-0.5%..0.5%"; ab llama-1b 3968 $B $SKR "2%..9%"
LM=.bin/baro-top-lm
t "local memory: main vs lm ($(cat .bin/COMMIT-lm 2>/dev/null))"
for b in $B $LM; do
  $b run -m /tmp/llama-1b.gguf --json --passes 140 -i "Once upon a time" --check off --dispatch mega 2>/dev/null > /tmp/run.jsonl
  head -1 /tmp/run.jsonl | python3 -c "
import json,sys
d=json.loads(sys.stdin.readline())
for p in d.get('pipelines',[]): print('  ', p['pipeline'], '; '.join('%s=%s'%(s['name'],s['value']) for s in p['stats']))"
  python3 bench/stage_summary.py 65 < /tmp/run.jsonl
done
ab llama-1b 0 $B $LM "3%..7%"; ab llama-8b 0 $B $LM "2%..5%"
nvidia-smi --query-gpu=clocks.sm,pstate,temperature.gpu,power.draw --format=csv,noheader
t "done"
