#!/usr/bin/env bash
# Round 14d (bench/README.md): main with the GQA attention units merged (.bin/baro-top) against
# the main before it (baro-top-old, 2a4b625) in one call: gates and goldens on the merged
# build, `bench ab` at depth 0 / 3968 / 16256 (f32) and 16256 (f16); and the code-size check:
# `run --json` stage sums of the old main and the same main padded with ~32 KB of code that
# never runs (baro-top-pad). Carry .gl and .bin (extra.tar.xz holds baro-top-old and -pad).
set -u
. bench/h200_env.sh
exec > >(tee "$O/round14d${TAG:-}.log") 2>&1
t() { echo "== [$SECONDS s] $*"; }
[ -e .bin/extra.tar.xz ] && tar xJf .bin/extra.tar.xz -C .bin
A=.bin/baro-top-old
t "new $(cat .bin/COMMIT) old $(cat .bin/COMMIT-old)"
for s in llama-1b llama-8b; do [ -s /tmp/$s.gguf ] || $B model gen --shape $s --quant q4_0 --seq 16384 --margin-steps 0 -o /tmp/$s.gguf >/dev/null 2>&1; done
echo "Once upon a time" > /tmp/one.txt; echo "Once" > /tmp/once.txt
t "gates (new)"
for kv in f32 f16; do echo "-- stories260K kv $kv"; $B gate --steps 200 --kv $kv 2>&1 | grep -E "GATE|bit-identical|rel-L2"; done
for s in llama-1b llama-8b; do for kv in f32 f16; do echo "-- $s kv $kv"; $B gate -m /tmp/$s.gguf --steps 8 --kv $kv 2>&1 | grep -E "GATE|bit-identical|rel-L2"; done; done
for m in mega multi; do a=$($B generate --backend vulkan --dispatch $m -n 200 2>/dev/null | md5sum | cut -c1-12); c=$($B generate -n 200 2>/dev/null | md5sum | cut -c1-12); echo "golden $m vulkan $a cpu $c $([ "$a" = "$c" ] && echo SAME || echo DIFFERENT)"; done
t "code size: old main vs old main + 32 KB never run (1b, run --json, positions 0..139)"
for b in baro-top-old baro-top-pad baro-top-old baro-top-pad; do
  echo "-- $b"; .bin/$b run -m /tmp/llama-1b.gguf --json --passes 140 -i "Once upon a time" --check off --dispatch mega 2>/dev/null > /tmp/run.jsonl
  head -1 /tmp/run.jsonl | python3 -c "
import json,sys
d=json.loads(sys.stdin.readline())
for p in d.get('pipelines',[]): print('  ', p['pipeline'], '; '.join('%s=%s'%(s['name'],s['value']) for s in p['stats'] if s['name'] in ('Register Count','Binary Size')))"
  python3 bench/stage_summary.py 65 < /tmp/run.jsonl
done
ab() { # shape kv depth pairs predict
  t "ab $1 kv $2 depth $3"
  local pr=/tmp/once.txt dd=$(( $3 > 6 ? $3 - 6 : 0 )); [ "$3" = 0 ] && pr=/tmp/one.txt
  $B bench ab -m /tmp/$1.gguf --prompts $pr --depth $dd --tokens 128 --pairs $4 --a-binary $A --b-binary $B \
    --a "--dispatch mega --kv $2" --b "--dispatch mega --kv $2" --predict "$5" --log $O/predictions.log 2>&1 | tail -4
}
ab llama-1b f32 0 3 "-9%..-5%";       ab llama-8b f32 0 3 "-5%..-1%"
ab llama-1b f32 3968 2 "15%..30%";    ab llama-8b f32 3968 2 "22%..35%"
ab llama-1b f32 16256 2 "90%..110%";  ab llama-8b f32 16256 2 "105%..130%"
ab llama-1b f16 16256 1 "150%..210%"; ab llama-8b f16 16256 1 "180%..240%"
nvidia-smi --query-gpu=clocks.sm,pstate,temperature.gpu,power.draw --format=csv,noheader
t "done"
