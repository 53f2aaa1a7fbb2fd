# Sourced by every bench/h200_*.sh: makes the NVIDIA Vulkan driver visible on the device
# machine (loader + libglvnd from the carried .gl/ debs) and names the carried binary.
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
B=.bin/baro-top
O=${OUT:-/tmp/out}
mkdir -p "$O"
