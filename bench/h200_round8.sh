#!/usr/bin/env bash
# Rounds 7b and 8 (bench/README.md) with the llama.cpp peer (CUDA llama-bench, built here from
# the carried .peer/llama.cpp.tar.xz) on the same files, then the recorder overhead
# (bench/h200_recorder.sh). Carry .gl, .bin (baro-top = new, baro-top-base = round 7's
# binary 7a77c86: the previous attention) and .peer.
set -u
. bench/h200_env.sh
exec > >(tee "$O/round8.log") 2>&1
A=.bin/baro-top-base
echo "== new $(cat .bin/COMMIT) base $(cat .bin/COMMIT-base)"
( mkdir -p /tmp/peer && tar xJf .peer/llama.cpp.tar.xz -C /tmp/peer && cd /tmp/peer/llama.cpp &&
  cmake -B build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DCMAKE_BUILD_TYPE=Release > /tmp/peer/cmake.log 2>&1 &&
  cmake --build build --target llama-bench -j 12 > /tmp/peer/build.log 2>&1; echo "peer build rc $?" > /tmp/peer/done ) &
for s in llama-1b llama-8b; do $B model gen --shape $s --quant q4_0 --margin-steps 0 -o /tmp/$s.gguf >/dev/null 2>&1; done
echo "Once upon a time" > /tmp/one.txt
echo "== gates (new; default rows and rows 4)"
for r in 1 4; do $B gate --steps 200 --rows $r 2>&1 | grep -E "GATE|bit-identical"; done
for s in llama-1b llama-8b; do for r in 1 4; do echo "-- $s rows $r"; $B gate -m /tmp/$s.gguf --steps 8 --rows $r 2>&1 | grep -E "GATE|bit-identical|rel-L2"; done; done
echo "== stories260K golden text (vulkan, mega and multi) vs the CPU reference"
for m in mega multi; do a=$($B generate --backend vulkan --dispatch $m -n 200 2>/dev/null | md5sum | cut -c1-12); c=$($B generate -n 200 2>/dev/null | md5sum | cut -c1-12); echo "$m vulkan $a cpu $c $([ "$a" = "$c" ] && echo SAME || echo DIFFERENT)"; done
echo "== logits checksums: new --rows 1|2|4 must agree (16 passes, mega and multi); base differs by round 8's attention order"
ck() { "$@" 2>&1 | grep -o "logits [0-9a-f]*" | md5sum | cut -c1-12; }
for s in llama-1b llama-8b; do for m in mega multi; do
  line="$s $m base $(ck $A generate --backend vulkan --dispatch $m -m /tmp/$s.gguf -n 16)"
  for r in 1 2 4; do line="$line rows$r $(ck $B generate --backend vulkan --dispatch $m --rows $r -m /tmp/$s.gguf -n 16)"; done
  echo "$line"
done; done
echo "== round 7b: bench ab rows 1 vs rows 4 (mega), 10 pairs"
$B bench ab -m /tmp/llama-1b.gguf --prompts /tmp/one.txt --tokens 128 --pairs 10 --a "--dispatch mega --rows 1" --b "--dispatch mega --rows 4" --predict "4%..8%" --log $O/predictions.log 2>&1 | tail -12
$B bench ab -m /tmp/llama-8b.gguf --prompts /tmp/one.txt --tokens 128 --pairs 10 --a "--dispatch mega --rows 1" --b "--dispatch mega --rows 4" --predict "3%..7%" --log $O/predictions.log 2>&1 | tail -12
$B bench ab -m /tmp/llama-8b.gguf --prompts /tmp/one.txt --tokens 128 --pairs 6 --a "--dispatch mega --rows 2" --b "--dispatch mega --rows 4 --wg-size 512" 2>&1 | tail -8
echo "== round 8: base (7a77c86) vs new, mega, 128 tokens x 5 runs, 3 pairs alternating"
for s in llama-1b llama-8b; do for i in 1 2 3; do
  echo "-- $s pair $i base"; $A bench -m /tmp/$s.gguf --dispatch mega --tokens 128 --runs 5 2>&1 | grep -E "^mega "
  echo "-- $s pair $i new rows 1"; $B bench -m /tmp/$s.gguf --prompts /tmp/one.txt --dispatch mega --tokens 128 --runs 5 2>&1 | grep -E "^mega +tg"
  echo "-- $s pair $i new rows 4"; $B bench -m /tmp/$s.gguf --prompts /tmp/one.txt --dispatch mega --rows 4 --tokens 128 --runs 5 2>&1 | grep -E "^mega +tg"
done; done
echo "== multi (new, rows 4)"
for s in llama-1b llama-8b; do $B bench -m /tmp/$s.gguf --prompts /tmp/one.txt --dispatch multi --rows 4 --tokens 128 --runs 5 2>&1 | grep -E "^multi +tg"; done
echo "== recordings for per-stage busy (60 passes), new rows 1 and 4"
for s in llama-1b llama-8b; do for r in 1 4; do
  $B record -m /tmp/$s.gguf --dispatch mega --rows $r --passes 60 --check off -o $O/r8-$s-rows$r.baro 2>&1 | tail -1; done; done
echo "== waiting for the peer build"; while [ ! -e /tmp/peer/done ]; do sleep 2; done; cat /tmp/peer/done
echo "== peer: llama.cpp CUDA llama-bench tg128"
L=/tmp/peer/llama.cpp/build/bin/llama-bench
for s in llama-1b llama-8b; do [ -x $L ] && $L -m /tmp/$s.gguf -p 0 -n 128 -r 5 -ngl 99 2>&1 | grep -E "q4_0|tg128"; done
nvidia-smi --query-gpu=clocks.sm,pstate,temperature.gpu,power.draw --format=csv,noheader
echo "== recorder overhead"
PAIRS=5 bash bench/h200_recorder.sh 2>&1 | grep -vE "^\s*$" | tail -14
