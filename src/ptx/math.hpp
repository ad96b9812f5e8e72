// Special-function PTX shared by every softmax (the sm80 and sm90 attention paths, the softmax
// ladder): one place for the SFU exponential they all use.
#pragma once

#include "common/host_device.hpp"

namespace flashcore::ptx {

// 2^x on the SFU (ex2.approx.ftz.f32): within 2 ulp, 2^-inf = +0, NaN stays NaN, subnormal results
// flush to 0. Callers fold log2(e) (and the softmax scale) into x.
FC_DEVICE float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace flashcore::ptx
