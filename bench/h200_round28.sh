#!/usr/bin/env bash
# Round 28 (bench/README.md): four blocks' loads per lane in the q8 loop (30553e5 -> 6c5d370),
# f32 unchanged, q8 gates, f32 and q8 beside llama.cpp CUDA (built from .peer in the
# background) at depth 128 and 3968, q8 stage sums. Carry .gl .bin .peer.
set -u
. bench/h200_env.sh
. bench/h200_lib.sh
exec > >(tee "$O/round28.log") 2>&1
OLD=.bin/baro-top-305
t "main $(cat .bin/COMMIT) old $(cat .bin/COMMIT-305)"
peer_build() {
  cd /tmp/peer/llama.cpp && { [ -e build/CMakeCache.txt ] || cmake -B build -DGGML_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DCMAKE_BUILD_TYPE=Release > /tmp/peer/cmake.log 2>&1; } &&
  nice cmake --build build --target llama-bench -j 10 > /tmp/peer/build.log 2>&1
  echo "peer build rc $?" > /tmp/peer/done
}
if [ ! -e /tmp/peer/done ]; then
  [ -d /tmp/peer/llama.cpp ] || { mkdir -p /tmp/peer && tar xJf .peer/llama.cpp.tar.xz -C /tmp/peer; }
  ( peer_build ) &
fi
models
abx() { # SHAPE PREDICT ARGS
  t "ab $1 $(cat .bin/COMMIT-305) -> $(cat .bin/COMMIT): $3"
  $B bench ab -m /tmp/$1.gguf --prompts /tmp/one.txt --tokens 128 --pairs 2 --a-binary $OLD --b-binary $B \
    --a "$3" --b "$3" --predict "$2" --log $O/predictions.log 2>&1 | tail -4
}
abx llama-1b "0%..6%" "--dispatch mega --act q8"
abx llama-8b "2%..10%" "--dispatch mega --act q8"
abx llama-1b "-1%..1%" "--dispatch mega"
abx llama-8b "-1%..1%" "--dispatch mega"
t "gates"
$B gate --steps 200 2>&1 | grep -E "GATE|bit-identical"
for s in llama-1b llama-8b; do echo "-- $s q8"; $B gate -m /tmp/$s.gguf --steps 8 --act q8 2>&1 | grep -E "GATE|bit-identical|rel-L2|tokens vs"; done
$B run -m /tmp/llama-1b.gguf --no-instrument --act q8 --passes 2 --check off -i Once --pipeline-cache-out $O/q8.vkc > /dev/null 2>&1
for s in llama-1b llama-8b; do
  t "stages $s q8"
  $B run -m /tmp/$s.gguf --json --passes 100 -i "Once upon a time" --check off --dispatch mega --act q8 2>/dev/null > /tmp/run.jsonl
  python3 bench/stage_summary.py < /tmp/run.jsonl
  head -c 2000000 /tmp/run.jsonl | xz -9 > $O/run-$s-q8.jsonl.xz
done
for s in llama-1b llama-8b; do for a in f32 q8; do
  t "baro-top $s act $a depth 128 (mega, multi) and 3968 (mega)"
  $B bench -m /tmp/$s.gguf --prompts /tmp/one.txt --tokens 128 --runs 3 --dispatch both --act $a 2>&1 | grep -E " tg|parity|compared"
  $B bench -m /tmp/$s.gguf --prompts /tmp/once.txt --depth 3962 --tokens 128 --runs 3 --dispatch mega --act $a 2>&1 | grep -E " tg|parity"
done; done
P=/tmp/peer/llama.cpp/build/bin/llama-bench
t "waiting for the peer build (until 560 s)"
while [ ! -e /tmp/peer/done ] && [ $SECONDS -lt 560 ]; do sleep 2; done
cat /tmp/peer/done 2>/dev/null || { echo "peer build not finished"; tail -3 /tmp/peer/build.log; }
if [ -x $P ]; then
  for s in llama-1b llama-8b; do t "peer $s"; $P -m /tmp/$s.gguf -p 0 -n 128 -d 128,3968 -r 3 -ngl 99 2>&1 | grep -E "q4_0|tg128|build"; done
fi
nvidia-smi --query-gpu=clocks.sm,pstate,temperature.gpu,power.draw --format=csv,noheader
t "done"
