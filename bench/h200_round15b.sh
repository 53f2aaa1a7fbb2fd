#!/usr/bin/env bash
# Round 15b (bench/README.md): the matvec stages with the attention (and the output
# projection's attention prologue) skipped, old main vs new main (timing only: the
# logits are not the model's). Two runs each, binaries in turn. Carry .gl and .bin.
set -u
. bench/h200_env.sh
exec > >(tee "$O/round15b${TAG:-}.log") 2>&1
t() { echo "== [$SECONDS s] $*"; }
[ -e .bin/extra.tar.xz ] && tar xJf .bin/extra.tar.xz -C .bin
t "new $(cat .bin/COMMIT)"
[ -s /tmp/llama-1b.gguf ] || $B model gen --shape llama-1b --quant q4_0 --seq 16384 --margin-steps 0 -o /tmp/llama-1b.gguf >/dev/null 2>&1
for rep in 1 2; do for b in baro-top-old baro-top baro-top-oldskip baro-top-newskip; do
  t "rep $rep $b"
  .bin/$b run -m /tmp/llama-1b.gguf --json --passes 140 -i "Once upon a time" --check off --dispatch mega 2>/dev/null > /tmp/run.jsonl
  head -1 /tmp/run.jsonl | python3 -c "
import json,sys
d=json.loads(sys.stdin.readline())
for p in d.get('pipelines',[]): print('  ', p['pipeline'], '; '.join('%s=%s'%(s['name'],s['value']) for s in p['stats']))"
  python3 bench/stage_summary.py 65 < /tmp/run.jsonl
done; done
t "done"
