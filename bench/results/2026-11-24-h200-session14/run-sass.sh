#!/bin/bash
# Session 14, device calls 2-4: SASS of wgmma-descriptor variants of the d128 fp16 unit, compiled on the
# development machine (nvcc -cubin; variants of issue_qk selected by an FC_DESC_VARIANT macro, not kept:
# split-descriptors.patch is the form that was A/B-tested) and carried as
# v*.cubin next to this script; prints loopstat.py's static histogram of each long kernel's KV loop.
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
for c in v*.cubin; do
  v=${c%.cubin}
  cuobjdump -sass $c > $OUT/$v.sass 2>&1
  echo "######## $v"
  python3 loopstat.py $OUT/$v.sass 'ScheduleE1ELi80ELb0ELi2ELb1ELNS0_9TileShapeE1' | sed -n 2,3p
  python3 loopstat.py $OUT/$v.sass 'ScheduleE1ELi80ELb0ELi1ELb0ELNS0_9TileShapeE1' | sed -n 2,3p
  python3 loopstat.py $OUT/$v.sass 'ScheduleE1ELi128ELb0ELi1ELb0ELNS0_9TileShapeE0' | sed -n 2,3p
done
cd $OUT && tar czf sass.tgz v*.sass && rm v*.sass
