# Sourced by every bench/h200_*.sh: makes the NVIDIA Vulkan driver visible on the device
# machine (loader + libglvnd from the carried .gl/ debs) and names the carried binary.
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
B=.bin/baro-top
O=${OUT:-/tmp/out}
mkdir -p "$O"
# Refuse to measure anything but the H200 (a missing ICD silently falls back to a CPU device).
if ! $B devices 2>&1 | grep -q "H200"; then
  echo "NOT THE H200: the Vulkan loader sees:"; $B devices 2>&1 | head -5
  exit 3
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,pstate --format=csv,noheader 2>/dev/null
