// The sm90 forward's host decisions as pure functions, tested on the CPU (tests/cpu/test_sm90_plan.cpp):
//   choose_forward_kernel: params + overrides -> which compiled kernel runs the call (tile shape,
//                          schedule, kBlockN, all keys visible, cluster, varlen);
//   plan_forward:          that kernel + params + device facts + overrides -> the launch (query
//                          blocks, head groups, tile pairing, persistent grid, stream-K tail,
//                          workspace bytes).
// The launcher (launch_kernel.cuh) only encodes tensor maps, allocates the workspace and launches.
// Every rule's measured reason: docs/design/sm90.md.
#pragma once

#include <cstddef>
#include <string>

#include "attention/mask.hpp"
#include "attention/stream_k.hpp"
#include "flashcore/flashcore.hpp"
#include "sm90/fwd/tile_config.hpp"

namespace flashcore::sm90 {

// One tile configuration of tile_config.hpp as values (TileConfig<Dqk, Dv, shape>).
struct TileFacts {
  bool found = false;  // false: the kernel list declares no such (Dqk, Dv) for sm90
  int consumer_warpgroups = 0;
  int block_n = 0, dense_block_n = 0, varlen_block_n = 0, alt_block_n = 0;
  Schedule schedule = Schedule::kOverlapPingPong;
  bool always_rescale_o = false;
  int cluster_m = 1, cluster_min_seqlen_k = 0;
  int long_min_seqlen_k = 0, short_masked_below_seqlen_k = 0;
  bool stream_k_tail = false;

  int block_m() const { return 64 * consumer_warpgroups; }
  // tile_config.hpp's block_n_for.
  int block_n_for(bool all_keys_visible, bool varlen) const {
    return varlen ? varlen_block_n : all_keys_visible ? dense_block_n : block_n;
  }
};
TileFacts tile_facts(int head_dim_qk, int head_dim_v, TileShape shape = TileShape::kDefault);

// The compiled kernel a call runs on: the template arguments of its KernelTraits (kernel_traits.cuh).
struct ForwardKernel {
  // The kernel's head dims: the call's, or a covering pair it is padded to (api/built_kernels.hpp).
  int head_dim_qk = 0, head_dim_v = 0;
  TileShape shape = TileShape::kDefault;
  Schedule schedule = Schedule::kOverlapPingPong;
  int block_n = 0;
  bool varlen = false;
  bool all_keys_visible = false;  // every query row sees every key: the mask-free main loop
  int cluster_m = 1;
  bool alibi = false;             // ALiBi calls: the masked (or varlen) kernel built with the bias
  bool kv_row_groups = false;     // paged varlen calls: K/V tiles in 8-row groups (paged_row_groups)
  bool tuning_only = false;       // built only with FLASHCORE_BUILD_TUNING_KERNELS

  bool stream_k() const { return all_keys_visible && !varlen; }  // KernelTraits::kStreamK
  bool operator==(const ForwardKernel&) const = default;
};

// Whether a paged call's K/V tiles take the row-group layout (kernel_traits.cuh, kKvRowGroups): a
// page's piece is then one TMA box, not one per 64-column chunk. Needs a pool whose rows are evenly
// spaced across pages (the row-group map, sm90/common/tma.cuh), unpadded head dims with more than one
// chunk (one chunk is the same layout either way), and no ALiBi (its varlen kernel keeps the other).
bool paged_row_groups(const AttentionParams& params, int tile_dqk, int tile_dv);

// Picks the kernel among those of the (tile_dqk, tile_dv) instantiation: the call's head dims, or the
// covering pair it is padded to (launch.cu picks it from the built ones). Not ok (Unsupported) for
// head dims without a tile configuration and for overrides that name a kernel that does not exist.
Status choose_forward_kernel(const AttentionParams& params, int tile_dqk, int tile_dv, const ForwardOverrides& overrides,
                             ForwardKernel* kernel);

// What the launch needs beyond the kernel: device facts measured by the launcher.
struct DeviceFacts {
  int sm_count = 1;
  int resident_units = 1;  // CTAs (or clusters) of this kernel resident at once: the persistent grid's cap
};

struct ForwardPlan {
  ForwardKernel kernel;
  bool always_rescale_o = false;
  int block_m = 0;
  int num_m_blocks = 0;          // ceil(Sq / block_m)
  int m_row_shift = 0;           // short query block first (the long shape's masked kernel): see scheduler.cuh
  int heads_per_group = 1;       // attention/head_groups.hpp
  bool pair_tiles = false;       // attention/tile_order.hpp's paired order
  int num_units = 0;             // units of the tile order (0: nothing to run)
  int grid_units = 0;            // CTAs, or clusters of kernel.cluster_m CTAs
  attn::StreamKTail tail;        // inactive unless the stream-K tail runs
  size_t workspace_bytes = 0;    // per call, stream-ordered: the zeroed part first
  size_t workspace_zeroed_bytes = 0;

  int grid_ctas() const { return grid_units * kernel.cluster_m; }
  int wave_units() const { return tail.first_unit; }
  int sk_first_wave() const { return grid_units > 0 ? tail.first_unit / grid_units : 0; }
};

// The launch of `kernel` for `params`. Not ok when the call has more than 2^31 tiles.
Status plan_forward(const AttentionParams& params, const ForwardKernel& kernel, const DeviceFacts& device,
                    const ForwardOverrides& overrides, ForwardPlan* plan);

// The visibility rule the kernel applies at the call's (dense, or varlen maximum) lengths.
attn::VisibilityMask call_mask(const AttentionParams& params);

// "d128 overlap kBlockN 128 all-keys cluster 2", for errors and flashcore-bench.
std::string describe(const ForwardKernel& kernel);

}  // namespace flashcore::sm90
