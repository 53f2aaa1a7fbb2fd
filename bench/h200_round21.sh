#!/usr/bin/env bash
# Round 21 (bench/README.md): two units per iteration (branch u2) and the plain pipeline's own
# statistics. .bin/baro-top = main (c1f54ed's shader); .bin/extra.tar.xz: baro-top-one (r20
# 96bedf6), baro-top-u2 (u2). Carry .gl and .bin.
set -u
. bench/h200_env.sh
. bench/h200_lib.sh
exec > >(tee "$O/round21${TAG:-}.log") 2>&1
[ -e .bin/extra.tar.xz ] && tar xJf .bin/extra.tar.xz -C .bin
ONE=.bin/baro-top-one; U2=.bin/baro-top-u2
t "main $(cat .bin/COMMIT) one $(cat .bin/COMMIT-one) u2 $(cat .bin/COMMIT-u2)"
models
plain() {
  t "plain pipeline $1 $2"
  $2 run -m /tmp/$1.gguf --json --ring-every 1000 --passes 3 -i "Once" --check off 2>/dev/null | head -1 | python3 -c "
import json,sys
d=json.loads(sys.stdin.readline())
for p in d.get('pipelines',[]): print('  ', p['pipeline'], '; '.join('%s=%s'%(s['name'],s['value']) for s in p['stats']))"
  $2 run -m /tmp/$1.gguf --json --no-instrument --passes 140 -i "Once upon a time" --check off 2>/dev/null | python3 bench/stage_summary.py 65 | grep gpu
}
for s in llama-1b llama-8b; do for b in $B $ONE $U2; do plain $s $b; done; done
gates $U2
for s in llama-1b llama-8b; do for b in $B $U2; do stages $s $b; done; done
ab llama-1b 0 3 $B $U2 "2%..6%"; ab llama-8b 0 3 $B $U2 "2%..8%"
ab llama-1b 3968 2 $B $U2 "2%..6%"
nvidia-smi --query-gpu=clocks.sm,pstate,temperature.gpu,power.draw --format=csv,noheader
t "done"
