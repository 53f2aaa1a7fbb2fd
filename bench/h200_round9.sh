#!/usr/bin/env bash
# Rounds 9 (vec4 shared-memory reads, bit-identical) and 10 (chained passes), with gates, the
# stories260K golden, cross-binary checksums, per-stage recordings, mega vs multi, the ring's
# cost and the llama.cpp peer (CUDA llama-bench, built here from the carried
# .peer/llama.cpp.tar.xz) on the same files. Carry .gl, .bin (baro-top = new, baro-top-base =
# round 8's 4ed6ad6) and .peer.
set -u
. bench/h200_env.sh
exec > >(tee "$O/round9.log") 2>&1
A=.bin/baro-top-base
echo "== new $(cat .bin/COMMIT) base $(cat .bin/COMMIT-base)"
( mkdir -p /tmp/peer && tar xJf .peer/llama.cpp.tar.xz -C /tmp/peer && cd /tmp/peer/llama.cpp &&
  cmake -B build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DCMAKE_BUILD_TYPE=Release > /tmp/peer/cmake.log 2>&1 &&
  cmake --build build --target llama-bench -j 10 > /tmp/peer/build.log 2>&1; echo "peer build rc $?" > /tmp/peer/done ) &
for s in llama-1b llama-8b; do $B model gen --shape $s --quant q4_0 --margin-steps 0 -o /tmp/$s.gguf >/dev/null 2>&1; done
echo "Once upon a time" > /tmp/one.txt
echo "== gates (new)"
$B gate --steps 200 2>&1 | grep -E "GATE|bit-identical"
for s in llama-1b llama-8b; do echo "-- $s"; $B gate -m /tmp/$s.gguf --steps 8 2>&1 | grep -E "GATE|bit-identical|rel-L2"; done
echo "== stories260K golden text (vulkan, mega and multi) vs the CPU reference"
for m in mega multi; do a=$($B generate --backend vulkan --dispatch $m -n 200 2>/dev/null | md5sum | cut -c1-12); c=$($B generate -n 200 2>/dev/null | md5sum | cut -c1-12); echo "$m vulkan $a cpu $c $([ "$a" = "$c" ] && echo SAME || echo DIFFERENT)"; done
echo "== logits checksums, 16 passes: round 9 must equal the base binary's (bit-identical)"
ck() { "$@" 2>&1 | grep -o "logits [0-9a-f]*" | md5sum | cut -c1-12; }
for s in llama-1b llama-8b; do for m in mega multi; do
  a=$(ck $A generate --backend vulkan --dispatch $m -m /tmp/$s.gguf -n 16); b=$(ck $B generate --backend vulkan --dispatch $m -m /tmp/$s.gguf -n 16)
  echo "$s $m base $a new $b $([ "$a" = "$b" ] && echo SAME || echo DIFFERENT)"
done; done
echo "== round 9: base vs new binary (bench ab, tg128, 6 pairs, one pass per submission)"
$B bench ab -m /tmp/llama-1b.gguf --prompts /tmp/one.txt --tokens 128 --pairs 6 --a-binary $A --b-binary $B --a "--dispatch mega" --b "--dispatch mega" --predict "5%..20%" --log $O/predictions.log 2>&1 | tail -9
$B bench ab -m /tmp/llama-8b.gguf --prompts /tmp/one.txt --tokens 128 --pairs 6 --a-binary $A --b-binary $B --a "--dispatch mega" --b "--dispatch mega" --predict "8%..25%" --log $O/predictions.log 2>&1 | tail -9
echo "== round 10: chain 1 vs chain 16 (new binary, 6 pairs)"
$B bench ab -m /tmp/llama-1b.gguf --prompts /tmp/one.txt --tokens 128 --pairs 6 --a "--dispatch mega --chain 1" --b "--dispatch mega --chain 16" --predict "3%..10%" --log $O/predictions.log 2>&1 | tail -9
$B bench ab -m /tmp/llama-8b.gguf --prompts /tmp/one.txt --tokens 128 --pairs 6 --a "--dispatch mega --chain 1" --b "--dispatch mega --chain 16" --predict "0.5%..3%" --log $O/predictions.log 2>&1 | tail -9
echo "== 1b at 1024 lanes (chain 16)"
$B bench ab -m /tmp/llama-1b.gguf --prompts /tmp/one.txt --tokens 128 --pairs 4 --a "--dispatch mega --chain 16" --b "--dispatch mega --chain 16 --wg-size 1024" 2>&1 | tail -7
echo "== mega vs multi (chain 16) and the ring's cost (chain 1), 20 built-in prompts"
for s in llama-1b llama-8b; do
  $B bench -m /tmp/$s.gguf --dispatch both --chain 16 --tokens 128 --runs 1 2>&1 | grep -E "^(mega|multi) |parity|compared"
  $B bench -m /tmp/$s.gguf --prompts /tmp/one.txt --dispatch mega --instrument both --tokens 128 --runs 7 2>&1 | grep -E "^mega|parity"
done
echo "== recordings for per-stage busy (60 passes), base and new"
for s in llama-1b llama-8b; do
  $A record -m /tmp/$s.gguf --dispatch mega --passes 60 --check off -o $O/r9-$s-base.baro 2>&1 | tail -1
  $B record -m /tmp/$s.gguf --dispatch mega --passes 60 --check off -o $O/r9-$s-new.baro 2>&1 | tail -1
done
echo "== waiting for the peer build"; while [ ! -e /tmp/peer/done ]; do sleep 2; done; cat /tmp/peer/done
echo "== peer: llama.cpp CUDA llama-bench tg128"
L=/tmp/peer/llama.cpp/build/bin/llama-bench
for s in llama-1b llama-8b; do [ -x $L ] && $L -m /tmp/$s.gguf -p 0 -n 128 -r 5 -ngl 99 2>&1 | grep -E "q4_0|tg128"; done
nvidia-smi --query-gpu=clocks.sm,pstate,temperature.gpu,power.draw --format=csv,noheader
