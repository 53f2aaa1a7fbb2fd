#!/usr/bin/env bash
# End of session 2026-11-30 (second): the merged main on the H200 — gates, the recorder's
# overhead inside one session (`bench rec`), the new bench instrument, `serve --metrics` on a
# live session, and the host lock between two timing runs. Carry .gl and .bin.
set -u
. bench/h200_env.sh
exec > >(tee "$O/final.log") 2>&1
echo "== commit $(cat .bin/COMMIT)"
for s in llama-1b llama-8b; do $B model gen --shape $s --quant q4_0 --margin-steps 0 -o /tmp/$s.gguf >/dev/null 2>&1; done
echo "== gates"
$B gate --steps 200 2>&1 | grep -E "GATE|bit-identical"
for s in llama-1b llama-8b; do echo "-- $s"; $B gate -m /tmp/$s.gguf --steps 8 2>&1 | grep -E "GATE|bit-identical|rel-L2"; done
echo "== recorder overhead within one session (bench rec)"
$B bench rec -m /tmp/llama-1b.gguf --passes 6000 --block 200 2>&1 | tail -8
$B bench rec -m /tmp/llama-8b.gguf --passes 2400 --block 200 2>&1 | tail -8
echo "== bench (20 built-in prompts, 64 tokens, 1 run, mega and multi), markdown rows"
$B bench -m /tmp/llama-1b.gguf --tokens 64 --runs 1 2>&1 | tail -8
echo "== serve --metrics on a live session (4 s), then SIGTERM"
$B serve --metrics 127.0.0.1:9464 -m /tmp/llama-1b.gguf > /tmp/serve.log 2>&1 & sp=$!
sleep 4
python3 - <<'PY'
import urllib.request
t = urllib.request.urlopen("http://127.0.0.1:9464/metrics", timeout=5).read().decode()
names = sorted({l.split("{")[0].split(" ")[0] for l in t.splitlines() if l and not l.startswith("#")})
print("  %d series lines, %d metric names: %s" % (len(t.splitlines()), len(names), ", ".join(names[:14])))
for l in t.splitlines():
    if l.startswith(("baro_tokens_per_second", "baro_passes_total", "baro_gpu_sm_clock")): print("  " + l[:160])
PY
kill -TERM $sp; wait $sp; echo "  serve exit $?"; tail -2 /tmp/serve.log
echo "== host lock: a record holds it; a second record --no-wait labels every pass; a third waits"
$B record -m /tmp/llama-1b.gguf --passes 6000 --check off -o /tmp/holder.baro > /tmp/holder.log 2>&1 & hp=$!
sleep 3
$B record -m /tmp/llama-1b.gguf --passes 200 --check off --no-wait -o /tmp/nowait.baro 2>&1 | grep -iE "lock|warn|completed" | head -4
$B replay /tmp/nowait.baro --headless --json 2>/dev/null | python3 -c '
import sys, json
n = c = 0; kinds = {}
for l in sys.stdin:
    d = json.loads(l)
    if d["type"] != "frame": continue
    n += 1; r = (d.get("contention") or {}).get("reasons", [])
    c += bool(r)
    for x in r: kinds[x.get("kind")] = kinds.get(x.get("kind"), 0) + 1
print("  --no-wait: %d of %d passes contended, reasons %s" % (c, n, kinds))'
t0=$EPOCHREALTIME; $B record -m /tmp/llama-1b.gguf --passes 100 --check off -o /tmp/waited.baro 2>&1 | grep -iE "lock|wait|completed" | head -3
echo "  the waiting record finished after $(awk "BEGIN{printf \"%.1f\", $EPOCHREALTIME - $t0}") s"
wait $hp; tail -1 /tmp/holder.log
nvidia-smi --query-gpu=clocks.sm,pstate,temperature.gpu,power.draw --format=csv,noheader
