#!/usr/bin/env bash
# One parameterised device call (bench/README.md, "Device calls"): the steps named on the
# command line, in order, logged to $OUT/call.log. Carry .gl .bin (and .peer for the steps
# that use llama.cpp). .bin/baro-top is the build under test (.bin/COMMIT names it); other
# binaries travel as .bin/*.xz and are unpacked first (the carried tree's 64 MiB cap).
#   peer       start llama.cpp's CUDA build (llama-bench, llama-quantize) in its own session;
#              the steps that need it wait for it
#   models     llama-1b / llama-8b Q4_0 (16k context) from `model gen`, once
#   gates      stories260K goldens (mega, multi), stall injection, 1b/8b f32 and q8 gates
#   gates:BIN  the same of .bin/BIN
#   fixtures   scripts/fixtures/check on every engine/tests/data/models fixture: Vulkan mega
#              and multi ids against llama.cpp's goldens
#   kquant     llama-1b / llama-8b Q4_K_M made by llama-quantize from baro-top's f16 models;
#              gates (f32, q8) on them
#   bench      baro-top `bench` (mega, f32 and q8) and llama-bench tg128 on the Q4_0 and the
#              Q4_K_M files, in the same call
#   ab:A:B:SHAPE:ARGS:PREDICT   `bench ab` binary .bin/A vs .bin/B on SHAPE (llama-1b|llama-8b),
#              both arms with ARGS (commas for spaces), PREDICT the frozen prediction
#   stages:BIN:SHAPE:ACT  `run --json` 140 passes of .bin/BIN: pipeline statistics (registers,
#              spills) and stage sums (bench/stage_summary.py); the driver's pipeline cache to
#              $OUT/BIN-SHAPE-ACT.cache (disassemble here: bench/sass.py)
#   plain:BIN:SHAPE:ACT  the same run with --no-instrument: the plain pipeline's statistics and
#              cache ($OUT/BIN-SHAPE-ACT-plain.cache), the pipeline `bench` measures
#   record:SHAPE:FILE  a 120-pass recording of SHAPE (mega, spans every 12th pass) to $OUT/FILE
set -u
for f in .bin/*.xz; do
  [ -e "$f" ] || continue
  python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], 'wb'))" "$f" "${f%.xz}"
  chmod +x "${f%.xz}"
done
# BIN=NAME: .bin/NAME is the build under test (copied to .bin/baro-top, COMMIT-NAME its commit).
if [ -n "${BIN:-}" ]; then cp ".bin/$BIN" .bin/baro-top; cp ".bin/COMMIT-${BIN#baro-top-}" .bin/COMMIT 2>/dev/null; fi
. bench/h200_env.sh
. bench/h200_lib.sh
exec > >(tee -a "$O/call.log") 2>&1
t "build under test $(cat .bin/COMMIT 2>/dev/null)"
P=/tmp/peer/llama.cpp/build/bin

peer() {
  [ -e /tmp/peer/started ] && return
  mkdir -p /tmp/peer && touch /tmp/peer/started
  tar xJf .peer/llama.cpp.tar.xz -C /tmp/peer
  setsid bash -c 'cd /tmp/peer/llama.cpp && cmake -B build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DCMAKE_BUILD_TYPE=Release > /tmp/peer/cmake.log 2>&1 && nice cmake --build build \
    --target llama-bench llama-quantize -j 14 > /tmp/peer/build.log 2>&1; echo "peer build rc $?" > /tmp/peer/done' \
    < /dev/null > /dev/null 2>&1 &
  t "peer build started"
}
peer_wait() {
  t "waiting for the peer build"
  while [ ! -e /tmp/peer/done ] && [ $SECONDS -lt 540 ]; do sleep 2; done
  cat /tmp/peer/done 2>/dev/null || { echo "peer build not finished"; tail -3 /tmp/peer/build.log; return 1; }
}

gates_step() {
  local B=${1:-$B}
  t "gates $B"
  $B gate --steps 200 2>&1 | grep -E "GATE|bit-identical"
  for m in mega multi; do echo "golden $m $($B generate --backend vulkan --dispatch $m -n 200 2>/dev/null | md5sum | cut -c1-12) (want 9b48d0eee929)"; done
  s0=$SECONDS; $B gate --inject-stall-wg 3 --steps 3 2>&1 | grep -E "FAIL|GATE" | head -2; echo "stall refused in $((SECONDS - s0)) s"
  for s in llama-1b llama-8b; do for a in f32 q8; do
    echo "-- $s act $a"; $B gate -m /tmp/$s.gguf --steps 8 --act $a 2>&1 | grep -E "GATE|bit-identical|rel-L2|tokens vs"
  done; done
}

fixtures_step() {
  t "fixtures"
  bash scripts/fixtures/check.sh "$B" 2>&1 | tail -40
}

kquant_step() {
  peer_wait || return
  for s in llama-1b llama-8b; do
    [ -s /tmp/$s-q4_k_m.gguf ] && continue
    t "$s Q4_K_M by llama-quantize"
    $B model gen --shape $s --quant f16 --seq 16384 --margin-steps 0 -o /tmp/$s-f16.gguf > /dev/null 2>&1
    $P/llama-quantize /tmp/$s-f16.gguf /tmp/$s-q4_k_m.gguf Q4_K_M 14 2>&1 | grep -E "type|size" | tail -12
    rm -f /tmp/$s-f16.gguf
    $B model info -m /tmp/$s-q4_k_m.gguf 2>&1 | grep -ciE "q4_k|q6_k" | sed 's/^/k-quant tensors: /'
  done
  for s in llama-1b llama-8b; do for a in f32 q8; do
    echo "-- $s Q4_K_M act $a"; $B gate -m /tmp/$s-q4_k_m.gguf --steps 8 --act $a 2>&1 | grep -E "GATE|bit-identical|rel-L2|tokens vs|refus|error"
  done; done
}

bench_step() {
  for f in llama-1b llama-1b-q4_k_m llama-8b llama-8b-q4_k_m; do
    [ -s /tmp/$f.gguf ] || continue
    for a in f32 q8; do
      t "baro-top $f act $a"
      $B bench -m /tmp/$f.gguf --prompts /tmp/one.txt --tokens 128 --runs 3 --dispatch mega --act $a 2>&1 | grep -E " tg|parity|compared|refus|error"
    done
    [ -x $P/llama-bench ] && { t "llama.cpp $f"; $P/llama-bench -m /tmp/$f.gguf -p 0 -n 128 -r 3 -ngl 99 2>&1 | grep -E "tg128|build"; }
  done
}

for step in "$@"; do
  case $step in
    peer) peer ;;
    models) t models; models ;;
    gates) gates_step ;;
    gates:*) gates_step ".bin/${step#gates:}" ;;
    fixtures) fixtures_step ;;
    kquant) kquant_step ;;
    bench) bench_step ;;
    ab:*)
      IFS=: read -r _ a b shape args predict <<< "$step"
      abx() { t "ab $1: $3 -> $4 '$5'"; $B bench ab -m /tmp/$1.gguf --prompts /tmp/one.txt --tokens 128 --pairs 2 \
        --a-binary $3 --b-binary $4 --a "$5" --b "$5" --predict "$2" --log $O/predictions.log 2>&1 | tail -4; }
      abx "$shape" "$predict" ".bin/$a" ".bin/$b" "${args//,/ }" ;;
    stages:*)
      IFS=: read -r _ bin shape act <<< "$step"
      t "stages $bin $shape act $act"
      .bin/$bin run -m /tmp/$shape.gguf --json --passes 140 -i "Once upon a time" --check off --dispatch mega --act $act \
        --pipeline-cache-out "$O/$bin-$shape-$act.cache" 2>/dev/null > /tmp/run.jsonl
      head -1 /tmp/run.jsonl | python3 -c "
import json,sys
d=json.loads(sys.stdin.readline())
for p in d.get('pipelines',[]): print('  ', p['pipeline'], '; '.join('%s=%s'%(s['name'],s['value']) for s in p['stats']))"
      python3 bench/stage_summary.py 65 < /tmp/run.jsonl ;;
    plain:*)
      IFS=: read -r _ bin shape act <<< "$step"
      t "plain $bin $shape act $act"
      .bin/$bin run -m /tmp/$shape.gguf --json --passes 140 -i "Once upon a time" --check off --dispatch mega --act $act \
        --no-instrument --pipeline-cache-out "$O/$bin-$shape-$act-plain.cache" 2>/dev/null > /tmp/run.jsonl
      head -1 /tmp/run.jsonl | python3 -c "
import json,sys
d=json.loads(sys.stdin.readline())
for p in d.get('pipelines',[]): print('  ', p['pipeline'], '; '.join('%s=%s'%(s['name'],s['value']) for s in p['stats']))" ;;
    record:*)
      IFS=: read -r _ shape file <<< "$step"
      t "record $shape"; $B record -m /tmp/$shape.gguf --dispatch mega --passes 120 --spans-every 12 -o "$O/$file" 2>&1 | tail -2 ;;
    *) echo "unknown step $step" ;;
  esac
done
nvidia-smi --query-gpu=clocks.sm,pstate,temperature.gpu,power.draw --format=csv,noheader
t "done"
