#!/usr/bin/env bash
# Round 24 (bench/README.md): each nibble in one instruction (branch nib). .bin/baro-top = main
# 367bc0c; .bin/extra.tar.xz: baro-top-nib ((COMMIT-nib)). Carry .gl and .bin. nib's plain pipeline
# cache comes back in $OUT for bench/sass.py.
set -u
. bench/h200_env.sh
. bench/h200_lib.sh
exec > >(tee "$O/round24${TAG:-}.log") 2>&1
[ -e .bin/extra.tar.xz ] && tar xJf .bin/extra.tar.xz -C .bin
PM=.bin/baro-top-nib
t "main $(cat .bin/COMMIT) nib $(cat .bin/COMMIT-nib)"
models
$PM run -m /tmp/llama-1b.gguf --no-instrument --passes 2 --check off -i Once --pipeline-cache-out $O/nib.vkc > /dev/null 2>&1
ab llama-1b 0 2 $B $PM "5%..15%"; ab llama-8b 0 2 $B $PM "5%..15%"
nvidia-smi --query-gpu=clocks.sm,pstate,temperature.gpu,power.draw --format=csv,noheader
t "done"
