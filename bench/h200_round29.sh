#!/usr/bin/env bash
# Round 29 (bench/README.md): the 64-register cap. .bin/baro-top-305 = 30553e5 (main's
# shader), .bin/baro-top = 6c5d370 (four blocks per lane). Carry .gl .bin.
set -u
. bench/h200_env.sh
. bench/h200_lib.sh
exec > >(tee "$O/round29.log") 2>&1
OLD=.bin/baro-top-305
t "old $(cat .bin/COMMIT-305) four-block $(cat .bin/COMMIT)"
models
abx() { # SHAPE PREDICT A_BIN B_BIN A B
  t "ab $1: $3 '$5' -> $4 '$6'"
  $B bench ab -m /tmp/$1.gguf --prompts /tmp/one.txt --tokens 128 --pairs 2 --a-binary $3 --b-binary $4 \
    --a "$5" --b "$6" --predict "$2" --log $O/predictions.log 2>&1 | tail -4
}
for s in llama-1b llama-8b; do
  abx $s "-6%..0%" $OLD $OLD "--dispatch mega --act q8" "--dispatch mega --act q8 --wg-size 512"
  abx $s "0%..8%" $OLD $B "--dispatch mega --act q8 --wg-size 512" "--dispatch mega --act q8 --wg-size 512"
done
for b in $OLD $B; do for w in 1024 512; do
  echo "-- $b wg $w: $($b run -m /tmp/llama-1b.gguf --json --passes 2 --check off -i Once --act q8 --wg-size $w 2>/dev/null | head -1 | python3 -c "
import json,sys
d=json.loads(sys.stdin.readline())
print(' | '.join(p['pipeline']+': '+'; '.join('%s=%s'%(s['name'],s['value']) for s in p['stats'] if s['name'] in ('Register Count','Local Memory Size','Binary Size')) for p in d.get('pipelines',[])))")"
done; done
t "done"
