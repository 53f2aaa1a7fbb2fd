#!/usr/bin/env bash
# Fifth session's last call (bench/README.md, "Round 22" and "the peer in the same call"):
# 1. the driver's binaries: main's and one's (round 20) plain decode pipelines through
#    `run --pipeline-cache-out`, disassembled by bench/sass.py (sass.tar.xz in $OUT);
# 2. main against llama.cpp CUDA (llama-bench, built from .peer in the background) on the
#    same GGUF files: tg128 at depth 128 ("Once upon a time", positions 5..133), 3968 and
#    16256; mega and multi at the first.
# Carry .gl .bin .peer. .bin/baro-top = main; .bin/extra.tar.xz: baro-top-one (r20 96bedf6 +
# the cache flag).
set -u
. bench/h200_env.sh
. bench/h200_lib.sh
exec > >(tee "$O/session5${TAG:-}.log") 2>&1
[ -e .bin/extra.tar.xz ] && tar xJf .bin/extra.tar.xz -C .bin
ONE=.bin/baro-top-one
t "main $(cat .bin/COMMIT) one $(cat .bin/COMMIT-one)"
peer_build() {
  cd /tmp/peer/llama.cpp && { [ -e build/CMakeCache.txt ] || cmake -B build -DGGML_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DCMAKE_BUILD_TYPE=Release > /tmp/peer/cmake.log 2>&1; } &&
  nice cmake --build build --target llama-bench -j 14 > /tmp/peer/build.log 2>&1
  echo "peer build rc $?" > /tmp/peer/done
}
if [ ! -e /tmp/peer/done ]; then
  [ -d /tmp/peer/llama.cpp ] || { mkdir -p /tmp/peer && tar xJf .peer/llama.cpp.tar.xz -C /tmp/peer; }
  ( peer_build ) &
fi
models
t "driver binaries (plain pipelines, llama-1b)"
for b in $B $ONE; do
  n=$(basename $b)
  $b run -m /tmp/llama-1b.gguf --no-instrument --passes 2 --check off -i Once --pipeline-cache-out /tmp/$n.vkc > /dev/null 2>&1
  python3 bench/sass.py /tmp/$n.vkc --out /tmp/sass --label $n
done
( cd /tmp/sass 2>/dev/null && tar cJf $O/sass.tar.xz *.sass 2>/dev/null )
t "stories260K gate (main)"; $B gate --steps 200 2>&1 | grep -E "GATE|bit-identical"
for s in llama-1b llama-8b; do
  t "baro-top $s one prompt, mega and multi"
  $B bench -m /tmp/$s.gguf --prompts /tmp/one.txt --tokens 128 --runs 3 --dispatch both 2>&1 | grep -E " tg| pp|parity|compared"
  for d in 3968 16256; do
    t "baro-top $s depth $d"
    $B bench -m /tmp/$s.gguf --prompts /tmp/once.txt --depth $((d - 6)) --tokens 128 --runs 3 --dispatch mega 2>&1 | grep -E " tg|parity|compared"
  done
done
P=/tmp/peer/llama.cpp/build/bin/llama-bench
t "waiting for the peer build (until 560 s)"
while [ ! -e /tmp/peer/done ] && [ $SECONDS -lt 560 ]; do sleep 2; done
cat /tmp/peer/done 2>/dev/null || { echo "peer build not finished"; tail -3 /tmp/peer/build.log; }
if [ -x $P ]; then
  for s in llama-1b llama-8b; do t "peer $s"; $P -m /tmp/$s.gguf -p 0 -n 128 -d 128,3968,16256 -r 3 -ngl 99 2>&1 | grep -E "q4_0|tg128|build"; done
fi
nvidia-smi --query-gpu=clocks.sm,pstate,temperature.gpu,power.draw --format=csv,noheader
t "done"
