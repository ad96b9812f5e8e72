#!/usr/bin/env bash
# Session 4 device run 15: SASS order of the d128 overlap kernel, committed vs cross-tile (+2 Q buffers).
set -u
rm -rf /tmp/vxt && mkdir -p /tmp/vxt && cp -r CMakeLists.txt cmake src include tools tests python /tmp/vxt/ 2>/dev/null
cp .dev/s4/xt_mainloop.cuh /tmp/vxt/src/sm90/mainloop.cuh; cp .dev/s4/xt_kernel.cuh /tmp/vxt/src/sm90/kernel.cuh; cp .dev/s4/xt_kernel_traits.cuh /tmp/vxt/src/sm90/kernel_traits.cuh
cfg() { cmake -S $1 -B $2 -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHCORE_CUDA_ARCHS=90a -DFLASHCORE_BUILD_PYTHON=OFF -DFLASHCORE_BUILD_SM80=OFF \
  -DFLASHCORE_HEAD_DIMS=128 -DFLASHCORE_DTYPES=fp16 -DFLASHCORE_BUILD_TESTS=OFF; }
( cfg . build/s > /dev/null 2>&1 && cmake --build build/s -j8 --target flashcore_static > $OUT/b1.log 2>&1 ) &
( cfg /tmp/vxt /tmp/vxt/b > /dev/null 2>&1 && cmake --build /tmp/vxt/b -j8 --target flashcore_static > $OUT/b2.log 2>&1 ) &
wait
F='ScheduleE1ELi128ELb0ELi1E'
python3 .dev/s4/sass_seq.py build/s/libflashcore.a "$F" > $OUT/sass-base.txt 2>&1
python3 .dev/s4/sass_seq.py /tmp/vxt/b/libflashcore.a "$F" > $OUT/sass-xt.txt 2>&1
wc -c $OUT/sass-*.txt; cat $OUT/sass-base.txt | cut -c1-3000; echo; cat $OUT/sass-xt.txt | cut -c1-4000
