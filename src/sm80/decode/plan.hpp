// The decode path's plan: how many CTAs share one (batch entry, KV head) — the split-KV count — and
// the fp32 partials they leave for the combine kernel. Host-only arithmetic, tested on the CPU
// (tests/cpu/test_decode_plan.cpp).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "flashcore/flashcore.hpp"

namespace flashcore::sm80 {

// Split-KV only pays when a split still streams a few KV blocks (each split costs a partial write
// and a share of the combine), and more splits than this add nothing on any GPU we know.
inline constexpr int kMinBlocksPerSplit = 4;
inline constexpr int kMaxSplits = 128;

struct DecodePlan {
  int row_tiles = 0;    // CTAs along the packed query rows of one (batch entry, KV head)
  int num_splits = 1;   // CTAs along its keys; 1 = no combine, the CTA writes o and lse itself
  int64_t token_rows = 0;       // rows of the partials' token axis: batch * seqlen_q, or total_q
  size_t workspace_bytes = 0;   // fp32 partial O and LSE of every split (0 when num_splits == 1)
};

// block_m / block_n: the tile's packed query rows and keys; resident_ctas: CTAs of this kernel the
// whole GPU holds at once (SMs x CTAs per SM). Without an explicit num_splits, the units of work
// (batch x KV heads x row tiles) are split until they fill one wave of resident CTAs: a wave, not
// more, because every split of a memory-bound unit takes the same time, so a partial second wave
// would idle most SMs. kernel_dv: the kernel's Dv, the partials' row length (a padded call's head_dim_v
// is smaller; 0: the call's own).
inline DecodePlan plan_decode(const AttentionParams& p, int block_m, int block_n, int resident_ctas, int kernel_dv = 0) {
  DecodePlan plan;
  const int group = p.heads_q / p.heads_kv;
  const int64_t rows = int64_t(p.seqlen_q) * group;
  plan.row_tiles = int(std::max<int64_t>(1, (rows + block_m - 1) / block_m));
  plan.token_rows = p.is_varlen() ? p.total_q : int64_t(p.batch) * p.seqlen_q;
  const int key_blocks = std::max(1, (p.seqlen_k + block_n - 1) / block_n);
  const int64_t units = int64_t(p.batch) * p.heads_kv * plan.row_tiles;
  int splits = 1;
  if (p.num_splits > 0) {
    splits = std::min({p.num_splits, key_blocks, kMaxSplits});
  } else if (units < resident_ctas) {
    splits = int(std::min<int64_t>(resident_ctas / std::max<int64_t>(units, 1), kMaxSplits));
    splits = std::max(1, std::min(splits, key_blocks / kMinBlocksPerSplit));
  }
  plan.num_splits = splits;
  if (splits > 1) {
    const size_t partial_rows = size_t(splits) * size_t(p.heads_q) * size_t(plan.token_rows);
    plan.workspace_bytes = partial_rows * (size_t(kernel_dv > 0 ? kernel_dv : p.head_dim_v) + 1) * sizeof(float);
  }
  return plan;
}

}  // namespace flashcore::sm80
