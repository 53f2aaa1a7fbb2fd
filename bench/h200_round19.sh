#!/usr/bin/env bash
# Round 19 (bench/README.md): split-K (baro-top-sk, 08b6a10) and the rope pair over two teams
# (baro-top-skr, 82b046c; both from branch splitk, in .bin/extra.tar.xz) against main
# (.bin/baro-top): gates and goldens, 1b stage sums, `bench ab` with the frozen predictions;
# then the local-memory variant (baro-top-lm, branch attlm): pipeline statistics, stage
# sums, `bench ab` (its gates are not in this call: it is bit-identical, parity checks it).
# Carry .gl and .bin.
set -u
. bench/h200_env.sh
. bench/h200_lib.sh
exec > >(tee "$O/round19${TAG:-}.log") 2>&1
[ -e .bin/extra.tar.xz ] && tar xJf .bin/extra.tar.xz -C .bin
SK=.bin/baro-top-sk; SKR=.bin/baro-top-skr; LM=.bin/baro-top-lm
t "main $(cat .bin/COMMIT) sk $(cat .bin/COMMIT-sk 2>/dev/null) skr $(cat .bin/COMMIT-skr 2>/dev/null) lm $(cat .bin/COMMIT-lm 2>/dev/null)"
models
gates $SK; gates $SKR
for rep in 1 2; do for b in $B $SK $SKR; do stages llama-1b $b; done; done
ab llama-1b 0 3 $B $SK "2%..7%"; ab llama-1b 0 3 $SK $SKR "1%..4%"
ab llama-8b 0 3 $B $SKR "-0.5%..0.5%"; ab llama-1b 3968 3 $B $SKR "2%..9%"
t "local memory: main vs lm"
for b in $B $LM; do stages llama-1b $b stats; done
ab llama-1b 0 3 $B $LM "3%..7%"; ab llama-8b 0 3 $B $LM "2%..5%"
nvidia-smi --query-gpu=clocks.sm,pstate,temperature.gpu,power.draw --format=csv,noheader
t "done"
