#!/usr/bin/env bash
# The test command (README): installs what the tests need on a fresh Debian machine
# (the lavapipe Vulkan CPU device; prometheus and promtool for the metrics tests; node with
# npm speedscope and Python with PyPI perfetto for the trace importer tests), then runs
# formatting, lints and every test.
# In CI (CI=true) a missing Vulkan device or importer is a failure, never a skip.
set -euo pipefail
cd "$(dirname "$0")/.."

need_pkgs=()
command -v tmux >/dev/null || need_pkgs+=(tmux) # the end-to-end dashboard tests (app/tests/e2e_tmux.rs)
# spirv-val: every embedded decode module is validated for Vulkan 1.2 (engine's spirv_tests).
command -v spirv-val >/dev/null || need_pkgs+=(spirv-tools)
[ -e /usr/share/vulkan/icd.d/lvp_icd.x86_64.json ] || [ -e /usr/share/vulkan/icd.d/lvp_icd.aarch64.json ] || need_pkgs+=(mesa-vulkan-drivers)
ldconfig -p 2>/dev/null | grep -q 'libvulkan.so.1' || need_pkgs+=(libvulkan1)
# prometheus + promtool: the metrics tests scrape `baro-top serve` with a real Prometheus and
# lint the exposition with `promtool check metrics` (app/tests/metrics_prometheus.rs).
{ command -v prometheus >/dev/null && command -v promtool >/dev/null; } || need_pkgs+=(prometheus)
# node + npm and python3 with venv: the trace importer tests (telemetry/tests/it/trace_importers.rs)
# read every export back with speedscope's own importer and Perfetto's own Python protos.
command -v node >/dev/null || need_pkgs+=(nodejs)
command -v npm >/dev/null || need_pkgs+=(npm)
command -v python3 >/dev/null || need_pkgs+=(python3)
python3 -c 'import ensurepip, venv' 2>/dev/null || need_pkgs+=(python3-venv)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  echo "installing ${need_pkgs[*]} (lavapipe, the Vulkan CPU device the tests run on; prometheus for the metrics tests; tmux for the terminal tests; spirv-tools for the SPIR-V validation; node, npm, python3-venv for the trace importer tests)"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_pkgs[@]}"
fi

# The trace importers, pinned: npm speedscope (package-lock.json) and PyPI perfetto + protobuf
# (requirements.txt), installed beside the tests that use them.
importers=telemetry/tests/importers
(cd "$importers" && npm ci --no-audit --no-fund --loglevel=error)
[ -x "$importers/.venv/bin/python" ] || python3 -m venv "$importers/.venv"
"$importers/.venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$importers/requirements.txt"

# The Vulkan tests run on lavapipe with a known co-residency: LP_NUM_THREADS workgroups.
export LP_NUM_THREADS=${LP_NUM_THREADS:-2}
export RUST_BACKTRACE=1

cargo fmt --all -- --check
# --release: the same profile as the build and the tests, so glslang's C++ (the engine's shader
# compiler, most of a cold build) is built once, not a second time for a debug-profile clippy.
cargo clippy --release --workspace --all-targets -- -D warnings
# bench/results.jsonl and the tables bench/compare.py prints from it (the README's speed table)
python3 bench/test_compare.py
# bench/stage_summary.py's mode rule: a mixed window's stage rows read one mode's passes
python3 bench/stage_summary.py --test
# every crate's module graph is acyclic (scripts/modgraph.py)
python3 scripts/test_modgraph.py
cargo test --workspace --release
