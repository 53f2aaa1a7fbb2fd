#!/usr/bin/env bash
# Round 30 (bench/README.md): the program through a uniform view (A) and the barrier's poll
# (AB = main). .bin/baro-top-base = ae05961, .bin/baro-top-A = 4b15e8f, .bin/baro-top = AB.
# One call, the session's last device time: most important first. Carry .gl .bin.
set -u
# The three binaries travel xz-compressed (the working tree's 64 MiB limit).
for f in .bin/*.xz; do
  python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], 'wb'))" "$f" "${f%.xz}"
  chmod +x "${f%.xz}"
done
. bench/h200_env.sh
. bench/h200_lib.sh
exec > >(tee "$O/round30.log") 2>&1
BASE=.bin/baro-top-base A=.bin/baro-top-A
t "base $(cat .bin/COMMIT-base) A $(cat .bin/COMMIT-A) AB $(cat .bin/COMMIT)"
models
abx() { # SHAPE PREDICT A_BIN B_BIN ARGS
  t "ab $1: $3 -> $4 '$5'"
  $B bench ab -m /tmp/$1.gguf --prompts /tmp/one.txt --tokens 128 --pairs 2 --a-binary $3 --b-binary $4 \
    --a "$5" --b "$5" --predict "$2" --log $O/predictions.log 2>&1 | tail -4
}
stq() { # SHAPE: stage sums of AB with q8 (bench/stage_summary.py), 140 passes
  t "stages $1 q8 AB"
  $B run -m /tmp/$1.gguf --json --passes 140 -i "Once upon a time" --check off --dispatch mega --act q8 2>/dev/null > /tmp/run.jsonl
  python3 bench/stage_summary.py 65 < /tmp/run.jsonl
}
abx llama-1b "+4%..+12%" $BASE $A "--dispatch mega --act q8"
abx llama-1b "+1%..+4%" $A $B "--dispatch mega --act q8"
abx llama-8b "+2%..+7%" $BASE $A "--dispatch mega --act q8"
abx llama-8b "+0.5%..+2%" $A $B "--dispatch mega --act q8"
t "gates AB"
$B gate --steps 200 2>&1 | grep -E "GATE|bit-identical"
for m in mega multi; do echo "golden $m $($B generate --backend vulkan --dispatch $m -n 200 2>/dev/null | md5sum | cut -c1-12) (want 9b48d0eee929)"; done
for s in llama-1b llama-8b; do for a in f32 q8; do
  echo "-- $s act $a"; $B gate -m /tmp/$s.gguf --steps 8 --act $a 2>&1 | grep -E "GATE|bit-identical|rel-L2"
done; done
t "stall injection AB"; s0=$SECONDS
$B gate --inject-stall-wg 3 --steps 3 2>&1 | grep -E "FAIL|GATE" | head -3; echo "took $((SECONDS - s0)) s"
abx llama-1b "+5%..+15%" $BASE $B "--dispatch mega"
stq llama-1b
t "record llama-1b q8 AB"
$B record -m /tmp/llama-1b.gguf --act q8 --dispatch mega --passes 120 --spans-every 12 -o $O/h200-llama1b-q8-mega.baro 2>&1 | tail -2
stq llama-8b
abx llama-8b "+2%..+8%" $BASE $B "--dispatch mega"
nvidia-smi --query-gpu=clocks.sm,pstate,temperature.gpu,power.draw --format=csv,noheader
t "done"
