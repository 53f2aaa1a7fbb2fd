#!/usr/bin/env bash
# Round 13 (bench/README.md), first call: the driver compiler's registers and spills per
# build, the ring with its unsampled passes on a plain pipeline, and decode at contexts
# 256 / 4096 / 16384 beside llama.cpp (CUDA) at the same depths, in one call. Carry .gl, .bin
# (baro-top + COMMIT) and .peer. Sections print the seconds since the start.
set -u
. bench/h200_env.sh
exec > >(tee "$O/round13${TAG:-}.log") 2>&1
t() { echo "== [$SECONDS s] $*"; }
t "new $(cat .bin/COMMIT)"
( mkdir -p /tmp/peer && tar xJf .peer/llama.cpp.tar.xz -C /tmp/peer && cd /tmp/peer/llama.cpp &&
  cmake -B build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DCMAKE_BUILD_TYPE=Release > /tmp/peer/cmake.log 2>&1 &&
  nice cmake --build build --target llama-bench -j 12 > /tmp/peer/build.log 2>&1; echo "peer build rc $?" > /tmp/peer/done ) &
for s in llama-1b llama-8b; do [ -s /tmp/$s.gguf ] || $B model gen --shape $s --quant q4_0 --seq 16384 --margin-steps 0 -o /tmp/$s.gguf >/dev/null 2>&1; done
ls -l /tmp/llama-*.gguf
echo "Once upon a time" > /tmp/one.txt
for L in 256 4096 16384; do python3 -c "import sys; print(('once upon a time there was a little dog '*500)[:$L-129])" > /tmp/ctx$L.txt; done
t "gates"
$B gate --steps 200 2>&1 | grep -E "GATE|bit-identical"
for s in llama-1b llama-8b; do echo "-- $s"; $B gate -m /tmp/$s.gguf --steps 8 2>&1 | grep -E "GATE|bit-identical|rel-L2"; done
t "compiler statistics per build (run --json: the start line's pipelines)"
stats() { python3 -c "
import json,sys
d=json.loads(sys.stdin.readline())
for p in d.get('pipelines',[]):
    print('  ', p['pipeline'], '|', p['executable'], '| subgroup', p['subgroup_size'], '|', '; '.join('%s=%s'%(s['name'],s['value']) for s in p['stats']))
if not d.get('pipelines'): print('   (no pipeline statistics reported)')
"; }
for s in llama-1b llama-8b; do for kv in f32 f16; do
  echo "-- $s kv $kv plain";        $B run -m /tmp/$s.gguf --json --passes 1 --kv $kv --no-instrument 2>/dev/null | stats
  echo "-- $s kv $kv instrumented, ring every 8"; $B run -m /tmp/$s.gguf --json --passes 1 --kv $kv --ring-every 8 2>/dev/null | stats
done; done
t "(a) the ring: every pass, and every 8th (chain 16, one prompt, tg128, 7 runs)"
for s in llama-1b llama-8b; do
  $B bench -m /tmp/$s.gguf --prompts /tmp/one.txt --dispatch mega --instrument both --tokens 128 --runs 7 2>&1 | grep -E "^mega|pipeline"
  $B bench -m /tmp/$s.gguf --prompts /tmp/one.txt --dispatch mega --instrument both --ring-every 8 --tokens 128 --runs 7 2>&1 | grep -E "^mega"
done
t "(b) context: prompt L-128 tokens, tg128, mega, one run; then llama.cpp at the same depths"
for s in llama-1b llama-8b; do for L in 256 4096 16384; do
  echo "-- $s L=$L"; $B bench -m /tmp/$s.gguf --prompts /tmp/ctx$L.txt --dispatch mega --tokens 128 --runs 1 2>&1 | grep -E "^mega"
done; done
t "waiting for the peer build"; while [ ! -e /tmp/peer/done ]; do sleep 2; done; cat /tmp/peer/done
P=/tmp/peer/llama.cpp/build/bin/llama-bench
for s in llama-1b llama-8b; do t "peer $s"; [ -x $P ] && $P -m /tmp/$s.gguf -p 0 -n 128 -d 128,3968,16256 -r 3 -ngl 99 2>&1 | grep -E "q4_0|tg128|build"; done
nvidia-smi --query-gpu=clocks.sm,pstate,temperature.gpu,power.draw --format=csv,noheader
t "done"
