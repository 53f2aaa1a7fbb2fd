#!/usr/bin/env bash
# The one device script (bench/README.md, "Device calls"). Two ways to call it:
#   bash bench/run.sh ROUND        ROUND = bench/rounds/ROUND.toml (or a path to a .toml): the
#                                  round's build, binaries, models, steps, `bench ab` arms and
#                                  their frozen predictions, and the stages it reads
#   bash bench/run.sh STEP...      the steps named, in order (BIN=NAME picks the build)
# Everything goes to $OUT/call.log; with a ROUND, $OUT/rows.jsonl holds the call's bench and
# ab rows (bench/compare.py --ingest) ready to append to bench/results.jsonl.
# Carry .gl .bin (and .peer for the steps that use llama.cpp). .bin/baro-top is the build under
# test (.bin/COMMIT names it); other binaries travel as .bin/*.xz and are unpacked first (the
# carried tree's 64 MiB cap).
# Steps:
#   peer       start llama.cpp's CUDA build (llama-bench) in its own session;
#              the steps that need it wait for it (its build cannot travel back in: the
#              tracked tree is 47 MB of the carried 64 MiB and the build 43 MB; round 64)
#   models     the SHAPES' Q4_0 files (16k context) from `model gen`, once
#   gates      stories260K goldens (mega, multi; the default act, auto, is f32 there), stall
#              injection, f32 and q8 gates per shape (every baro-top step names its --act: the
#              default became auto, q8 on the Q4 files; record runs f32, an ab arm without
#              --act gets --act f32)
#   gates:BIN[:ARGS]  the same of .bin/BIN, ARGS (commas for spaces) added to every gate and
#              golden run (e.g. --prefetch-mib,16)
#   fixtures   scripts/fixtures/check on every engine/tests/data/models fixture: Vulkan mega
#              and multi ids against llama.cpp's goldens
#   kquant     the SHAPES' Q4_K_M files (`model gen --quant q4_k_m`: llama-quantize's mix and
#              bytes, no peer needed); gates (f32, q8) on them; kquant:ACTS the gates' paths
#              (commas), kquant:none none; mix:MIX[:SHAPES[:ACTS]] another mix's files and
#              gates (e.g. mix:iq4_nl:llama-1b)
#   bench      baro-top `bench` (mega, f32 and q8) and llama-bench tg128 on every Q4_0 and
#              Q4_K_M file and every `mix:` file of the shapes, in the same call (after the peer build, when `peer` started one:
#              nothing else runs beside a timed run)
#   bench:DEPTHS[:ARGS[:ACTS]]  the same at each depth of DEPTHS (commas: 0,4096; llama-bench
#              -d beside baro-top --depth), ARGS added to every baro-top run (commas for
#              spaces), ACTS the activation paths baro-top runs (commas; default f32,q8);
#              llama-bench runs once per file and depth a call (a second bench step reuses it)
#   ab:A:B:SHAPE:ARGS:PREDICT[:BARGS[:DEPTH[:PAIRS]]]   `bench ab` binary .bin/A vs .bin/B on SHAPE
#              (llama-1b|llama-8b), both arms with ARGS (commas for spaces), or B with BARGS
#              (A and B may be one binary then; empty: ARGS), PREDICT the frozen prediction,
#              at DEPTH positions of context (default 0; a round's [[ab]] takes `depth`), PAIRS
#              pairs (default 2; `pairs`)
#   stages:BIN:SHAPE:ACT[:ARGS[:EDGES]]  `run --json` 140 passes of .bin/BIN (ARGS added,
#              commas for spaces; a --passes there replaces the 140; EDGES the position
#              buckets' edges, commas, default 65; a round's [[stages]] takes `edges`):
#              pipeline statistics (registers,
#              spills) and stage sums (bench/stage_summary.py); the driver's pipeline cache to
#              $OUT/BIN-SHAPE-ACT[-ARGS].cache (disassemble here: bench/sass.py)
#   plain:BIN:SHAPE:ACT[:ARGS[:ENV]]  the same run with --no-instrument: the plain pipeline's
#              statistics, its passes' power modes and contention, and its cache
#              ($OUT/BIN-SHAPE-ACT[-ARGS][-ENV]-plain.cache; its lines as -plain.jsonl.xz), the pipeline
#              `bench` measures; ENV (commas for spaces): VAR=VALUE assignments for that run
#              (a diagnostic build's hook, e.g. BARO_DIAG_SPIRV=.spv/v1.spv); 140 passes
#              unless ARGS says (--ctx,4400,--passes,4300 also prints the passes at 4096..)
#   record:SHAPE:FILE[:ACT]  a 120-pass recording of SHAPE (mega, spans every 12th pass, --act
#              ACT, default f32) to $OUT/FILE
set -u
O=${OUT:-/tmp/out}
mkdir -p "$O"
SHAPES=${SHAPES:-llama-1b llama-8b}

# ROUND: the TOML's keys as steps (a small TOML subset: strings, arrays of strings, [[ab]] and
# [[stages]] tables; tomllib where Python has it).
ROUND=
if [ $# -eq 1 ] && { [ -f "bench/rounds/$1.toml" ] || [ "${1%.toml}" != "$1" ]; }; then
  ROUND=$1; toml=$1; [ -f "$toml" ] || toml=bench/rounds/$1.toml
  [ -f "$toml" ] || { echo "no round file $toml"; exit 2; }
  cp "$toml" "$O/round.toml"
  plan=$(python3 - "$toml" <<'EOF'
import ast, re, sys
text = open(sys.argv[1], encoding="utf-8").read()
try:
    import tomllib
    d = tomllib.loads(text)
except ImportError:
    d, cur = {}, None
    for line in text.splitlines():
        line = re.sub(r'\s+#[^"\']*$', "", line).strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r"\[\[(\w+)\]\]$", line)
        if m:
            cur = {}
            d.setdefault(m.group(1), []).append(cur)
            continue
        k, v = (x.strip() for x in line.split("=", 1))
        v = ast.literal_eval(re.sub(r"\btrue\b", "True", re.sub(r"\bfalse\b", "False", v)))
        (cur if cur is not None else d)[k] = v
def step(*parts):
    """NAME:FIELD:...; an absent optional field (None) is empty, trailing ones are dropped."""
    parts = list(parts)
    while parts[-1] is None:
        parts.pop()
    return ":".join("" if p is None else p for p in parts)
def commas(s):
    return None if s is None else s.replace(" ", ",")
def ab(t):
    return step("ab", t["a"], t["b"], t["model"], commas(t.get("args", "--dispatch mega")), t["predict"],
                commas(t.get("b_args")), str(t["depth"]) if "depth" in t else None,
                str(t["pairs"]) if "pairs" in t else None)
def stages(t):
    return step("stages", t["bin"], t["model"], t.get("act", "f32"), commas(t.get("args")),
                ",".join(map(str, t["edges"])) if "edges" in t else None)
steps = list(d.get("steps", []))
for key, f in (("ab", ab), ("stages", stages)):
    ex = [f(t) for t in d.get(key, [])]
    if key in steps:
        i = steps.index(key)
        steps[i:i + 1] = ex
    else:
        steps += ex
print("BIN=%s" % d.get("bin", ""))
print("SHAPES=%s" % " ".join(d.get("models", ["llama-1b", "llama-8b"])))
print("NEED=%s" % " ".join(d.get("binaries", [])))
for s in steps:
    print("STEP=%s" % s)
EOF
) || { echo "could not read $toml"; exit 2; }
  set --
  while IFS= read -r l; do
    case $l in
      BIN=?*) [ -n "${BIN:-}" ] || BIN=${l#BIN=} ;;
      SHAPES=*) SHAPES=${l#SHAPES=} ;;
      NEED=*) NEED=${l#NEED=} ;;
      STEP=*) set -- "$@" "${l#STEP=}" ;;
    esac
  done <<< "$plan"
  for n in ${NEED:-}; do
    [ -e ".bin/$n" ] || [ -e ".bin/$n.xz" ] || { echo "round $ROUND needs .bin/$n (or .bin/$n.xz)"; exit 2; }
  done
fi

for f in .bin/*.xz; do
  [ -e "$f" ] || continue
  python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], 'wb'))" "$f" "${f%.xz}"
  chmod +x "${f%.xz}"
done
# BIN=NAME: .bin/NAME is the build under test (copied to .bin/baro-top, COMMIT-NAME its commit).
if [ -n "${BIN:-}" ]; then
  [ -x ".bin/$BIN" ] || { echo "BIN=$BIN: no .bin/$BIN (or .bin/$BIN.xz) in the carried tree"; exit 2; }
  cp ".bin/$BIN" .bin/baro-top; cp ".bin/COMMIT-${BIN#baro-top-}" .bin/COMMIT 2>/dev/null
fi
# Without a build under test nothing below can run (a call that named steps but no BIN lost its
# device time to "NOT THE H100" in round 71): say which builds the tree has, fast.
if [ ! -x .bin/baro-top ]; then
  echo "no build under test: .bin/baro-top is missing; name one with BIN=NAME (or a ROUND whose bin says it):"
  ls .bin 2>/dev/null | grep -v -e '\.xz$' -e '^COMMIT' | sed 's/^/  /'
  exit 2
fi

# The NVIDIA Vulkan driver on the device machine (loader + libglvnd from the carried .gl/ debs).
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
B=.bin/baro-top
exec > >(tee -a "$O/call.log") 2>&1
# Refuse to measure anything but the H200 (a missing ICD silently falls back to a CPU device).
# BARO_CARD=H100 names another card for a call that found no H200 (its rows carry the card's
# name from nvidia-smi; compare only rows of one card).
CARD=${BARO_CARD:-H200}
if ! $B devices 2>&1 | grep -q "$CARD"; then
  echo "NOT THE $CARD: the Vulkan loader sees:"; $B devices 2>&1 | head -5
  exit 3
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,pstate --format=csv,noheader 2>/dev/null
# What the driver does by default with the buffers' bounds (`--robust-buffers`; builds before
# f9e6f4b print nothing here).
$B devices 2>&1 | grep -m1 "buffer checks"
t() { echo "== [$SECONDS s] $*"; }
[ -n "$ROUND" ] && t "round $ROUND: $*"
t "build under test $(cat .bin/COMMIT 2>/dev/null)"
P=/tmp/peer/llama.cpp/build/bin
# The prompts every bench step reads, written before any step (round 67's `ab` steps ran before
# `models` and found none).
echo "Once upon a time" > /tmp/one.txt; echo "Once" > /tmp/once.txt

models() {
  local s
  for s in $SHAPES; do
    [ -s /tmp/$s.gguf ] || $B model gen --shape $s --quant q4_0 --seq 16384 --margin-steps 0 -o /tmp/$s.gguf >/dev/null 2>&1
  done
}

peer() {
  [ -e /tmp/peer/started ] && return
  mkdir -p /tmp/peer && touch /tmp/peer/started
  tar xJf .peer/llama.cpp.tar.xz -C /tmp/peer
  setsid bash -c 'cd /tmp/peer/llama.cpp && cmake -B build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
    -DCMAKE_BUILD_TYPE=Release > /tmp/peer/cmake.log 2>&1 && nice cmake --build build \
    --target llama-bench -j 16 > /tmp/peer/build.log 2>&1; echo "peer build rc $?" > /tmp/peer/done' \
    < /dev/null > /dev/null 2>&1 &
  t "peer build started"
}
peer_wait() {
  t "waiting for the peer build"
  while [ ! -e /tmp/peer/done ] && [ $SECONDS -lt 540 ]; do sleep 2; done
  cat /tmp/peer/done 2>/dev/null || { echo "peer build not finished"; tail -3 /tmp/peer/build.log; return 1; }
  grep -q "rc 0" /tmp/peer/done || { tail -5 /tmp/peer/cmake.log; grep -m5 -iE "error|killed" /tmp/peer/build.log; tail -3 /tmp/peer/build.log; return 1; }
}

gates_step() {
  local B=${1:-$B} X=${2:-}
  t "gates $B $X"
  # stories260K: --act f32 by name (its F32 matrices make the default, auto, f32 too; the
  # goldens below run the default, which must stay the reference path there).
  # "not once a ns": the decoder found the device clock's unit wrong and ran without it (no
  # stage times, and the GPU kernels compile slower without it): a finding, never a number.
  $B gate --steps 200 --act f32 $X 2>&1 | grep -E "GATE|bit-identical|not once a ns"
  for m in mega multi; do echo "golden $m $($B generate --backend vulkan --dispatch $m -n 200 $X 2>/dev/null | md5sum | cut -c1-12) (want 9b48d0eee929)"; done
  s0=$SECONDS; $B gate --inject-stall-wg 3 --steps 3 --act f32 $X 2>&1 | grep -E "FAIL|GATE" | head -2; echo "stall refused in $((SECONDS - s0)) s"
  # The Q4_0 files this step gates (round 68 ran `gates` without a `models` step: no file, and
  # the grep below hid the error): made here when missing, and an error is printed.
  models
  for s in $SHAPES; do for a in f32 q8; do
    echo "-- $s act $a"; $B gate -m /tmp/$s.gguf --steps 8 --act $a $X 2>&1 | grep -E "GATE|bit-identical|rel-L2|tokens vs|refus|error"
  done; done
}

fixtures_step() {
  t "fixtures"
  bash scripts/fixtures/check.sh "$B" 2>&1 | tail -40
}

# kquant_step [ACTS]: the Q4_K_M files and the gates' activation paths (default "f32 q8";
# "none": the files without gates). The files are `model gen --quant q4_k_m`: llama-quantize's
# mix with ggml's reference quantisers, byte for byte the file llama-quantize writes from
# `model gen --quant f32` of the same seed (engine/src/model/mix.rs; since 2026-12-05, before
# that llama-quantize of the f16 file: the same types and shapes, so the same speed), so no
# call waits for the peer's build to make them.
# mix:MIX[:SHAPES[:ACTS]] the same for another `model gen --quant` mix (iq4_xs, iq4_nl, q5_k_m,
# ...; SHAPES commas, default the round's), e.g. mix:iq4_nl:llama-1b.
kquant_step() {
  local acts=${1:-f32 q8} mix=${2:-q4_k_m} shapes=${3:-$SHAPES}
  [ "$acts" = none ] && acts=
  for s in $shapes; do
    [ -s /tmp/$s-$mix.gguf ] && continue
    t "$s $mix by model gen"
    $B model gen --shape $s --quant $mix --seq 16384 --margin-steps 0 -o /tmp/$s-$mix.gguf 2>&1 | grep -E "error|refus|generated"
    $B model info /tmp/$s-$mix.gguf 2>&1 | grep -E "file type"
    $B model info /tmp/$s-$mix.gguf 2>&1 | grep -oiE "\b(q4_k|q5_k|q6_k|iq4_xs|iq4_nl|q5_0|q5_1|q8_0)\b" | sort | uniq -c | tr '\n' ' '; echo
  done
  for s in $shapes; do for a in $acts; do
    echo "-- $s $mix act $a"; $B gate -m /tmp/$s-$mix.gguf --steps 8 --act $a 2>&1 | grep -E "GATE|bit-identical|rel-L2|tokens vs|refus|error"
  done; done
}

# bench_step [DEPTHS [ARGS [ACTS]]]: DEPTHS comma-separated (default 0; llama-bench's -d beside
# baro-top's --depth), ARGS added to every baro-top run (commas for spaces), ACTS the
# activation paths (default "f32 q8"; one path keeps a call with the peer build inside the
# device's 600 s). The headers name
# depth and arguments only when given, so older logs and new ones read the same way.
# baro-top's rows first, then llama.cpp's. When `peer` started its build in this call, both
# wait for it: a build on every core beside a timed run disturbs the run (round 48 call 3:
# one of three 1b q8 runs at 989 tok/s, 36 of its passes in the slow mode, the others 1,175).
# The files of shape $1 this call made: Q4_0, Q4_K_M, then the other mixes (`mix:` steps) by name.
bench_files() {
  local f
  for f in /tmp/$1.gguf /tmp/$1-q4_k_m.gguf; do [ -s $f ] && basename $f .gguf; done
  for f in /tmp/$1-*.gguf; do [ -s $f ] && [ $f != /tmp/$1-q4_k_m.gguf ] && basename $f .gguf; done
}
PEER_RAN=" "
bench_step() {
  local s f a d depths=${1:-} xargs=${2:-} acts=${3:-f32 q8}
  [ -e /tmp/peer/started ] && peer_wait
  for s in $SHAPES; do for f in $(bench_files $s); do
    for d in ${depths:-0}; do
      local dl=${depths:+ d$d}
      for a in $acts; do
        t "baro-top $f act $a$dl${xargs:+ $xargs}"
        $B bench -m /tmp/$f.gguf --prompts /tmp/one.txt --tokens 128 --runs 3 --depth $d --dispatch mega --act $a $xargs 2>&1 | grep -E " tg|parity|compared|refus|error|not once a ns"
      done
    done
  done; done
  [ -x $P/llama-bench ] || return
  for s in $SHAPES; do for f in $(bench_files $s); do
    for d in ${depths:-0}; do
      local dl=${depths:+ d$d}
      # Once per file and depth a call: a second bench step (other ARGS, e.g. --kv,f16) reads
      # the same peer row (a shell variable, not a file: a warm machine keeps /tmp, and every
      # call needs its own peer rows).
      case "$PEER_RAN" in *" $f-d$d "*) continue ;; esac; PEER_RAN="$PEER_RAN$f-d$d "
      t "llama.cpp $f$dl"; $P/llama-bench -m /tmp/$f.gguf -p 0 -n 128 -d $d -r 3 -ngl 99 2>&1 | grep -E "tg128|build"
    done
  done; done
}

# sass.py --loops's lines a round reads (stdin): each image's instruction count, the dot loops'
# serial-load count, and the loops that read the vector from shared memory or take integer
# dot products (the matvec loops: LDS or IDP), shortest first, at most 16 lines.
loop_lines() {
  grep -E "image [0-9]+: [0-9]+ instructions|dot loops with|loop 0x.*(LDS|IDP)" | head -16 | sed 's/^ */   /'
}
# A `run` that ended before its passes says so, with its end record's reason (round 77: an
# ablation's non-finite logits were refused at pass 64 and the log only showed fewer passes —
# the steps send the run's stderr to /dev/null).
run_end() {
  python3 -c "
import json,sys
e=[d for d in (json.loads(l) for l in open(sys.argv[1]) if l.strip()) if d.get('type')=='end']
if not e: print('   run ended without an end record (killed, or its output cut)')
elif e[-1].get('reason')!='completed': print('   run ended early after %s passes: %s'%(e[-1].get('passes'),json.dumps(e[-1].get('reason'))[:300]))" "$1"
}

for step in "$@"; do
  case $step in
    peer) peer ;;
    models) t models; models ;;
    gates) gates_step ;;
    gates:*) IFS=: read -r _ bin xargs <<< "$step"; gates_step ".bin/$bin" "${xargs//,/ }" ;;
    fixtures) fixtures_step ;;
    kquant) kquant_step ;;
    kquant:*) kquant_step "$(echo "${step#kquant:}" | tr , ' ')" ;;
    mix:*) IFS=: read -r _ mx shp acts <<< "$step"; acts=${acts:-f32,q8}; kquant_step "${acts//,/ }" "$mx" "${shp//,/ }" ;;
    bench) bench_step ;;
    bench:*) IFS=: read -r _ depths xargs acts <<< "$step"; bench_step "${depths//,/ }" "${xargs//,/ }" "${acts//,/ }" ;;
    ab:*)
      IFS=: read -r _ a b shape args predict bargs depth pairs <<< "$step"
      # An arm without --act runs --act f32, as every arm did before auto became the default
      # (a round's ab rows keep their meaning; give --act auto to measure the default).
      f32arm() { case " $1 " in *" --act "*|*" --act="*) echo "$1" ;; *) echo "$1 --act f32" ;; esac; }
      abx() { t "ab $1: $3 -> $4 '$5'${6:+ -> '$6'}${7:+ depth $7}${8:+ pairs $8}"; $B bench ab -m /tmp/$1.gguf --prompts /tmp/one.txt --tokens 128 --pairs ${8:-2} \
        --depth ${7:-0} --a-binary $3 --b-binary $4 --a "$(f32arm "$5")" --b "$(f32arm "${6:-$5}")" --predict "$2" --log $O/predictions.log 2>&1 | tail -11; }
      abx "$shape" "$predict" ".bin/$a" ".bin/$b" "${args//,/ }" "${bargs//,/ }" "${depth:-}" "${pairs:-}" ;;
    stages:*)
      IFS=: read -r _ bin shape act xargs edges <<< "$step"
      act=${act:-f32}
      t "stages $bin $shape act $act${xargs:+ ${xargs//,/ }}${edges:+ buckets at $edges}"
      # One cache per arguments too (a second `stages` of one binary must not overwrite it).
      tag=${xargs//[^A-Za-z0-9]/}
      # 140 passes unless ARGS says (e.g. --ctx,4300,--passes,4300: the stages at depth).
      np="--passes 140"; case ",$xargs," in *,--passes,*) np= ;; esac
      .bin/$bin run -m /tmp/$shape.gguf --json $np -i "Once upon a time" --check off --dispatch mega --act $act \
        ${xargs//,/ } --pipeline-cache-out "$O/$bin-$shape-$act${tag:+-$tag}.cache" 2>/dev/null > /tmp/run.jsonl
      head -1 /tmp/run.jsonl | python3 -c "
import json,sys
d=json.loads(sys.stdin.readline())
for p in d.get('pipelines',[]): print('  ', p['pipeline'], '; '.join('%s=%s'%(s['name'],s['value']) for s in p['stats']))"
      run_end /tmp/run.jsonl
      e=${edges:-65}; python3 bench/stage_summary.py ${e//,/ } < /tmp/run.jsonl ;;
    plain:*)
      IFS=: read -r _ bin shape act xargs envs <<< "$step"
      act=${act:-f32}
      t "plain $bin $shape act $act${xargs:+ ${xargs//,/ }}${envs:+ env ${envs//,/ }}"
      tag=${xargs//[^A-Za-z0-9]/}${envs:+-${envs//[^A-Za-z0-9]/}}
      np="--passes 140"; case ",$xargs," in *,--passes,*) np= ;; esac
      env ${envs//,/ } .bin/$bin run -m /tmp/$shape.gguf --json $np -i "Once upon a time" --check off --dispatch mega --act $act \
        ${xargs//,/ } --no-instrument --pipeline-cache-out "$O/$bin-$shape-$act${tag:+-$tag}-plain.cache" 2>/dev/null > /tmp/run.jsonl
      # The run's lines too (round 64: a plain run three times its bench's pass time, every pass
      # labelled fast and uncontended: the frames say what the labels saw).
      xz -c /tmp/run.jsonl > "$O/$bin-$shape-$act${tag:+-$tag}-plain.jsonl.xz"
      run_end /tmp/run.jsonl
      head -1 /tmp/run.jsonl | python3 -c "
import json,sys
d=json.loads(sys.stdin.readline())
for p in d.get('pipelines',[]): print('  ', p['pipeline'], '; '.join('%s=%s'%(s['name'],s['value']) for s in p['stats']))"
      python3 -c "
import json,statistics,sys
f=[d for d in map(json.loads,open('/tmp/run.jsonl')) if d.get('type')=='frame' and d['pass']>=20]
# The passes' power modes and contention (round 61: two plain runs' medians tripled while their
# minima matched the others'; a disturbed run is labelled, not read as a result).
m={k:sum(1 for d in f if (d.get('mode') or 'unknown')==k) for k in ('fast','slow','unknown')}
print('   passes 20..: modes %d fast %d slow %d ?, contended %d'%(m['fast'],m['slow'],m['unknown'],sum(1 for d in f if (d.get('contention') or {}).get('reasons'))))
for k in ('gpu_ns','wall_ns'):
  v=sorted(d[k]/1e3 for d in f if d.get(k))
  if v: print('   %s passes 20..: median %.1f us (min %.1f, max %.1f, n %d)'%(k,statistics.median(v),v[0],v[-1],len(v)))
# The fast passes alone where some were not (round 64: a cold GPU's first 0.3 s at 345-540 MHz).
v=sorted(d['gpu_ns']/1e3 for d in f if d.get('gpu_ns') and d.get('mode')=='fast')
if v and m['fast']<len(f): print('   gpu_ns fast passes 20..: median %.1f us (min %.1f, max %.1f, n %d)'%(statistics.median(v),v[0],v[-1],len(v)))
# A run past position 4096 (ARGS --ctx,4400,--passes,4300): the passes at depth on their own.
v=sorted(d['gpu_ns']/1e3 for d in f if d.get('gpu_ns') and d.get('pos',0)>=4096)
if v: print('   gpu_ns positions 4096..: median %.1f us (min %.1f, max %.1f, n %d)'%(statistics.median(v),v[0],v[-1],len(v)))
# Issue 23 step 5's question: the device idle between one pass's end and the next's start
# (timestamp queries) and the host period, per consecutive pair of passes.
for name,g in (('device gap',lambda a,b:b['timestamp_start_ns']-a['timestamp_start_ns']-a['gpu_ns']),('host period',lambda a,b:b['host_start_ns']-a['host_start_ns'])):
  v=sorted(g(a,b)/1e3 for a,b in zip(f,f[1:]) if b['pass']==a['pass']+1 and all(x.get(k) for x in (a,b) for k in ('timestamp_start_ns','gpu_ns','host_start_ns')))
  if v: print('   %s passes 20..: median %.1f us (min %.1f, max %.1f, n %d)'%(name,statistics.median(v),v[0],v[-1],len(v)))"
      # The module's dot loops where the machine has nvdisasm (the device's CUDA image does):
      # the listing's instruction mix in call.log, read without bringing the cache back (rounds
      # 82-84 read it here after the call). Nothing is printed where nvdisasm is missing.
      python3 bench/sass.py "$O/$bin-$shape-$act${tag:+-$tag}-plain.cache" --loops 2>/dev/null | loop_lines ;;
    record:*)
      IFS=: read -r _ shape file act <<< "$step"
      t "record $shape act ${act:-f32}"; $B record -m /tmp/$shape.gguf --dispatch mega --act ${act:-f32} --passes 120 --spans-every 12 -o "$O/$file" 2>&1 | tail -2 ;;
    *) echo "unknown step $step" ;;
  esac
done
nvidia-smi --query-gpu=clocks.sm,pstate,temperature.gpu,power.draw --format=csv,noheader
t "done"
if [ -n "$ROUND" ]; then
  python3 bench/compare.py --ingest "$O/call.log" --round "$(basename "${ROUND%.toml}")" \
    --command "bash bench/run.sh $ROUND" > "$O/rows.jsonl" 2>&1
  echo "$(wc -l < "$O/rows.jsonl") rows in \$OUT/rows.jsonl: append with cat >> bench/results.jsonl"
fi
