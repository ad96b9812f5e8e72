// The decode path's instantiations (one generated unit each, cmake/KernelList.cmake), as
// launch.cu's table sees them.
#pragma once

#include <cstdint>

#include "common/host_device.hpp"
#include "flashcore/flashcore.hpp"

namespace flashcore::sm80 {

// Where the splits leave their results when num_splits > 1: row (split, query head, token row) of
// o_partial [count][heads_q][token_rows][Dv] (normalized O) and lse_partial (natural-log LSE;
// -inf for a split that saw no key). Token rows: b * seqlen_q + i (dense) or the packed row (varlen).
struct DecodeSplits {
  int count = 1;
  int64_t token_rows = 0;
  float* o_partial = nullptr;
  float* lse_partial = nullptr;

  FC_HOST_DEVICE int64_t row(const AttentionParams& p, int split, int head, int b, int64_t q_start, int i) const {
    const int64_t token_row = p.is_varlen() ? q_start + i : int64_t(b) * p.seqlen_q + i;
    return (int64_t(split) * p.heads_q + head) * token_rows + token_row;
  }
};

// Plans the split count for this device (`device`, its `sm_count` SMs) and runs the call.
template <int kHeadDimQK, int kHeadDimV, typename Element>
Status launch_decode(const AttentionParams& p, int device, int sm_count, bool compact, cudaStream_t stream);

}  // namespace flashcore::sm80
