# Sourced by a round's script after bench/h200_env.sh: the steps every round repeats, so a
# round's script says only what it measures. (Scripts of rounds already run keep their own
# copies: each is the record of its call.)
#   t MSG                        timestamped section line
#   models                       llama-1b and llama-8b Q4_0 (16k context) in /tmp, once
#   gates BIN                    gates (stories260K f32/f16, 1b and 8b f32/f16) and goldens
#   stages SHAPE BIN [stats]     `run --json` 140 passes: stage sums at positions <65 / 65+,
#                                with `stats` the pipelines' register/stack/memory statistics
#   ab SHAPE DEPTH PAIRS A B PREDICT
#                                `bench ab` binary A vs B, mega, one prompt (DEPTH 0) or
#                                "Once" at DEPTH, frozen PREDICT logged to $O/predictions.log
t() { echo "== [$SECONDS s] $*"; }

models() {
  local s
  for s in llama-1b llama-8b; do
    [ -s /tmp/$s.gguf ] || $B model gen --shape $s --quant q4_0 --seq 16384 --margin-steps 0 -o /tmp/$s.gguf >/dev/null 2>&1
  done
  echo "Once upon a time" > /tmp/one.txt; echo "Once" > /tmp/once.txt
}

gates() {
  local b=$1 s kv m a c
  t "gates $b"
  for kv in f32 f16; do echo "-- stories260K kv $kv"; $b gate --steps 200 --kv $kv 2>&1 | grep -E "GATE|bit-identical|rel-L2"; done
  for s in llama-1b llama-8b; do for kv in f32 f16; do
    echo "-- $s kv $kv"; $b gate -m /tmp/$s.gguf --steps 8 --kv $kv 2>&1 | grep -E "GATE|bit-identical|rel-L2"
  done; done
  for m in mega multi; do
    a=$($b generate --backend vulkan --dispatch $m -n 200 2>/dev/null | md5sum | cut -c1-12)
    c=$($b generate -n 200 2>/dev/null | md5sum | cut -c1-12)
    echo "golden $m vulkan $a cpu $c $([ "$a" = "$c" ] && echo SAME || echo DIFFERENT)"
  done
}

stages() {
  t "stages $1 $2"
  $2 run -m /tmp/$1.gguf --json --passes 140 -i "Once upon a time" --check off --dispatch mega 2>/dev/null > /tmp/run.jsonl
  [ "${3:-}" = stats ] && head -1 /tmp/run.jsonl | python3 -c "
import json,sys
d=json.loads(sys.stdin.readline())
for p in d.get('pipelines',[]): print('  ', p['pipeline'], '; '.join('%s=%s'%(s['name'],s['value']) for s in p['stats']))"
  python3 bench/stage_summary.py 65 < /tmp/run.jsonl
}

ab() {
  t "ab $1 depth $2: A $4 B $5"
  local pr=/tmp/once.txt dd=$(( $2 > 6 ? $2 - 6 : 0 )); [ "$2" = 0 ] && pr=/tmp/one.txt
  $B bench ab -m /tmp/$1.gguf --prompts $pr --depth $dd --tokens 128 --pairs $3 --a-binary $4 --b-binary $5 \
    --a "--dispatch mega" --b "--dispatch mega" --predict "$6" --log $O/predictions.log 2>&1 | tail -4
}
