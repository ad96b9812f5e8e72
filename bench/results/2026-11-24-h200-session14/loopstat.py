#!/usr/bin/env python3
"""loopstat.py SASS.txt NAME_SUBSTR: static opcode histogram of the kernel's KV loop (the loop with
the most MUFU), and the listing from the loop head to its first HGMMA with .tnspB (QK^T issue)."""
import re, sys, collections
text = open(sys.argv[1]).read().split('Function : ')
sub = sys.argv[2]
for f in text[1:]:
    name = f.split('\n', 1)[0]
    if sub not in name: continue
    ins = []
    for l in f.split('\n'):
        m = re.match(r'\s+/\*([0-9a-f]{4,})\*/\s+(.*?);', l)
        if m: ins.append((int(m.group(1), 16), m.group(2).strip()))
    idx = {a: i for i, (a, _) in enumerate(ins)}
    best = None
    for i, (a, t) in enumerate(ins):
        m = re.search(r'BRA\S*\s+(?:`\(\.L_x_\d+\)\s*)?0x([0-9a-f]+)', t) or re.search(r'BRA\S*\s+`\(\.L_x_\d+\)', t)
        mm = re.search(r'0x([0-9a-f]+)', t) if 'BRA' in t else None
        if mm:
            tgt = int(mm.group(1), 16)
            if tgt <= a and tgt in idx:
                body = ins[idx[tgt]:i + 1]
                nm = sum('MUFU' in x[1] for x in body); nh = sum('HGMMA' in x[1] for x in body)
                if nh >= 13 and nm >= 40 and (best is None or len(body) < len(best[1])):
                    best = (nm, body)
    if not best: continue
    body = best[1]
    c = collections.Counter()
    for _, t in body:
        op = t.split()[1] if t.startswith('@') else t.split()[0]
        c[op.split('.')[0]] += 1
    print(f'== {name[:140]}\nloop {len(body)} instructions, ' + ' '.join(f'{k}:{v}' for k, v in c.most_common(30)))
    unif = sum(v for k, v in c.items() if k.startswith('U') or k in ('R2UR', 'S2UR', 'VOTEU'))
    print('uniform-datapath instructions in the loop:', unif)
    if len(sys.argv) > 3:
        for a, t in body: print(f'  {a:05x} {t}')
