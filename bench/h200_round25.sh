#!/usr/bin/env bash
# Round 25 (bench/README.md): the masks in registers (branch nibr). .bin/extra.tar.xz:
# baro-top-nib (d567e04 = main cd42c0c's shader), baro-top-nibr. Carry .gl and .bin. nibr's
# plain pipeline cache comes back in $OUT for bench/sass.py.
set -u
. bench/h200_env.sh
. bench/h200_lib.sh
exec > >(tee "$O/round25${TAG:-}.log") 2>&1
[ -e .bin/extra.tar.xz ] && tar xJf .bin/extra.tar.xz -C .bin
PM=.bin/baro-top-nibr; B=.bin/baro-top-nib
t "main $(cat .bin/COMMIT) nib $(cat .bin/COMMIT-nib) nibr $(cat .bin/COMMIT-nibr)"
models
$PM run -m /tmp/llama-1b.gguf --no-instrument --passes 2 --check off -i Once --pipeline-cache-out $O/nibr.vkc > /dev/null 2>&1
ab llama-1b 0 2 $B $PM "3%..10%"; ab llama-8b 0 2 $B $PM "3%..10%"
nvidia-smi --query-gpu=clocks.sm,pstate,temperature.gpu,power.draw --format=csv,noheader
t "done"
