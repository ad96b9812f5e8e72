#!/usr/bin/env python3
"""Fingerprints every GPU kernel's machine code, to show that a change left kernels unchanged.

Recompiles each CUDA translation unit of a configured build (its compile_commands.json) to one
cubin per architecture it targets, and hashes each kernel's .text section. Two fingerprints (JSON)
compare kernel by kernel, by mangled name, whatever translation unit a kernel now lives in.

  scripts/kernel-fingerprint.py build/ci -o before.json [--filter src/sm90] [-j 2]
  scripts/kernel-fingerprint.py --compare before.json after.json
"""
import argparse, concurrent.futures, hashlib, json, os, re, shlex, struct, subprocess, sys, tempfile


def elf_sections(data):
    """(name, bytes) of every section of a 64-bit little-endian ELF image."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    strtab = headers[shstrndx]
    names = data[strtab[4]:strtab[4] + strtab[5]]
    for h in headers:
        name = names[h[0]:names.index(b"\0", h[0])].decode()
        yield name, (data[h[4]:h[4] + h[5]] if h[1] != 8 else b"")  # SHT_NOBITS has no bytes


def cubin_commands(entry):
    args = shlex.split(entry["command"]) if "command" in entry else list(entry["arguments"])
    archs, rest, skip = [], [], False
    for a in args:
        if skip:
            skip = False
        elif a in ("-o", "-x", "-MF", "-MT"):
            skip = True  # and its value
        elif a.startswith("-gencode=") or a.startswith("--generate-code="):
            archs.append(re.search(r"code=sm_(\w+)", a).group(1))
        elif a not in ("-c", "-MD", "-MMD", entry["file"]):
            rest.append(a)
    return archs, rest


def fingerprint_unit(entry, tmp):
    archs, base = cubin_commands(entry)
    out = {}
    for arch in archs:
        cubin = os.path.join(tmp, hashlib.sha1((entry["file"] + arch).encode()).hexdigest() + ".cubin")
        cmd = base + ["-cubin", f"-arch=sm_{arch}", "-o", cubin, entry["file"]]
        subprocess.run(cmd, cwd=entry["directory"], check=True, stdout=subprocess.DEVNULL)
        with open(cubin, "rb") as f:
            for name, body in elf_sections(f.read()):
                if name.startswith(".text."):
                    out[f"sm_{arch}:{name[6:]}"] = hashlib.sha256(body).hexdigest()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?")
    ap.add_argument("-o", "--output")
    ap.add_argument("--filter", action="append", default=[], help="only units whose path contains this")
    ap.add_argument("-j", type=int, default=os.cpu_count())
    ap.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    a = ap.parse_args()
    if a.compare:
        before, after = (json.load(open(p)) for p in a.compare)
        same = sum(1 for k in before if after.get(k) == before[k])
        changed = sorted(k for k in before if k in after and after[k] != before[k])
        gone = sorted(set(before) - set(after))
        new = sorted(set(after) - set(before))
        for label, keys in (("changed", changed), ("only before", gone), ("only after", new)):
            for k in keys:
                print(f"{label}: {k}")
        print(f"{same} kernels identical, {len(changed)} changed, {len(gone)} only before, {len(new)} only after")
        return 1 if changed or gone or new else 0
    entries = [e for e in json.load(open(os.path.join(a.build, "compile_commands.json")))
               if e["file"].endswith(".cu") and all(f in e["file"] for f in a.filter)]
    result = {}
    with tempfile.TemporaryDirectory() as tmp, concurrent.futures.ThreadPoolExecutor(a.j) as pool:
        for part in pool.map(lambda e: fingerprint_unit(e, tmp), entries):
            result.update(part)
    text = json.dumps(dict(sorted(result.items())), indent=1)
    if a.output:
        open(a.output, "w").write(text + "\n")
    else:
        print(text)
    print(f"{len(result)} kernels from {len(entries)} units", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
