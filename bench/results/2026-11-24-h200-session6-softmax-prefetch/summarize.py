"""Off/on summary of flashcore-softmax-bench logs: per (shape, dtype, variant) the us of every round, and % of the 1 GiB copy."""
import glob, re, sys, collections
d = sys.argv[1]
rows = collections.defaultdict(lambda: collections.defaultdict(list))
for f in sorted(glob.glob(f"{d}/o*-*.log")):
    v = f.split('/')[-1].split('-')[0]
    for line in open(f):
        m = re.match(r"(\d+x\d+)\s+(\w+)\s+(.+?)\s+([\d.]+) us\s+([\d.]+) GB/s\s+([\d.]+)% of copy", line)
        if m:
            rows[(m[1], m[2], m[3].strip())][v].append((float(m[4]), float(m[6])))
print(f"{'shape':11} {'dtype':5} {'variant':22} {'off us':>20} {'on us':>20} {'off %':>16} {'on %':>16}")
for k, r in rows.items():
    f = lambda v, i: "/".join(f"{x[i]:.2f}" if i == 0 else f"{x[i]:.1f}" for x in r.get(v, []))
    print(f"{k[0]:11} {k[1]:5} {k[2][:22]:22} {f('off',0):>20} {f('on',0):>20} {f('off',1):>16} {f('on',1):>16}")
