// What dispatch does when a call left to kAuto lands on the naive GPU reference (flashcore.hpp,
// SlowPathPolicy).
#pragma once

#include <string>

#include "flashcore/flashcore.hpp"

namespace flashcore::detail {

// Applies the slow-path policy to `operation` ("attention_forward", ...), whose fused paths refused
// for `reasons` (one "\n  <path>: <reason>" line each): Ok to run the naive kernel (after warning,
// once per distinct reasons, under kWarn), or Unsupported under kError.
Status slow_path_notice(const char* operation, const std::string& reasons);

}  // namespace flashcore::detail
