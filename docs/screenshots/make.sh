#!/usr/bin/env bash
# Remakes the README's trace screenshots (not part of the tests): the same pass of the shipped
# H200 1B recording in speedscope (the JSON export, in Debian's headless chromium) and in the
# dashboard (a replay in tmux, captured with its colours and drawn by chromium).
# Needs: a release build, tmux, aha, chromium and pngquant (apt-get install tmux aha chromium
# pngquant), node.
# Usage: docs/screenshots/make.sh [PATH/TO/baro-top]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"
bin="${1:-$root/target/release/baro-top}"
rec="recordings/h200-llama1b-mega.baro"
pass=108 # the last pass with spans: the one the dashboard's flame chart shows at the end
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"; tmux -L baro-shot kill-server 2>/dev/null || true' EXIT
(cd "$here" && npm ci --no-audit --no-fund --loglevel=error)

"$bin" export "$rec" --passes "$pass" --perfetto "$tmp/pass.json"
node "$here/speedscope.mjs" "$tmp/pass.json" "grid (all workgroups) (tid 3)" "$here/speedscope-grid.png" 0
node "$here/speedscope.mjs" "$tmp/pass.json" "wg 0 (tid 1000)" "$here/speedscope-wg0.png" 3

tmux -f /dev/null -L baro-shot new-session -d -x 160 -y 46 \
  "env TERM=xterm-256color '$bin' replay '$rec' --speed 100; sleep 600"
sleep 8
tmux -L baro-shot capture-pane -e -p -t 0 > "$tmp/dash.ansi"
grep -q "flame · pass $pass" "$tmp/dash.ansi" || { echo "the dashboard does not show pass $pass" >&2; exit 1; }
aha --black --title baro-top < "$tmp/dash.ansi" \
  | sed 's|<body style="color:white; background-color:black">|<body style="color:white; background-color:black; margin:0">|; s|<pre>|<pre style="font-family:DejaVu Sans Mono,monospace; font-size:12px; line-height:1.15; margin:4px">|' \
  > "$tmp/dash.html"
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1160,680 \
  --screenshot="$here/dashboard-pass.png" "file://$tmp/dash.html" 2>/dev/null
# Palette PNGs: a few times smaller, the same picture.
pngquant --force --skip-if-larger --ext .png 64 "$here"/*.png || true
ls -l "$here"/*.png
