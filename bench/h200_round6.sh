#!/usr/bin/env bash
# Round 6 (bench/README.md) + issue 12's hung-device exit on the H200, with the llama.cpp peer
# (CUDA llama-bench, built here from the carried .peer/llama.cpp.tar.xz) on the same files.
# Carry .gl, .bin (baro-top = new, baro-top-base = previous release) and .peer.
set -u
. bench/h200_env.sh
exec > >(tee "$O/round6.log") 2>&1
A=.bin/baro-top-base
el() { awk "BEGIN{printf \"%.2f\", $EPOCHREALTIME - $1}"; }
stamp() { local t0=$1; while IFS= read -r l; do echo "[$(el $t0)] $l"; done; }
echo "== new $(cat .bin/COMMIT) base $(cat .bin/COMMIT-base)"
# The peer builds on the CPU while the non-timing checks run; timing starts after it is done.
( mkdir -p /tmp/peer && tar xJf .peer/llama.cpp.tar.xz -C /tmp/peer && cd /tmp/peer/llama.cpp &&
  cmake -B build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DCMAKE_BUILD_TYPE=Release > /tmp/peer/cmake.log 2>&1 &&
  cmake --build build --target llama-bench -j 14 > /tmp/peer/build.log 2>&1; echo "peer build rc $?" > /tmp/peer/done ) &
for s in llama-1b llama-8b; do $B model gen --shape $s --quant q4_0 --margin-steps 0 -o /tmp/$s.gguf >/dev/null 2>&1; done
echo "== gates (new)"
$B gate --steps 200 2>&1 | grep -E "GATE|bit-identical"
for s in llama-1b llama-8b; do echo "-- $s"; $B gate -m /tmp/$s.gguf --steps 8 2>&1 | grep -E "GATE|bit-identical|rel-L2"; done
echo "== logits checksums base vs new (16 passes, mega and multi)"
for s in llama-1b llama-8b; do for m in mega multi; do
  a=$($A generate --backend vulkan --mode $m -m /tmp/$s.gguf -n 16 2>&1 | grep -o "logits [0-9a-f]*" | md5sum | cut -c1-12)
  b=$($B generate --backend vulkan --mode $m -m /tmp/$s.gguf -n 16 2>&1 | grep -o "logits [0-9a-f]*" | md5sum | cut -c1-12)
  echo "$s $m base $a new $b $([ "$a" = "$b" ] && echo IDENTICAL || echo DIFFERENT)"
done; done
echo "== hung device: stalled workgroup, spin 2 s, watchdog 200 ms (must exit within 5 s of the watchdog line)"
t0=$EPOCHREALTIME; $B generate --backend vulkan --inject-stall-wg 3 --spin-timeout-ms 2000 --watchdog-ms 200 -n 4 2>&1 | stamp $t0 | grep -E "watchdog|error"; echo "[$(el $t0)] exited"
echo "== hung device: gate --grid 65535 --steps 3 (automatic watchdog)"
t0=$EPOCHREALTIME; $B gate --grid 65535 --steps 3 2>&1 | stamp $t0 | grep -E "watchdog|GATE|error" | cut -c1-240; echo "[$(el $t0)] exited"
echo "== hung device: llama-8b multi grid 65535 (automatic watchdog)"
t0=$EPOCHREALTIME; $B generate --backend vulkan -m /tmp/llama-8b.gguf --mode multi --grid 65535 -n 3 2>&1 | stamp $t0 | grep -E "pass|watchdog|error" | cut -c1-200; echo "[$(el $t0)] exited"
echo "== waiting for the peer build"; while [ ! -e /tmp/peer/done ]; do sleep 2; done; cat /tmp/peer/done; tail -3 /tmp/peer/build.log
echo "== peer: llama.cpp CUDA llama-bench tg128"
L=/tmp/peer/llama.cpp/build/bin/llama-bench
for s in llama-1b llama-8b; do [ -x $L ] && $L -m /tmp/$s.gguf -p 0 -n 128 -r 5 -ngl 99 2>&1 | grep -E "q4_0|tg128|build"; done
echo "== A/B round 6: base, new alternating, 3 pairs"
for s in llama-1b llama-8b; do for i in 1 2 3; do
  for arm in base new; do X=$B; [ $arm = base ] && X=$A
    echo "-- $s $arm pair $i"; $X bench -m /tmp/$s.gguf --tokens 128 --runs 5 2>&1 | grep -E "^(mega|multi) "
  done; done; done
nvidia-smi --query-gpu=clocks.sm,pstate,temperature.gpu,power.draw --format=csv,noheader
