#!/usr/bin/env bash
# Round 14 (bench/README.md): branch `att` (GQA attention units, wide K/V loads) against main,
# `bench ab` between the two binaries at depths 0 (one short prompt), 3968 and 16256, f32 and
# f16 KV, in the same call; gates on att first. Carry .gl, .bin (baro-top = main, baro-top-att)
# and .peer. "Once" is 6 tokens with BOS, so depth d-6 puts tg128 at positions d .. d+127
# (the peer's). Meant to follow round 13's call on a warm machine (models and the peer build stay
# in /tmp; rebuilt when missing). Runs the peer at depth if round 13's call could not.
set -u
. bench/h200_env.sh
exec > >(tee "$O/round14${TAG:-}.log") 2>&1
t() { echo "== [$SECONDS s] $*"; }
A=.bin/baro-top; N=.bin/baro-top-att
t "main $(cat .bin/COMMIT) att $(cat .bin/COMMIT-att)"
# The peer (llama.cpp CUDA) builds in the background; a build a previous call started (and
# whose end stopped it) resumes where it stopped.
peer_build() {
  cd /tmp/peer/llama.cpp && { [ -e build/CMakeCache.txt ] || cmake -B build -DGGML_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DCMAKE_BUILD_TYPE=Release > /tmp/peer/cmake.log 2>&1; } &&
  nice cmake --build build --target llama-bench -j 12 > /tmp/peer/build.log 2>&1
  echo "peer build rc $?" > /tmp/peer/done
}
if [ ! -e /tmp/peer/done ] && ! pgrep -f "cmake --build build" >/dev/null; then
  [ -d /tmp/peer/llama.cpp ] || { mkdir -p /tmp/peer && tar xJf .peer/llama.cpp.tar.xz -C /tmp/peer; }
  ( peer_build ) &
fi
for s in llama-1b llama-8b; do [ -s /tmp/$s.gguf ] || $A model gen --shape $s --quant q4_0 --seq 16384 --margin-steps 0 -o /tmp/$s.gguf >/dev/null 2>&1; done
echo "Once upon a time" > /tmp/one.txt; echo "Once" > /tmp/once.txt
t "gates (att)"
$N gate --steps 200 2>&1 | grep -E "GATE|bit-identical"
for s in llama-1b llama-8b; do for kv in f32 f16; do echo "-- $s kv $kv"; $N gate -m /tmp/$s.gguf --steps 8 --kv $kv 2>&1 | grep -E "GATE|bit-identical|rel-L2"; done; done
for m in mega multi; do a=$($N generate --backend vulkan --dispatch $m -n 200 2>/dev/null | md5sum | cut -c1-12); c=$($N generate -n 200 2>/dev/null | md5sum | cut -c1-12); echo "golden $m vulkan $a cpu $c $([ "$a" = "$c" ] && echo SAME || echo DIFFERENT)"; done
ab() { # shape kv depth pairs predict
  t "ab $1 kv $2 depth $3"
  local pr=/tmp/once.txt dd=$(( $3 > 6 ? $3 - 6 : 0 )); [ "$3" = 0 ] && pr=/tmp/one.txt
  $A bench ab -m /tmp/$1.gguf --prompts $pr --depth $dd --tokens 128 --pairs $4 --a-binary $A --b-binary $N \
    --a "--dispatch mega --kv $2" --b "--dispatch mega --kv $2" --predict "$5" --log $O/predictions.log 2>&1 | tail -4
}
ab llama-1b f32 0 4 "-2%..2%";      ab llama-8b f32 0 4 "-2%..2%"
ab llama-1b f32 3968 3 "10%..35%";  ab llama-8b f32 3968 3 "10%..35%"
ab llama-1b f32 16256 3 "40%..100%"; ab llama-8b f32 16256 3 "40%..100%"
ab llama-1b f16 3968 2 "15%..60%";  ab llama-8b f16 3968 2 "15%..60%"
ab llama-1b f16 16256 2 "80%..200%"; ab llama-8b f16 16256 2 "80%..200%"
nvidia-smi --query-gpu=clocks.sm,pstate,temperature.gpu,power.draw --format=csv,noheader
P=/tmp/peer/llama.cpp/build/bin/llama-bench
t "waiting for the peer build (until 540 s)"
while [ ! -e /tmp/peer/done ] && [ $SECONDS -lt 540 ]; do sleep 2; done
cat /tmp/peer/done 2>/dev/null || { echo "peer build not finished"; tail -3 /tmp/peer/build.log; }
if [ -x $P ]; then
  for s in llama-1b llama-8b; do t "peer $s"; $P -m /tmp/$s.gguf -p 0 -n 128 -d 128,3968,16256 -r 3 -ngl 99 2>&1 | grep -E "q4_0|tg128|build"; done
fi
t "done"
