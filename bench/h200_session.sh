#!/usr/bin/env bash
# End of session 2026-11-30 on the H200: the integrated engine (Session, sinks, sensors,
# recorder) — gates and throughput unchanged; recordings from a cold GPU, in multi mode, with
# a second decode on the same GPU, and quiet; what each pass was labelled; recorder overhead.
# Carry .gl and .bin. Output: $OUT/session.log and the .baro files.
set -u
. bench/h200_env.sh
exec > >(tee "$O/session.log") 2>&1
echo "== commit $(cat .bin/COMMIT)"
M=/tmp/llama-1b.gguf
$B model gen --shape llama-1b --quant q4_0 --margin-steps 0 -o $M >/dev/null 2>&1
summ() { $B replay "$1" --headless --json 2>/dev/null | python3 -c '
import sys, json, statistics as st
modes, cont, reasons, walls, gpus, clocks, clients = {}, {}, {}, [], [], [], set()
for l in sys.stdin:
    d = json.loads(l)
    if d["type"] == "frame":
        modes[d.get("mode")] = modes.get(d.get("mode"), 0) + 1
        c = d.get("contention") or {}
        q = "quiet" if not c.get("reasons") else "contended"
        cont[q] = cont.get(q, 0) + 1
        for r in c.get("reasons", []):
            reasons[r.get("kind")] = reasons.get(r.get("kind"), 0) + 1
        walls.append(d["wall_ns"]); gpus.append(d.get("gpu_ns") or 0)
    elif d["type"] == "sensor":
        r = d.get("reading", d)
        if "sm_mhz" in json.dumps(r): clocks.append(json.dumps(r)[:120])
        if "clients" in r and r.get("clients"): clients.add(json.dumps(r["clients"])[:200])
print("  modes", modes, "| contention", cont, "| reasons", reasons)
print("  wall us median %.1f p10 %.1f p90 %.1f | gpu us median %.1f" % (st.median(walls)/1e3, sorted(walls)[len(walls)//10]/1e3, sorted(walls)[9*len(walls)//10]/1e3, st.median(gpus)/1e3))
print("  first clocks", clocks[:2]); print("  other clients seen", list(clients)[:3])
'; }
echo "== cold GPU: record 300 passes mega right after start"
nvidia-smi --query-gpu=clocks.sm,pstate --format=csv,noheader
$B record -m $M --dispatch mega --passes 300 --spans-every 10 -o $O/h200-llama1b-mega-cold.baro 2>&1 | tail -2
summ $O/h200-llama1b-mega-cold.baro
echo "== multi: record 300 passes"
$B record -m $M --dispatch multi --passes 300 --spans-every 10 -o $O/h200-llama1b-multi.baro 2>&1 | tail -2
summ $O/h200-llama1b-multi.baro
echo "== contended: a second baro-top decodes on the same GPU"
$B run -m $M --passes 20000 --no-instrument --check off > /dev/null 2>&1 &
BG=$!; sleep 4
$B record -m $M --dispatch mega --passes 300 --spans-every 10 -o $O/h200-llama1b-contended.baro 2>&1 | tail -2
kill $BG 2>/dev/null; wait $BG 2>/dev/null
summ $O/h200-llama1b-contended.baro
echo "== quiet: record 120 passes (the shipped default replay)"
$B record -m $M --dispatch mega --passes 120 --spans-every 12 -o $O/h200-llama1b-mega.baro 2>&1 | tail -2
summ $O/h200-llama1b-mega.baro
ls -la $O
echo "== recorder overhead: run --json vs record, alternating, 600 passes each"
for i in 1 2 3; do
  $B run -m $M --passes 600 --json --check off 2>/dev/null | python3 -c '
import sys, json, statistics as st
w=[json.loads(l)["wall_ns"] for l in sys.stdin if l.startswith("{\"type\":\"frame\"")]
print("  run    median wall us %.2f (n %d)" % (st.median(w[100:])/1e3, len(w)))'
  $B record -m $M --passes 600 -o /tmp/ov.baro 2>/dev/null
  $B replay /tmp/ov.baro --headless --json 2>/dev/null | python3 -c '
import sys, json, statistics as st
w=[json.loads(l)["wall_ns"] for l in sys.stdin if l.startswith("{\"type\":\"frame\"")]
print("  record median wall us %.2f (n %d)" % (st.median(w[100:])/1e3, len(w)))'
done
echo "== gates"
$B gate --steps 200 2>&1 | grep -E "GATE|bit-identical"
$B gate -m $M --steps 8 2>&1 | grep -E "GATE|bit-identical|rel-L2"
$B model gen --shape llama-8b --quant q4_0 --margin-steps 0 -o /tmp/llama-8b.gguf >/dev/null 2>&1
$B gate -m /tmp/llama-8b.gguf --steps 8 2>&1 | grep -E "GATE|bit-identical|rel-L2"
echo "== bench"
for s in $M /tmp/llama-8b.gguf; do echo "-- $s"; $B bench -m $s --tokens 128 --runs 5 2>&1 | tail -6; done
nvidia-smi --query-gpu=clocks.sm,pstate,temperature.gpu,power.draw --format=csv,noheader
