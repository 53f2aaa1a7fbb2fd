#!/usr/bin/env bash
# Round 15a (bench/README.md): which of the attention change's side effects slows the matvec
# stages? `run --json` stage sums (1b, positions 0..139, instrumented every pass) of the old
# main (2a4b625), the new main (af51f11), and the new main with one change each: x2 without
# the key rows' shuffle butterfly (timing only: its sums are wrong), x3 with the KV cache's
# vec4/uvec2 views not `coherent`, x4 with the head size read from the program instead of a
# specialisation constant. Two runs each, binaries in turn. Carry .gl and .bin.
set -u
. bench/h200_env.sh
exec > >(tee "$O/round15a${TAG:-}.log") 2>&1
t() { echo "== [$SECONDS s] $*"; }
[ -e .bin/extra.tar.xz ] && tar xJf .bin/extra.tar.xz -C .bin
t "new $(cat .bin/COMMIT)"
[ -s /tmp/llama-1b.gguf ] || $B model gen --shape llama-1b --quant q4_0 --seq 16384 --margin-steps 0 -o /tmp/llama-1b.gguf >/dev/null 2>&1
for rep in 1 2; do for b in baro-top-old baro-top baro-top-x2 baro-top-x3 baro-top-x4; do
  t "rep $rep $b"
  .bin/$b run -m /tmp/llama-1b.gguf --json --passes 140 -i "Once upon a time" --check off --dispatch mega 2>/dev/null > /tmp/run.jsonl
  head -1 /tmp/run.jsonl | python3 -c "
import json,sys
d=json.loads(sys.stdin.readline())
for p in d.get('pipelines',[]): print('  ', p['pipeline'], '; '.join('%s=%s'%(s['name'],s['value']) for s in p['stats']))"
  python3 bench/stage_summary.py 65 < /tmp/run.jsonl
done; done
t "done"
