#!/usr/bin/env bash
# Round 26 (bench/README.md): the q8 activation path (--act q8) on the H200, one call:
# gates f32 and q8, the q8 pipeline's SASS, bench ab f32 -> q8 on 1b and 8b, q8 stage sums,
# and llama.cpp CUDA (built from .peer in the background) beside `bench` at depth 128.
# Carry .gl .bin .peer. .bin/baro-top = main with --act.
set -u
. bench/h200_env.sh
. bench/h200_lib.sh
exec > >(tee "$O/round26.log") 2>&1
t "main $(cat .bin/COMMIT)"
peer_build() {
  cd /tmp/peer/llama.cpp && { [ -e build/CMakeCache.txt ] || cmake -B build -DGGML_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DCMAKE_BUILD_TYPE=Release > /tmp/peer/cmake.log 2>&1; } &&
  nice cmake --build build --target llama-bench -j 12 > /tmp/peer/build.log 2>&1
  echo "peer build rc $?" > /tmp/peer/done
}
if [ ! -e /tmp/peer/done ]; then
  [ -d /tmp/peer/llama.cpp ] || { mkdir -p /tmp/peer && tar xJf .peer/llama.cpp.tar.xz -C /tmp/peer; }
  ( peer_build ) &
fi
models
t "gates"
$B gate --steps 200 2>&1 | grep -E "GATE|bit-identical"
for m in mega multi; do
  a=$($B generate --backend vulkan --dispatch $m -n 200 2>/dev/null | md5sum | cut -c1-12)
  echo "golden $m vulkan $a (want 9b48d0eee929)"
done
for s in llama-1b llama-8b; do for act in f32 q8; do
  echo "-- $s act $act"; $B gate -m /tmp/$s.gguf --steps 12 --act $act 2>&1 | grep -E "GATE|bit-identical|rel-L2|tokens vs|REFUSED|FAIL" | tail -5
done; done
t "driver binary of the q8 plain pipeline (llama-1b)"
$B run -m /tmp/llama-1b.gguf --no-instrument --act q8 --passes 2 --check off -i Once --pipeline-cache-out /tmp/q8.vkc > /dev/null 2>&1
python3 bench/sass.py /tmp/q8.vkc --out /tmp/sass --label q8 --loops 2>&1 | head -70
( cd /tmp/sass 2>/dev/null && tar cJf $O/sass.tar.xz *.sass 2>/dev/null )
for s in llama-1b:15%..50% llama-8b:25%..80%; do
  n=${s%%:*}; pr=${s#*:}
  t "ab $n f32 -> q8"
  $B bench ab -m /tmp/$n.gguf --prompts /tmp/one.txt --tokens 128 --pairs 2 \
    --a "--dispatch mega" --b "--dispatch mega --act q8" --predict "$pr" --log $O/predictions.log 2>&1 | tail -5
done
for s in llama-1b llama-8b; do
  t "stages $s q8"
  $B run -m /tmp/$s.gguf --json --passes 140 -i "Once upon a time" --check off --dispatch mega --act q8 2>/dev/null > /tmp/run.jsonl
  head -1 /tmp/run.jsonl | python3 -c "
import json,sys
d=json.loads(sys.stdin.readline())
for p in d.get('pipelines',[]): print('  ', p['pipeline'], '; '.join('%s=%s'%(s['name'],s['value']) for s in p['stats']))"
  python3 bench/stage_summary.py 65 < /tmp/run.jsonl
done
for s in llama-1b llama-8b; do
  t "baro-top $s q8 depth 128, mega and multi"
  $B bench -m /tmp/$s.gguf --prompts /tmp/one.txt --tokens 128 --runs 3 --dispatch both --act q8 2>&1 | grep -E " tg| pp|parity|compared"
done
P=/tmp/peer/llama.cpp/build/bin/llama-bench
t "waiting for the peer build (until 540 s)"
while [ ! -e /tmp/peer/done ] && [ $SECONDS -lt 540 ]; do sleep 2; done
cat /tmp/peer/done 2>/dev/null || { echo "peer build not finished"; tail -3 /tmp/peer/build.log; }
if [ -x $P ]; then
  for s in llama-1b llama-8b; do t "peer $s"; $P -m /tmp/$s.gguf -p 0 -n 128 -d 128 -r 3 -ngl 99 2>&1 | grep -E "q4_0|tg128|build"; done
fi
nvidia-smi --query-gpu=clocks.sm,pstate,temperature.gpu,power.draw --format=csv,noheader
t "done"
