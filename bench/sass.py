#!/usr/bin/env python3
"""Read the compiled binaries in a Vulkan pipeline cache (`baro-top run --pipeline-cache-out`).

    sass.py CACHE [--out DIR] [--label NAME]

Prints the cache header (header length, version, vendor and device IDs, the cache UUID) and
every ELF image inside the blob (NVIDIA's driver keeps its compiled shaders as CUDA-style ELF
"cubins"; other drivers' blobs hold none, which is said, not hidden). With the CUDA toolkit's
`nvdisasm` (else `cuobjdump -sass`) on PATH or under /usr/local/cuda*/bin each image is
disassembled: the instruction
count, the opcode histogram (top 30), and the memory and barrier instructions by kind — the
instruction-level view the driver's pipeline statistics do not give. With `--out DIR` each
image and its disassembly are written there as NAME.N.cubin / NAME.N.sass.

Exit 0 when at least one image was found and disassembled (or, without nvdisasm, found), 1
when the blob holds no ELF image, 2 for a file that is not a pipeline cache.
"""
import collections
import glob
import os
import re
import shutil
import struct
import subprocess
import sys


def header(blob):
    if len(blob) < 32:
        raise ValueError(f"{len(blob)} bytes: shorter than a pipeline cache header (32)")
    length, version, vendor, device = struct.unpack_from("<4I", blob, 0)
    if length < 32 or length > len(blob) or version != 1:
        raise ValueError(f"header length {length}, version {version}: not a Vulkan pipeline cache")
    return length, version, vendor, device, blob[16:32].hex()


def elf_images(blob):
    """(offset, bytes) of every 64-bit little-endian ELF image in the blob."""
    out = []
    at = 0
    while True:
        i = blob.find(b"\x7fELF", at)
        if i < 0:
            return out
        at = i + 4
        if i + 64 > len(blob) or blob[i + 4] != 2 or blob[i + 5] != 1:
            continue
        shoff, = struct.unpack_from("<Q", blob, i + 0x28)
        shentsize, shnum = struct.unpack_from("<HH", blob, i + 0x3A)
        phoff, = struct.unpack_from("<Q", blob, i + 0x20)
        phentsize, phnum = struct.unpack_from("<HH", blob, i + 0x36)
        end = max(shoff + shentsize * shnum, phoff + phentsize * phnum)
        if shentsize == 0 or end <= 64 or i + end > len(blob):
            continue
        out.append((i, blob[i:i + end]))
        at = i + end


def find_tool(name):
    found = [shutil.which(name)] + sorted(glob.glob(f"/usr/local/cuda*/bin/{name}")) + sorted(
        glob.glob(f"/usr/local/lib/python3*/*-packages/nvidia/cu*/bin/{name}"))
    return next((p for p in found if p), None)


INSN = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")


def summarise(sass, label):
    ops = collections.Counter()
    for line in sass.splitlines():
        m = INSN.search(line)
        if m:
            ops[m.group(2)] += 1
    total = sum(ops.values())
    base = collections.Counter()
    for op, n in ops.items():
        base[op.split(".")[0]] += n
    print(f"  {label}: {total} instructions")
    print("  top opcodes: " + ", ".join(f"{o} {n}" for o, n in base.most_common(30)))
    groups = {
        "global loads": ("LDG",), "global stores": ("STG",), "shared loads": ("LDS",),
        "shared stores": ("STS",), "local (spill) loads": ("LDL",),
        "local (spill) stores": ("STL",), "barriers": ("BAR",), "atomics": ("ATOM", "ATOMG", "RED"),
        "constant loads": ("LDC", "ULDC"), "shuffles": ("SHFL",), "FFMA": ("FFMA",),
    }
    for name, pre in groups.items():
        kinds = {o: n for o, n in ops.items() if o.split(".")[0] in pre}
        if kinds:
            detail = ", ".join(f"{o} {n}" for o, n in sorted(kinds.items(), key=lambda x: -x[1]))
            print(f"  {name}: {sum(kinds.values())} ({detail})")


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    path, out, label = args[0], None, os.path.basename(args[0])
    if "--out" in args:
        out = args[args.index("--out") + 1]
    if "--label" in args:
        label = args[args.index("--label") + 1]
    blob = open(path, "rb").read()
    try:
        length, version, vendor, device, uuid = header(blob)
    except ValueError as e:
        print(f"{path}: {e}", file=sys.stderr)
        return 2
    print(f"{label}: {len(blob)} bytes; header length {length}, version {version}, "
          f"vendor {vendor:#x}, device {device:#x}, cache UUID {uuid}")
    images = elf_images(blob)
    if not images:
        print(f"{label}: no ELF image in the cache (this driver keeps its binaries another way)")
        return 1
    tools = [[t, "-c"] for t in [find_tool("nvdisasm")] if t]
    tools += [[t, "-sass"] for t in [find_tool("cuobjdump")] if t]
    if out:
        os.makedirs(out, exist_ok=True)
    for n, (off, img) in enumerate(images):
        print(f"  image {n}: {len(img)} bytes at offset {off:#x}")
        cubin = os.path.join(out or "/tmp", f"{label}.{n}.cubin")
        with open(cubin, "wb") as f:
            f.write(img)
        if not tools:
            print("  (neither nvdisasm nor cuobjdump found: not disassembled)")
            continue
        r = None
        for tool in tools:
            r = subprocess.run(tool + [cubin], capture_output=True, text=True)
            if r.returncode == 0 and INSN.search(r.stdout):
                break
            print(f"  {os.path.basename(tool[0])} failed: {(r.stderr or r.stdout).strip()[:300]}")
            r = None
        if r is None:
            continue
        if out:
            with open(os.path.join(out, f"{label}.{n}.sass"), "w") as f:
                f.write(r.stdout)
        summarise(r.stdout, f"{label} image {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
