#!/usr/bin/env bash
# Round 14c (bench/README.md): does the att build's code size cost every stage? Binaries:
# main, att, v1 (att with 4 key quads and 2 value rows in flight: less unrolled code) and v2
# (v1 with the chunk combine a loop of 4-chunk steps instead of 16 unrolled). Per binary:
# the compiler's statistics (binary size, registers), `run --json` stage sums (1b, 8b,
# positions 0..139), and `bench` tg128 at depth 0 (one prompt) and 16250, binaries in turn.
set -u
. bench/h200_env.sh
exec > >(tee "$O/round14c${TAG:-}.log") 2>&1
t() { echo "== [$SECONDS s] $*"; }
BINS="baro-top baro-top-att baro-top-v1 baro-top-v2"
# The other binaries travel compressed (the carried tree is limited to 64 MiB).
[ -e .bin/extra.tar.xz ] && tar xJf .bin/extra.tar.xz -C .bin
for s in llama-1b llama-8b; do [ -s /tmp/$s.gguf ] || $B model gen --shape $s --quant q4_0 --seq 16384 --margin-steps 0 -o /tmp/$s.gguf >/dev/null 2>&1; done
echo "Once upon a time" > /tmp/one.txt; echo "Once" > /tmp/once.txt
for b in $BINS; do t "gate $b"; .bin/$b gate --steps 200 2>&1 | grep -E "GATE"; .bin/$b gate -m /tmp/llama-8b.gguf --steps 8 2>&1 | grep -E "GATE|rel-L2"; done
for b in $BINS; do t "stats $b"; .bin/$b run -m /tmp/llama-1b.gguf --json --passes 1 --no-instrument 2>/dev/null | python3 -c "
import json,sys
d=json.loads(sys.stdin.readline())
for p in d.get('pipelines',[]): print('  ', p['pipeline'], '; '.join('%s=%s'%(s['name'],s['value']) for s in p['stats']))"; done
for s in llama-1b llama-8b; do for b in $BINS; do
  t "$s $b stages"
  .bin/$b run -m /tmp/$s.gguf --json --passes 140 -i "Once upon a time" --check off --dispatch mega 2>/dev/null | python3 bench/stage_summary.py 65
done; done
for rep in 1 2; do for s in llama-1b llama-8b; do for b in $BINS; do
  t "rep $rep $s $b"
  .bin/$b bench -m /tmp/$s.gguf --prompts /tmp/one.txt --dispatch mega --tokens 128 --runs 2 2>&1 | grep -E "^mega.*tg128"
  .bin/$b bench -m /tmp/$s.gguf --prompts /tmp/once.txt --depth 16250 --dispatch mega --tokens 128 --runs 2 2>&1 | grep -E "^mega.*tg128"
done; done; done
nvidia-smi --query-gpu=clocks.sm,pstate,temperature.gpu,power.draw --format=csv,noheader
t "done"
