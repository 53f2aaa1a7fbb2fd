#!/usr/bin/env bash
# Round 13 (bench/README.md), first call: the driver compiler's registers and spills per
# build (main and the `att` branch), the ring with its unsampled passes on a plain pipeline,
# and decode at depths 128 / 3968 / 16256 (`bench --depth`, f32 and f16 KV) beside llama.cpp
# (CUDA) at the same depths. Carry .gl, .bin (baro-top + COMMIT, baro-top-att + COMMIT-att)
# and .peer. The peer builds in the background; if it is not done by the end, round 14's call
# runs it. Sections print the seconds since the start.
set -u
. bench/h200_env.sh
exec > >(tee "$O/round13${TAG:-}.log") 2>&1
t() { echo "== [$SECONDS s] $*"; }
t "main $(cat .bin/COMMIT) att $(cat .bin/COMMIT-att)"
[ -e /tmp/peer/llama.cpp ] || ( mkdir -p /tmp/peer && tar xJf .peer/llama.cpp.tar.xz -C /tmp/peer && cd /tmp/peer/llama.cpp &&
  cmake -B build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DCMAKE_BUILD_TYPE=Release > /tmp/peer/cmake.log 2>&1 &&
  nice cmake --build build --target llama-bench -j 12 > /tmp/peer/build.log 2>&1; echo "peer build rc $?" > /tmp/peer/done ) &
for s in llama-1b llama-8b; do [ -s /tmp/$s.gguf ] || $B model gen --shape $s --quant q4_0 --seq 16384 --margin-steps 0 -o /tmp/$s.gguf >/dev/null 2>&1; done
ls -l /tmp/llama-*.gguf
echo "Once upon a time" > /tmp/one.txt
echo "Once" > /tmp/once.txt
t "gates (main)"
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
for b in baro-top baro-top-att; do for s in llama-1b llama-8b; do for kv in f32 f16; do
  echo "-- $b $s kv $kv plain";        .bin/$b run -m /tmp/$s.gguf --json --passes 1 --kv $kv --no-instrument 2>/dev/null | stats
  echo "-- $b $s kv $kv instrumented, ring every 8"; .bin/$b run -m /tmp/$s.gguf --json --passes 1 --kv $kv --ring-every 8 2>/dev/null | stats
done; done; done
t "(a) the ring: every pass, and every 8th (chain 16, one prompt, tg128, 7 runs)"
for s in llama-1b llama-8b; do
  $B bench -m /tmp/$s.gguf --prompts /tmp/one.txt --dispatch mega --instrument both --tokens 128 --runs 7 2>&1 | grep -E "^mega|pipeline"
  $B bench -m /tmp/$s.gguf --prompts /tmp/one.txt --dispatch mega --instrument both --ring-every 8 --tokens 128 --runs 7 2>&1 | grep -E "^mega"
done
t "(b) depth: prompt 'Once' at depth d-5 (tg128 at positions ~d .. d+127), mega, 3 runs, f32 and f16 KV"
for s in llama-1b llama-8b; do for kv in f32 f16; do for d in 128 3968 16256; do
  echo "-- $s kv $kv d=$d"; $B bench -m /tmp/$s.gguf --prompts /tmp/once.txt --depth $((d-5)) --kv $kv --dispatch mega --tokens 128 --runs 3 2>&1 | grep -E "^mega"
done; done; done
nvidia-smi --query-gpu=clocks.sm,pstate,temperature.gpu,power.draw --format=csv,noheader
P=/tmp/peer/llama.cpp/build/bin/llama-bench
t "peer build: $(cat /tmp/peer/done 2>/dev/null || echo 'still building')"
if [ -e /tmp/peer/done ] && [ -x $P ]; then
  for s in llama-1b llama-8b; do t "peer $s"; $P -m /tmp/$s.gguf -p 0 -n 128 -d 128,3968,16256 -r 3 -ngl 99 2>&1 | grep -E "q4_0|tg128|build"; done
fi
t "done"
