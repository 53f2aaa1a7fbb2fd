#!/usr/bin/env bash
# The f16 KV cache on the H200 (round 12, part 3): gates against the f16-rounded reference,
# then decode at contexts 4096 and 16384 with --kv f16 (prompt L-128 tokens, tg128), to set
# beside part 2's f32 rows. Carry .gl and .bin; models from part 1/2 when the machine is warm.
set -u
. bench/h200_env.sh
exec > >(tee "$O/round12-kv16.log") 2>&1
echo "== new $(cat .bin/COMMIT)"
for s in llama-1b llama-8b; do [ -s /tmp/$s.gguf ] || $B model gen --shape $s --quant q4_0 --seq 16384 --margin-steps 0 -o /tmp/$s.gguf >/dev/null 2>&1; done
for L in 4096 16384; do python3 -c "print(('once upon a time there was a little dog '*500)[:$L-129])" > /tmp/ctx$L.txt; done
echo "== gates --kv f16"
$B gate --kv f16 --steps 200 2>&1 | grep -E "GATE|bit-identical|rel-L2"
for s in llama-1b llama-8b; do echo "-- $s"; $B gate --kv f16 -m /tmp/$s.gguf --steps 8 2>&1 | grep -E "GATE|bit-identical|rel-L2"; done
echo "== context with --kv f16"
for s in llama-1b llama-8b; do for L in 4096 16384; do
  [ "$s$L" = llama-8b16384 ] && continue
  echo "-- $s L=$L"; $B bench -m /tmp/$s.gguf --kv f16 --prompts /tmp/ctx$L.txt --dispatch mega --tokens 128 --runs 1 2>&1 | grep -E "^mega"
done; done
nvidia-smi --query-gpu=clocks.sm,pstate,temperature.gpu,power.draw --format=csv,noheader
