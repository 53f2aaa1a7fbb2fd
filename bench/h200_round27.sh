#!/usr/bin/env bash
# Round 27 (bench/README.md): rows in flight with int8 activations, the vector prologue,
# and the f32/q8 pipelines' driver binaries (back in $OUT for bench/sass.py).
# Carry .gl .bin. .bin/baro-top = 30553e5, .bin/baro-top-e04 = e04352f (round 26).
set -u
. bench/h200_env.sh
. bench/h200_lib.sh
exec > >(tee "$O/round27.log") 2>&1
OLD=.bin/baro-top-e04
t "main $(cat .bin/COMMIT) old $(cat .bin/COMMIT-e04)"
models
t "q8 gates at rows 4 (1b, 8b) and stories260K goldens"
$B gate --steps 200 2>&1 | grep -E "GATE|bit-identical"
for s in llama-1b llama-8b; do echo "-- $s q8 rows 4"; $B gate -m /tmp/$s.gguf --steps 8 --act q8 --rows 4 2>&1 | grep -E "GATE|bit-identical|rel-L2" ; done
t "pipeline caches (plain, llama-1b)"
for a in f32 q8; do
  $B run -m /tmp/llama-1b.gguf --no-instrument --act $a --passes 2 --check off -i Once --pipeline-cache-out $O/$a.vkc > /dev/null 2>&1
done
$B run -m /tmp/llama-1b.gguf --no-instrument --act q8 --rows 4 --passes 2 --check off -i Once --pipeline-cache-out $O/q8r4.vkc > /dev/null 2>&1
ls -la $O/*.vkc
abx() { # SHAPE PREDICT A B [binaries]
  t "ab $1: A $3 B $4 ${5:-}"
  $B bench ab -m /tmp/$1.gguf --prompts /tmp/one.txt --tokens 128 --pairs 2 $5 \
    --a "$3" --b "$4" --predict "$2" --log $O/predictions.log 2>&1 | tail -4
}
for s in llama-1b llama-8b; do
  abx $s "3%..15%" "--dispatch mega --act q8" "--dispatch mega --act q8 --rows 2"
  abx $s "5%..20%" "--dispatch mega --act q8" "--dispatch mega --act q8 --rows 4"
  abx $s "0%..3%" "--dispatch mega --act q8" "--dispatch mega --act q8" "--a-binary $OLD --b-binary $B"
done
for r in 2 4; do for s in llama-1b llama-8b; do
  t "stages $s q8 rows $r"
  $B run -m /tmp/$s.gguf --json --passes 100 -i "Once upon a time" --check off --dispatch mega --act q8 --rows $r 2>/dev/null > /tmp/run.jsonl
  head -1 /tmp/run.jsonl | python3 -c "
import json,sys
d=json.loads(sys.stdin.readline())
for p in d.get('pipelines',[]): print('  ', p['pipeline'], '; '.join('%s=%s'%(s['name'],s['value']) for s in p['stats']))"
  python3 bench/stage_summary.py < /tmp/run.jsonl
done; done
nvidia-smi --query-gpu=clocks.sm,pstate,temperature.gpu,power.draw --format=csv,noheader
t "done"
