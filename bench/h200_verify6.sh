#!/usr/bin/env bash
# Sixth session's last call: the landed commit on the H200 — gates (stories260K goldens, 1b
# and 8b with f32 and with q8 at its default workgroup) and `bench --runs 3` f32 and q8 at
# depth 128 (mega and multi). Carry .gl .bin.
set -u
. bench/h200_env.sh
. bench/h200_lib.sh
exec > >(tee "$O/verify6.log") 2>&1
t "main $(cat .bin/COMMIT)"
models
t "gates"
$B gate --steps 200 2>&1 | grep -E "GATE|bit-identical"
for m in mega multi; do echo "golden $m $($B generate --backend vulkan --dispatch $m -n 200 2>/dev/null | md5sum | cut -c1-12) (want 9b48d0eee929)"; done
for s in llama-1b llama-8b; do for a in f32 q8; do
  echo "-- $s act $a"; $B gate -m /tmp/$s.gguf --steps 8 --act $a 2>&1 | grep -E "grid|GATE|bit-identical|rel-L2|tokens vs"
done; done
for s in llama-1b llama-8b; do for a in f32 q8; do
  t "bench $s act $a"
  $B bench -m /tmp/$s.gguf --prompts /tmp/one.txt --tokens 128 --runs 3 --dispatch both --act $a 2>&1 | grep -E " tg|parity|compared"
done; done
nvidia-smi --query-gpu=clocks.sm,pstate,temperature.gpu,power.draw --format=csv,noheader
t "done"
