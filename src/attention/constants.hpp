// Constants of the attention math.
#pragma once

namespace flashcore::attn {

inline constexpr float kLog2e = 1.4426950408889634f;  // log2(e): exp(x) == exp2(x * kLog2e)
inline constexpr float kLn2 = 0.6931471805599453f;    // ln(2):   log(x) == log2(x) * kLn2

}  // namespace flashcore::attn
