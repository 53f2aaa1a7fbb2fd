#!/usr/bin/env bash
# Round 20 (bench/README.md): the code a pass runs. .bin/baro-top = main (c1f54ed's shader);
# .bin/extra.tar.xz: baro-top-one (branch r20 96bedf6: one dot call site for every row stage),
# baro-top-one2 (r20: and one copy of the Q4_0 block code). Carry .gl and .bin.
set -u
. bench/h200_env.sh
. bench/h200_lib.sh
exec > >(tee "$O/round20${TAG:-}.log") 2>&1
[ -e .bin/extra.tar.xz ] && tar xJf .bin/extra.tar.xz -C .bin
ONE=.bin/baro-top-one; ONE2=.bin/baro-top-one2
t "main $(cat .bin/COMMIT) one $(cat .bin/COMMIT-one) one2 $(cat .bin/COMMIT-one2)"
models
gates $ONE2
for b in $B $ONE $ONE2; do stages llama-1b $b stats; done
for b in $B $ONE $ONE2; do stages llama-8b $b; done
ab llama-1b 0 3 $B $ONE "3%..10%"; ab llama-8b 0 3 $B $ONE "2%..6%"
ab llama-1b 0 3 $ONE $ONE2 "1%..4%"; ab llama-8b 0 3 $ONE $ONE2 "1%..4%"
ab llama-1b 3968 2 $B $ONE2 "4%..14%"
nvidia-smi --query-gpu=clocks.sm,pstate,temperature.gpu,power.draw --format=csv,noheader
t "done"
