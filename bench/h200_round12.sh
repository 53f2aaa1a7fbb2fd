#!/usr/bin/env bash
# Round 12 (bench/README.md): the ring's unsampled passes, attention over position chunks, and
# decode cost at contexts 256, 4096 and 16384 against llama.cpp at the same depths. Carry .gl,
# .bin (baro-top = new, baro-top-base = e45e7b1) and .peer. Two calls (a device call is at
# most 10 minutes): `bash bench/h200_round12.sh 1` (gates, A/B, ring, recordings; starts the
# peer build) then `... 2` (contexts, peer); models and the peer build stay in /tmp between
# calls on a warm machine and are rebuilt when missing.
set -u
PART=${1:-1}
. bench/h200_env.sh
exec > >(tee "$O/round12-part$PART${TAG:-}.log") 2>&1
A=.bin/baro-top-base
echo "== new $(cat .bin/COMMIT) base $(cat .bin/COMMIT-base)"
[ -e /tmp/peer/done ] || [ -d /tmp/peer/llama.cpp ] || ( mkdir -p /tmp/peer && tar xJf .peer/llama.cpp.tar.xz -C /tmp/peer && cd /tmp/peer/llama.cpp &&
  cmake -B build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DCMAKE_BUILD_TYPE=Release > /tmp/peer/cmake.log 2>&1 &&
  cmake --build build --target llama-bench -j 10 > /tmp/peer/build.log 2>&1; echo "peer build rc $?" > /tmp/peer/done ) &
# 16384-position contexts (the weights are the shape's; only the context differs).
for s in llama-1b llama-8b; do [ -s /tmp/$s.gguf ] || $B model gen --shape $s --quant q4_0 --seq 16384 --margin-steps 0 -o /tmp/$s.gguf >/dev/null 2>&1; done
ls -l /tmp/llama-*.gguf
echo "Once upon a time" > /tmp/one.txt
for L in 256 4096 16384; do python3 -c "import sys; print(('once upon a time there was a little dog '*500)[:$L-129])" > /tmp/ctx$L.txt; done
if [ "$PART" = 1 ]; then
echo "== gates (new)"
$B gate --steps 200 2>&1 | grep -E "GATE|bit-identical"
for s in llama-1b llama-8b; do echo "-- $s"; $B gate -m /tmp/$s.gguf --steps 8 2>&1 | grep -E "GATE|bit-identical|rel-L2"; done
for m in mega multi; do a=$($B generate --backend vulkan --dispatch $m -n 200 2>/dev/null | md5sum | cut -c1-12); c=$($B generate -n 200 2>/dev/null | md5sum | cut -c1-12); echo "golden $m vulkan $a cpu $c $([ "$a" = "$c" ] && echo SAME || echo DIFFERENT)"; done
echo "== (b) base vs new (bench ab, chain 16 both, one prompt, tg128)"
$B bench ab -m /tmp/llama-1b.gguf --prompts /tmp/one.txt --tokens 128 --pairs 6 --a-binary $A --b-binary $B --a "--dispatch mega" --b "--dispatch mega" --predict "${P1B:-3%..8%}" --log $O/predictions.log 2>&1 | tail -4
$B bench ab -m /tmp/llama-8b.gguf --prompts /tmp/one.txt --tokens 128 --pairs 6 --a-binary $A --b-binary $B --a "--dispatch mega" --b "--dispatch mega" --predict "${P8B:-2%..6%}" --log $O/predictions.log 2>&1 | tail -4
echo "== (a) the ring: every pass, and every 8th (chain 16, one prompt, tg128, 7 runs)"
for s in llama-1b llama-8b; do
  $B bench -m /tmp/$s.gguf --prompts /tmp/one.txt --dispatch mega --instrument both --tokens 128 --runs 7 2>&1 | grep -E "^mega"
  $B bench -m /tmp/$s.gguf --prompts /tmp/one.txt --dispatch mega --instrument both --ring-every 8 --tokens 128 --runs 7 2>&1 | grep -E "^mega"
done
echo "== recordings (60 passes) for the per-stage table"
for s in llama-1b llama-8b; do $B record -m /tmp/$s.gguf --dispatch mega --passes 60 --check off -o $O/r12${TAG:-}-$s.baro 2>&1 | tail -1; done
fi
if [ "$PART" = 2 ]; then
echo "== (c) context: prompt L-128 tokens, tg128 (positions L-128 .. L-1), mega, one run"
for s in llama-1b llama-8b; do for L in 256 4096 16384; do
  echo "-- $s L=$L"; $B bench -m /tmp/$s.gguf --prompts /tmp/ctx$L.txt --dispatch mega --tokens 128 --runs 1 2>&1 | grep -E "^mega|parity|compared"
done; done
echo "== multi at L=4096 (mega vs multi at a long context)"
$B bench -m /tmp/llama-1b.gguf --prompts /tmp/ctx4096.txt --dispatch multi --tokens 128 --runs 1 2>&1 | grep -E "^multi"
echo "== waiting for the peer build"; while [ ! -e /tmp/peer/done ]; do sleep 2; done; cat /tmp/peer/done
L=/tmp/peer/llama.cpp/build/bin/llama-bench
for s in llama-1b llama-8b; do [ -x $L ] && $L -m /tmp/$s.gguf -p 0 -n 128 -d 128,3968,16256 -r 3 -ngl 99 2>&1 | grep -E "q4_0|tg128"; done
nvidia-smi --query-gpu=clocks.sm,pstate,temperature.gpu,power.draw --format=csv,noheader
fi
