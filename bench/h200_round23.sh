#!/usr/bin/env bash
# Round 23 (bench/README.md): nibbles masked four at a time (branch pm). .bin/baro-top = main
# 367bc0c; .bin/extra.tar.xz: baro-top-pm (e4984d2). Carry .gl and .bin. pm's plain pipeline
# cache comes back in $OUT for bench/sass.py.
set -u
. bench/h200_env.sh
. bench/h200_lib.sh
exec > >(tee "$O/round23${TAG:-}.log") 2>&1
[ -e .bin/extra.tar.xz ] && tar xJf .bin/extra.tar.xz -C .bin
PM=.bin/baro-top-pm
t "main $(cat .bin/COMMIT) pm $(cat .bin/COMMIT-pm)"
models
$PM run -m /tmp/llama-1b.gguf --no-instrument --passes 2 --check off -i Once --pipeline-cache-out $O/pm.vkc > /dev/null 2>&1
ab llama-1b 0 2 $B $PM "2%..8%"; ab llama-8b 0 2 $B $PM "2%..8%"
nvidia-smi --query-gpu=clocks.sm,pstate,temperature.gpu,power.draw --format=csv,noheader
t "done"
