// Special-function PTX shared by every softmax (the sm80 and sm90 attention paths, the softmax
// ladder): one place for the SFU exponential they all use, and the functions built on the SFU.
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

// 1/x on the SFU (rcp.approx.ftz.f32): within 1 ulp; 1/inf = 0.
FC_DEVICE float rcp_approx(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// tanh(x) = 1 - 2 / (e^(2x) + 1) from the SFU's exponential and reciprocal: within ~2e-7 absolute
// (the cancellation near 0 costs relative accuracy, not absolute), +-1 for large |x|; a few
// instructions against tanhf's few dozen. (tanh.approx.f32 is faster but only within 2^-11
// relative, which a softcap of 30 turns into 1.5% errors in P.)
FC_DEVICE float tanh_fast(float x) {
  constexpr float kTwoLog2e = 2.0f * 1.4426950408889634f;
  return 1.0f - 2.0f * rcp_approx(exp2_approx(x * kTwoLog2e) + 1.0f);
}

}  // namespace flashcore::ptx
