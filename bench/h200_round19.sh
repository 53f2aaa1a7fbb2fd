#!/usr/bin/env bash
# Round 19 (bench/README.md), rebuilt 2026-12-01 (fifth session: the branches of the fourth were
# not kept, so lm, sk and skr were written again and now stack: main → lm → sk → skr).
# .bin/baro-top = main c1f54ed; .bin/extra.tar.xz: baro-top-lm (main 95cb129: the attention's
# indexed vec4 reads through selects), baro-top-sk (branch splitk, split-K only),
# baro-top-skr (splitk: split-K and the rope pair over two teams).
# Gates and goldens on lm and skr (sk is skr with one branch off), pipeline statistics and 1b
# stage sums, `bench ab` with the frozen predictions. Carry .gl and .bin.
set -u
. bench/h200_env.sh
. bench/h200_lib.sh
exec > >(tee "$O/round19${TAG:-}.log") 2>&1
[ -e .bin/extra.tar.xz ] && tar xJf .bin/extra.tar.xz -C .bin
LM=.bin/baro-top-lm; SK=.bin/baro-top-sk; SKR=.bin/baro-top-skr
t "main $(cat .bin/COMMIT) lm $(cat .bin/COMMIT-lm) sk $(cat .bin/COMMIT-sk) skr $(cat .bin/COMMIT-skr)"
models
gates $LM; gates $SKR
for b in $B $LM; do stages llama-1b $b stats; done
for b in $SK $SKR; do stages llama-1b $b; done
for b in $B $LM $SKR; do stages llama-8b $b; done
ab llama-1b 0 3 $B $LM "3%..7%"; ab llama-8b 0 3 $B $LM "2%..5%"
ab llama-1b 0 3 $LM $SK "2%..7%"; ab llama-1b 0 3 $SK $SKR "1%..4%"
ab llama-8b 0 3 $LM $SKR "-0.5%..0.5%"; ab llama-1b 3968 3 $LM $SKR "2%..9%"
nvidia-smi --query-gpu=clocks.sm,pstate,temperature.gpu,power.draw --format=csv,noheader
t "done"
