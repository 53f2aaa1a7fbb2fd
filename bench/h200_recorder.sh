#!/usr/bin/env bash
# Recorder overhead on the H200: `run --json` vs `record`, alternating, on llama-1b Q4_0.
# Both with --check off (the session of 2026-11-30 compared `run --check off` with `record`
# at its default --check auto: the shadow CPU reference ran only under `record`); a third
# column records with --check auto to show what the reference alone costs.
# Per pair: median per-pass wall time over passes 100..600 of each run, and the overhead %.
# Carry .gl and .bin. Output: $OUT/recorder.log.
set -u
. bench/h200_env.sh
exec > >(tee "$O/recorder.log") 2>&1
echo "== commit $(cat .bin/COMMIT 2>/dev/null || echo unknown)"
M=/tmp/llama-1b.gguf
$B model gen --shape llama-1b --quant q4_0 --margin-steps 0 -o $M >/dev/null 2>&1
PASSES=600
PAIRS=${PAIRS:-6}
med() { python3 -c '
import sys, json, statistics as st
w=[json.loads(l)["wall_ns"] for l in sys.stdin if l.startswith("{\"type\":\"frame\"")]
w=w[100:]
print("%.2f" % (st.median(w)/1e3) if w else "nan")'; }
# Warm the GPU clocks and the page cache before the first pair.
$B run -m $M --passes 300 --check off > /dev/null 2>&1
printf "%-5s %12s %12s %9s %16s %9s\n" pair "run us" "record us" "overhead" "rec+check us" "overhead"
for i in $(seq 1 "$PAIRS"); do
  r=$($B run -m $M --passes $PASSES --json --check off 2>/dev/null | med)
  $B record -m $M --passes $PASSES --check off -o /tmp/ov.baro 2>"$O/record-$i.err"
  c=$($B replay /tmp/ov.baro --headless --json 2>/dev/null | med)
  $B record -m $M --passes $PASSES --check auto -o /tmp/ova.baro 2>/dev/null
  a=$($B replay /tmp/ova.baro --headless --json 2>/dev/null | med)
  python3 -c "
r, c, a = float('$r'), float('$c'), float('$a')
print('%-5s %12.2f %12.2f %+8.2f%% %16.2f %+8.2f%%' % ('$i', r, c, 100*(c/r-1), a, 100*(a/r-1)))"
  grep -o "writer backlog at most [0-9]* messages" "$O/record-$i.err" | sed 's/^/      /'
done | tee "$O/pairs.txt"
python3 - "$O/pairs.txt" <<'PY'
import sys, statistics as st
rows=[l.split() for l in open(sys.argv[1]) if l.strip() and l.split()[0].isdigit()]
ov=[float(r[3].rstrip('%')) for r in rows]; oa=[float(r[5].rstrip('%')) for r in rows]
print("record --check off overhead: median %+.2f%% (min %+.2f%%, max %+.2f%%) over %d pairs" % (st.median(ov), min(ov), max(ov), len(ov)))
print("record --check auto overhead: median %+.2f%% (min %+.2f%%, max %+.2f%%)" % (st.median(oa), min(oa), max(oa)))
PY
nvidia-smi --query-gpu=clocks.sm,pstate,temperature.gpu,power.draw --format=csv,noheader
