import re, sys, subprocess
# usage: sass_seq.py lib.a name_filter
lib, filt = sys.argv[1], sys.argv[2]
out = subprocess.run(["cuobjdump", "-sass", lib], capture_output=True, text=True).stdout
funcs = re.split(r"\n\s*Function : ", out)
for f in funcs[1:]:
    name = f.split("\n", 1)[0].strip()
    if not re.search(filt, name):
        continue
    print("== " + name[:160])
    seq = []
    for line in f.split("\n"):
        m = re.match(r"\s*/\*[0-9a-f]+\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", line)
        if not m:
            continue
        op = m.group(2)
        key = None
        for k in ("HGMMA", "MUFU", "WARPGROUP.DEPBAR", "WARPGROUP.ARRIVE", "BAR.SYNC", "BAR.ARV", "SYNCS", "STS", "UTMASTG", "UTMALDG", "STG", "BRA", "FMNMX", "SHFL", "F2FP", "EXIT", "VOTE"):
            if op.startswith(k):
                key = op if k in ("BAR.SYNC", "BAR.ARV", "WARPGROUP.DEPBAR", "SYNCS") else k
                if k == "WARPGROUP.DEPBAR":
                    dm = re.search(r"0x[0-9a-f]+", line.split(op, 1)[1])
                    key = "DEPBAR " + (dm.group(0) if dm else "")
                break
        if key is None:
            continue
        if seq and seq[-1][0] == key:
            seq[-1][1] += 1
        else:
            seq.append([key, 1])
    print(" ".join(f"{k}x{n}" if n > 1 else k for k, n in seq))
