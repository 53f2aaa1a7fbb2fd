#!/usr/bin/env python3
"""Read the compiled binaries in a Vulkan pipeline cache (`baro-top run --pipeline-cache-out`).

    sass.py CACHE [--out DIR] [--label NAME] [--nvdisasm PATH] [--arch SM90] [--loops]

Prints the cache header (header length, version, vendor and device IDs, the cache UUID) and
the compiled code inside the blob: ELF images where a driver stores those, else NVIDIA's
format as driver 580.159.04 writes it (each pipeline a zstd frame holding an "NVDANVVMNVuc"
container: NVVM IR and the raw SASS microcode, disassembled with `nvdisasm -b ARCH`; needs
the `zstandard` module or the `zstd` command). A blob with neither is said, not hidden.
The CUDA toolkit is not needed on the GPU machine: bring the blob back and run this where
`pip download nvidia-cuda-nvdisasm` (unzipped) provides nvdisasm. With the CUDA toolkit's
`nvdisasm` (else `cuobjdump -sass`) on PATH or under /usr/local/cuda*/bin each image is
disassembled: the instruction
count, the opcode histogram (top 30), the memory and barrier instructions by kind, and
whether the driver enforced warp reconvergence (WARPSYNC/MATCH.ANY checks; rounds/39.md) — the
instruction-level view the driver's pipeline statistics do not give. `--loops` lists every
loop with global loads in it (shortest first): its addresses, body length and opcode mix
(the Q4_0 dot's loop has two LDG.E.128.CONSTANT: 354 instructions on main). Every image
also gets the count of its dot loops (innermost, at most 300 instructions, a 128-bit load in
them) where a load must wait for an earlier load of the same iteration to land (its
destination or address register is that load's destination): the serial order rounds 39 and
61-63 found behind a module's 15-17 % swings at 1b q8 — a build worth timing shows 0 there.
With `--out DIR`
each image and its disassembly are written there as NAME.N.code (or .cubin) / NAME.N.sass.

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


def zstd_frames(blob):
    """Every zstd frame in the blob, decompressed (NVIDIA's cache entries are zstd frames)."""
    out = []
    at = 0
    while True:
        i = blob.find(b"\x28\xb5\x2f\xfd", at)
        if i < 0:
            return out
        at = i + 4
        data = None
        try:
            import zstandard
            data = zstandard.ZstdDecompressor().decompressobj().decompress(blob[i:])
        except ImportError:
            zstd = shutil.which("zstd")
            if zstd:
                r = subprocess.run([zstd, "-dc"], input=blob[i:], capture_output=True)
                data = r.stdout or None
            else:
                raise SystemExit("a zstd frame, but neither the zstandard module nor the zstd "
                                 "command is here (pip install zstandard)")
        except Exception:
            data = None
        if data:
            out.append((i, data))


def nvuc_code(data):
    """The microcode of an 'NVDANVVMNVuc' container (layout read from driver 580.159.04's
    caches: code size at byte 0x4c, code offset at byte 0x50, counted from byte 8)."""
    if not data.startswith(b"NVDANVVMNVuc") or len(data) < 0x54:
        return None
    size, off = struct.unpack_from("<II", data, 0x4C)
    start = 8 + off
    if size == 0 or size % 16 or start + size > len(data):
        return None
    return data[start:start + size]


def find_tool(name):
    found = [shutil.which(name)] + sorted(glob.glob(f"/usr/local/cuda*/bin/{name}")) + sorted(
        glob.glob(f"/usr/local/lib/python3*/*-packages/nvidia/cu*/bin/{name}"))
    return next((p for p in found if p), None)


INSN = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)([^;]*);")


def instructions(sass):
    """(address, opcode with modifiers, whole text without the guard) of every instruction."""
    return [(int(m.group(1), 16), m.group(3), m.group(3) + m.group(4))
            for m in map(INSN.search, sass.splitlines()) if m]


def summarise(sass, label):
    ops = collections.Counter(op for _, op, _ in instructions(sass))
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
    # Rounds 38-40 (bench/rounds/39.md): the driver compiled the same source either without
    # enforced warp reconvergence (the fast matvec: every dot loop's loads in flight at once)
    # or with it (WARPSYNC/MATCH.ANY checks before the subgroup operations, and the dot
    # loops' scale loads serialised): ≈ 16 % of a 1b q8 token. A build worth timing shows 0.
    conv = {k: base.get(k, 0) for k in ("WARPSYNC", "MATCH", "BRA", "BMOV")}
    conv["BRA.CONV"] = sum(n for o, n in ops.items() if o.startswith("BRA.CONV"))
    del conv["BRA"]
    mode = "enforced" if conv["WARPSYNC"] or conv["MATCH"] else "none"
    print("  warp reconvergence checks: %s (%s)" % (mode, ", ".join(f"{k} {v}" for k, v in conv.items())))
    checked, bad = waiting_loads(sass)
    where = ": " + ", ".join(f"{a:#x}..{e:#x}" for a, e in bad) if bad else ""
    print(f"  dot loops with a load waiting on an earlier load's registers: {len(bad)} of {checked}{where}")


def load_bytes(op):
    """Bytes a lane's global load `op` (LDG.E[.64|.128|.U8|...]) brings in."""
    for width, n in ((".128", 16), (".64", 8), (".U16", 2), (".S16", 2), (".U8", 1), (".S8", 1)):
        if width in op:
            return n
    return 4


def loops(sass, smallest=64):
    """Loops (a backward branch to an address in the listing) of at least `smallest`
    instructions, shortest first: start and end address, instructions in the body, its
    global loads, its opcode mix, and the bytes its global loads bring a lane a trip (round
    73: a dot loop's rate follows them — the one-row IQ4 loop held 24, the Q4_K one 48)."""
    ins = instructions(sass)
    at = {a: i for i, (a, _, _) in enumerate(ins)}
    found = []
    for i, (a, op, text) in enumerate(ins):
        m = re.search(r"0x([0-9a-f]+)", text) if op.startswith("BRA") else None
        target = int(m.group(1), 16) if m else None
        if target is None or target >= a or target not in at:
            continue
        body = ins[at[target]:i + 1]
        if len(body) < smallest:
            continue
        mix = collections.Counter(o.split(".")[0] for _, o, _ in body)
        ldg = sum(1 for _, o, _ in body if o.startswith("LDG"))
        nbytes = sum(load_bytes(o) for _, o, _ in body if o.startswith("LDG"))
        found.append((body[0][0], a, len(body), ldg, mix, nbytes))
    return sorted(found, key=lambda f: f[2])


LOAD = re.compile(r"LDG\.E(\.128|\.64)?\S*\s+R(\d+),\s*\[R(\d+)")


def waiting_loads(sass, longest=300):
    """Rounds 39 and 61-63: innermost loops (at most `longest` instructions, a 128-bit global
    load in them: the dot products' loops) where a global load's destination or address register
    is the destination of an earlier load of the same body. That load cannot issue before
    the earlier one has landed and been consumed: two or three round trips an iteration where
    one was meant (the allocator put a scale word inside the quants' registers). Returns
    (loops checked, [(start, end) of the loops with such a load])."""
    ins = instructions(sass)
    at = {a: i for i, (a, _, _) in enumerate(ins)}
    checked, bad = 0, []
    found = loops(sass, smallest=8)
    for start, end, n, ldg, *_ in found:
        body = ins[at[start]:at[end] + 1]
        if n > longest or not any(o.startswith("LDG.E.128") for _, o, _ in body):
            continue
        # Innermost loops only: an enclosing unit loop's own loads (its records) are not
        # the dot's iteration.
        if any(start <= s2 and e2 <= end and (s2, e2) != (start, end) for s2, e2, *_ in found):
            continue
        checked += 1
        pending = set()
        for _, op, text in body:
            m = LOAD.search(text) if op.startswith("LDG") else None
            if not m:
                continue
            width = {".128": 4, ".64": 2}.get(m.group(1) or "", 1)
            dest = set(range(int(m.group(2)), int(m.group(2)) + width))
            if dest & pending or int(m.group(3)) in pending:
                bad.append((start, end))
                break
            pending |= dest
    return checked, bad


def print_loops(sass, label):
    for start, end, n, ldg, mix, nbytes in loops(sass):
        if ldg:
            top = ", ".join(f"{o} {c}" for o, c in mix.most_common(10))
            print(f"  {label} loop {start:#x}..{end:#x}: {n} instructions, {ldg} global loads"
                  f" ({nbytes} bytes a lane a trip): {top}")


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    path, out, label = args[0], None, os.path.basename(args[0])
    nvdisasm, arch = None, "SM90"
    if "--out" in args:
        out = args[args.index("--out") + 1]
    if "--label" in args:
        label = args[args.index("--label") + 1]
    if "--nvdisasm" in args:
        nvdisasm = args[args.index("--nvdisasm") + 1]
    if "--arch" in args:
        arch = args[args.index("--arch") + 1]
    blob = open(path, "rb").read()
    try:
        length, version, vendor, device, uuid = header(blob)
    except ValueError as e:
        print(f"{path}: {e}", file=sys.stderr)
        return 2
    print(f"{label}: {len(blob)} bytes; header length {length}, version {version}, "
          f"vendor {vendor:#x}, device {device:#x}, cache UUID {uuid}")
    images = [(off, img, None) for off, img in elf_images(blob)]
    if not images:
        for off, data in zstd_frames(blob):
            code = nvuc_code(data)
            if code is not None:
                images.append((off, code, arch))
    if not images:
        print(f"{label}: no ELF image and no NVIDIA microcode container in the cache")
        return 1
    nvd = nvdisasm or find_tool("nvdisasm")
    cuo = find_tool("cuobjdump")
    if out:
        os.makedirs(out, exist_ok=True)
    for n, (off, img, raw) in enumerate(images):
        kind = f"raw {raw} microcode" if raw else "ELF"
        print(f"  image {n}: {len(img)} bytes of {kind} (blob offset {off:#x})")
        cubin = os.path.join(out or "/tmp", f"{label}.{n}.{'code' if raw else 'cubin'}")
        with open(cubin, "wb") as f:
            f.write(img)
        if raw:
            tools = [[nvd, "-b", raw]] if nvd else []
        else:
            tools = ([[nvd, "-c"]] if nvd else []) + ([[cuo, "-sass"]] if cuo else [])
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
        if "--loops" in args:
            print_loops(r.stdout, f"{label} image {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
