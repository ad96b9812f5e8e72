#!/usr/bin/env python3
"""Aggregate `ncu --page source --csv --print-source sass` per opcode, and list the hot loop.

  python3 tools/bench/sass_profile.py SOURCE.csv [DIV]

Prints: the CSV's columns; per opcode, warp-level executions and warp-stall samples (share of all);
then every instruction executed at least 1/DIV as often as the most executed one (default 4), in
address order, with its executions, samples and the stall reasons that dominate its samples."""
import collections, csv, re, sys

rows = list(csv.reader(open(sys.argv[1], newline="")))
# the header is the first row that names an address and a source column
h = next(i for i, r in enumerate(rows) if any("Address" in c for c in r) and any("Source" in c for c in r))
head, body = rows[h], rows[h + 1:]
print("columns:", head)
col = {name: i for i, name in enumerate(head)}
def find(*keys, exclude=()):
    for name, i in col.items():
        if all(k.lower() in name.lower() for k in keys) and not any(x.lower() in name.lower() for x in exclude):
            return i
    return None
c_src = find("Source")
c_exec = find("Instructions Executed", exclude=("Predicated",)) or find("Executed")
c_samp = find("Warp Stall Sampling (All", exclude=("Not",)) or find("Sampling")
stall_cols = [(n, i) for n, i in col.items() if n.lower().startswith("stall_") or n.startswith("smsp__pcsamp")]
def num(s):
    try:
        return float(s.replace(",", ""))
    except Exception:
        return 0.0
insts = []
for r in body:
    if len(r) < len(head):
        continue
    text = r[c_src].strip()
    m = re.match(r"(@!?U?P\w+\s+)?([A-Z0-9_]+)(\.[A-Z0-9_.]+)?", text)
    op = m.group(2) if m else text.split(" ")[0]
    insts.append((r[col.get("Address", 0)], text, op, num(r[c_exec]) if c_exec is not None else 0,
                  num(r[c_samp]) if c_samp is not None else 0, {n: num(r[i]) for n, i in stall_cols}))
tot_e = sum(i[3] for i in insts) or 1
tot_s = sum(i[4] for i in insts) or 1
by = collections.defaultdict(lambda: [0.0, 0.0])
for _, _, op, e, s, _ in insts:
    by[op][0] += e
    by[op][1] += s
print(f"\ntotal warp-level executions {tot_e:.4g}, stall samples {tot_s:.4g}")
print(f"{'opcode':12s} {'executed':>12s} {'%exec':>6s} {'%samples':>8s}")
for op, (e, s) in sorted(by.items(), key=lambda kv: -kv[1][0])[:40]:
    print(f"{op:12s} {e:12.4g} {100 * e / tot_e:6.2f} {100 * s / tot_s:8.2f}")
peak = max(i[3] for i in insts)
div = float(sys.argv[2]) if len(sys.argv) > 2 else 4.0
print(f"\nhot instructions (executed >= peak/{div:g} = {peak / div:.4g}), address order:")
for addr, text, op, e, s, st in insts:
    if e >= peak / div:
        top = sorted(((v, n) for n, v in st.items() if v > 0), reverse=True)[:2]
        why = ", ".join(f"{n.replace('stall_', '').replace('smsp__pcsamp_warps_issue_stalled_', '')} {v:.0f}" for v, n in top)
        print(f"{addr:>8s} {e:10.4g} {s:7.0f}  {text[:110]:110s} {why}")
