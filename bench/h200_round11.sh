#!/usr/bin/env bash
# Round 11 (bench/README.md) and the end-of-session state on the H200: gates and the golden,
# per-stage recordings (argmax level), the ring every pass vs every 8th, bench with the
# defaults (chain 16, 1024 lanes from d 2048) mega and multi, the live session's period
# (bench rec), serve --metrics, and the llama.cpp peer in the same call. Carry .gl, .bin
# (baro-top = new, baro-top-base = round 9/10's 7b125f6) and .peer.
set -u
. bench/h200_env.sh
exec > >(tee "$O/round11.log") 2>&1
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
for m in mega multi; do a=$($B generate --backend vulkan --dispatch $m -n 200 2>/dev/null | md5sum | cut -c1-12); c=$($B generate -n 200 2>/dev/null | md5sum | cut -c1-12); echo "golden $m vulkan $a cpu $c $([ "$a" = "$c" ] && echo SAME || echo DIFFERENT)"; done
echo "== logits checksums at 512 lanes: the argmax change must leave them equal to the base's"
ck() { "$@" 2>&1 | grep -o "logits [0-9a-f]*" | md5sum | cut -c1-12; }
for s in llama-1b llama-8b; do for m in mega multi; do
  a=$(ck $A generate --backend vulkan --dispatch $m --wg-size 512 -m /tmp/$s.gguf -n 16); b=$(ck $B generate --backend vulkan --dispatch $m --wg-size 512 -m /tmp/$s.gguf -n 16)
  echo "$s $m base $a new $b $([ "$a" = "$b" ] && echo SAME || echo DIFFERENT)"
done; done
echo "== base vs new (bench ab, chain 16 both, 1024 lanes both)"
$B bench ab -m /tmp/llama-1b.gguf --prompts /tmp/one.txt --tokens 128 --pairs 6 --a-binary $A --b-binary $B --a "--dispatch mega --chain 16 --wg-size 1024" --b "--dispatch mega --chain 16 --wg-size 1024" --predict "1.5%..2.5%" --log $O/predictions.log 2>&1 | tail -4
$B bench ab -m /tmp/llama-8b.gguf --prompts /tmp/one.txt --tokens 128 --pairs 6 --a-binary $A --b-binary $B --a "--dispatch mega --chain 16" --b "--dispatch mega --chain 16" --predict "0.3%..1%" --log $O/predictions.log 2>&1 | tail -4
echo "== the ring: every pass, and every 8th (chain 16, one prompt, tg128, 7 runs)"
for s in llama-1b llama-8b; do
  $B bench -m /tmp/$s.gguf --prompts /tmp/one.txt --dispatch mega --instrument both --tokens 128 --runs 7 2>&1 | grep -E "^mega"
  $B bench -m /tmp/$s.gguf --prompts /tmp/one.txt --dispatch mega --instrument both --ring-every 8 --tokens 128 --runs 7 2>&1 | grep -E "^mega"
done
echo "== bench with the defaults, 20 built-in prompts, mega and multi"
for s in llama-1b llama-8b; do $B bench -m /tmp/$s.gguf --dispatch both --tokens 128 --runs 1 2>&1 | grep -E "^(mega|multi) |parity|compared"; done
echo "== the live session's period (bench rec: recorder on/off blocks; period = what tok/s sees)"
$B bench rec -m /tmp/llama-1b.gguf --passes 3000 --block 200 2>&1 | tail -6
$B bench rec -m /tmp/llama-8b.gguf --passes 1200 --block 200 2>&1 | tail -6
echo "== recordings (60 passes) for the per-stage table"
for s in llama-1b llama-8b; do $B record -m /tmp/$s.gguf --dispatch mega --passes 60 --check off -o $O/r11-$s.baro 2>&1 | tail -1; done
echo "== serve --metrics on a live 1b session (4 s)"
$B serve --metrics 127.0.0.1:9464 -m /tmp/llama-1b.gguf > /tmp/serve.log 2>&1 & sp=$!
sleep 5
python3 - <<'PY'
import urllib.request
t = urllib.request.urlopen("http://127.0.0.1:9464/metrics", timeout=5).read().decode()
for l in t.splitlines():
    if l.startswith(("baro_tokens_per_second", "baro_passes_total")): print("  " + l[:160])
PY
kill -TERM $sp; wait $sp; echo "  serve exit $?"; tail -2 /tmp/serve.log
echo "== waiting for the peer build"; while [ ! -e /tmp/peer/done ]; do sleep 2; done; cat /tmp/peer/done
L=/tmp/peer/llama.cpp/build/bin/llama-bench
for s in llama-1b llama-8b; do [ -x $L ] && $L -m /tmp/$s.gguf -p 0 -n 128 -r 5 -ngl 99 2>&1 | grep -E "q4_0|tg128"; done
nvidia-smi --query-gpu=clocks.sm,pstate,temperature.gpu,power.draw --format=csv,noheader
