#!/usr/bin/env bash
# The test command (README): installs what the tests need on a fresh Debian machine
# (the lavapipe Vulkan CPU device; prometheus and promtool for the metrics tests), then runs
# formatting, lints and every test.
# In CI (CI=true) a missing Vulkan device is a failure, never a skip.
set -euo pipefail
cd "$(dirname "$0")/.."

need_pkgs=()
command -v tmux >/dev/null || need_pkgs+=(tmux) # the end-to-end dashboard tests (app/tests/e2e_tmux.rs)
[ -e /usr/share/vulkan/icd.d/lvp_icd.x86_64.json ] || [ -e /usr/share/vulkan/icd.d/lvp_icd.aarch64.json ] || need_pkgs+=(mesa-vulkan-drivers)
ldconfig -p 2>/dev/null | grep -q 'libvulkan.so.1' || need_pkgs+=(libvulkan1)
# prometheus + promtool: the metrics tests scrape `baro-top serve` with a real Prometheus and
# lint the exposition with `promtool check metrics` (app/tests/metrics_prometheus.rs).
{ command -v prometheus >/dev/null && command -v promtool >/dev/null; } || need_pkgs+=(prometheus)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  echo "installing ${need_pkgs[*]} (lavapipe, the Vulkan CPU device the tests run on; prometheus for the metrics tests; tmux for the terminal tests)"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_pkgs[@]}"
fi

# The Vulkan tests run on lavapipe with a known co-residency: LP_NUM_THREADS workgroups.
export LP_NUM_THREADS=${LP_NUM_THREADS:-2}
export RUST_BACKTRACE=1

cargo fmt --all -- --check
# --release: the same profile as the build and the tests, so glslang's C++ (the engine's shader
# compiler, most of a cold build) is built once, not a second time for a debug-profile clippy.
cargo clippy --release --workspace --all-targets -- -D warnings
cargo test --workspace --release
