// Calls that only their operands' placement keeps off the fused paths run on aligned copies.
#pragma once

#include <cuda_runtime.h>

#include "api/paths.hpp"
#include "flashcore/flashcore.hpp"

namespace flashcore::detail {

// A dense or varlen device call (no KV-cache layout) that auto dispatch sent to the naive reference
// because of its operands' layout — a base address or stride that is not a multiple of 16 bytes, or
// a head dim that is not a multiple of 8 — runs on a fused path instead over copies: each operand
// that breaks a rule is copied (in stream order) into a contiguous buffer whose rows hold the head
// dim rounded up to 8 elements, zero-filled past it (zero columns change no score and give O columns
// that are not copied back); o is computed into such a buffer and copied out. The scale stays the
// call's (1/sqrt of its own head dim by default).
enum class Realigned {
  kRan,            // the call ran on a fused path over aligned copies
  kNaiveIsFaster,  // a fused path would take the aligned call, but the call is too small for the
                   // copies to pay: the naive kernel is its fastest way (nothing written yet)
  kNotApplicable,  // no fused path would take the aligned call either (nothing written)
};
Status run_realigned(const AttentionParams& params, const DeviceInfo& info, cudaStream_t stream, Realigned* outcome);

}  // namespace flashcore::detail
