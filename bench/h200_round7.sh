#!/usr/bin/env bash
# Round 7 (bench/README.md): rows in flight per team, with the llama.cpp peer (CUDA
# llama-bench, built here from the carried .peer/llama.cpp.tar.xz) on the same files; first of
# all, while the GPU is still cold, an 8B recording from a cold start (issue 10).
# Carry .gl, .bin (baro-top = new, baro-top-base = previous release) and .peer.
set -u
. bench/h200_env.sh
exec > >(tee "$O/round7.log") 2>&1
A=.bin/baro-top-base
echo "== new $(cat .bin/COMMIT) base $(cat .bin/COMMIT-base)"
( mkdir -p /tmp/peer && tar xJf .peer/llama.cpp.tar.xz -C /tmp/peer && cd /tmp/peer/llama.cpp &&
  cmake -B build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DCMAKE_BUILD_TYPE=Release > /tmp/peer/cmake.log 2>&1 &&
  cmake --build build --target llama-bench -j 12 > /tmp/peer/build.log 2>&1; echo "peer build rc $?" > /tmp/peer/done ) &
for s in llama-1b llama-8b; do $B model gen --shape $s --quant q4_0 --margin-steps 0 -o /tmp/$s.gguf >/dev/null 2>&1; done
echo "== cold GPU: 8b record 300 passes mega (issue 10: does the slow power state show?)"
nvidia-smi --query-gpu=clocks.sm,pstate,temperature.gpu --format=csv,noheader
$B record -m /tmp/llama-8b.gguf --dispatch mega --passes 300 --spans-every 10 -o $O/h200-llama8b-mega-cold.baro 2>&1 | tail -2
$B replay $O/h200-llama8b-mega-cold.baro --headless --json 2>/dev/null | python3 -c '
import sys, json
modes, walls = {}, []
for l in sys.stdin:
    d = json.loads(l)
    if d["type"] == "frame":
        modes[d.get("mode")] = modes.get(d.get("mode"), 0) + 1; walls.append((d["pass"], d["wall_ns"], d.get("mode")))
print("  modes", modes); print("  first passes (pass, wall us, mode):", [(p, round(w/1e3), m) for p, w, m in walls[:12]])'
echo "== gates (new, rows 4)"
$B gate --steps 200 --rows 4 2>&1 | grep -E "GATE|bit-identical"
for s in llama-1b llama-8b; do echo "-- $s"; $B gate -m /tmp/$s.gguf --steps 8 --rows 4 2>&1 | grep -E "GATE|bit-identical|rel-L2"; done
echo "== logits checksums: base vs new --rows 1|2|4 (16 passes, mega and multi)"
ck() { "$@" 2>&1 | grep -o "logits [0-9a-f]*" | md5sum | cut -c1-12; }
for s in llama-1b llama-8b; do for m in mega multi; do
  a=$(ck $A generate --backend vulkan --dispatch $m -m /tmp/$s.gguf -n 16)
  line="$s $m base $a"
  for r in 1 2 4; do b=$(ck $B generate --backend vulkan --dispatch $m --rows $r -m /tmp/$s.gguf -n 16); line="$line rows$r $b $([ "$a" = "$b" ] && echo SAME || echo DIFFERENT)"; done
  echo "$line"
done; done
echo "== A/B rows 1|2|4 (mega), rotating order, 3 rounds; 8b also 512 lanes x rows 4"
for s in llama-1b llama-8b; do for i in 1 2 3; do
  order="1 2 4"; [ $i = 2 ] && order="4 1 2"; [ $i = 3 ] && order="2 4 1"
  for r in $order; do echo "-- $s round $i rows $r"; $B bench -m /tmp/$s.gguf --dispatch mega --rows $r --tokens 128 --runs 5 2>&1 | grep -E "^mega "; done
  if [ $s = llama-8b ]; then echo "-- $s round $i rows 4 wg 512"; $B bench -m /tmp/$s.gguf --dispatch mega --rows 4 --wg-size 512 --tokens 128 --runs 5 2>&1 | grep -E "^mega "; fi
done; done
echo "== base binary, mega (same call)"
for s in llama-1b llama-8b; do $A bench -m /tmp/$s.gguf --dispatch mega --tokens 128 --runs 5 2>&1 | grep -E "^mega "; done
echo "== recordings for per-stage busy (60 passes): rows 1 and 4"
for s in llama-1b llama-8b; do for r in 1 4; do
  $B record -m /tmp/$s.gguf --dispatch mega --rows $r --passes 60 -o $O/r7-$s-rows$r.baro 2>&1 | tail -1; done; done
echo "== waiting for the peer build"; while [ ! -e /tmp/peer/done ]; do sleep 2; done; cat /tmp/peer/done; tail -2 /tmp/peer/build.log
echo "== peer: llama.cpp CUDA llama-bench tg128"
L=/tmp/peer/llama.cpp/build/bin/llama-bench
for s in llama-1b llama-8b; do [ -x $L ] && $L -m /tmp/$s.gguf -p 0 -n 128 -r 5 -ngl 99 2>&1 | grep -E "q4_0|tg128|build"; done
nvidia-smi --query-gpu=clocks.sm,pstate,temperature.gpu,power.draw --format=csv,noheader
