// The sm90 forward plan (plan.hpp). Host-only and pure: everything it decides follows from the
// call, the tile table (tile_config.hpp), the device facts and the overrides.
#include "sm90/fwd/plan.hpp"

#include <algorithm>
#include <cstdint>

#include "attention/head_groups.hpp"
#include "attention/tile_order.hpp"

namespace flashcore::sm90 {

namespace {

#if defined(FLASHCORE_TUNING_KERNELS)
constexpr bool kTuningKernelsBuilt = true;
#else
constexpr bool kTuningKernelsBuilt = false;
#endif

template <int kDqk, int kDv, TileShape kShape>
constexpr TileFacts facts_of() {
  using C = TileConfig<kDqk, kDv, kShape>;
  TileFacts f;
  f.found = true;
  f.consumer_warpgroups = C::kConsumerWarpgroups;
  f.block_n = C::kBlockN;
  f.dense_block_n = C::kDenseBlockN;
  f.varlen_block_n = C::kVarlenBlockN;
  f.alt_block_n = C::kAltBlockN;
  f.schedule = C::kSchedule;
  f.always_rescale_o = C::kAlwaysRescaleO;
  f.cluster_m = C::kClusterM;
  f.cluster_min_seqlen_k = C::kClusterMinSeqlenK;
  f.long_min_seqlen_k = C::kLongMinSeqlenK;
  f.short_masked_below_seqlen_k = C::kShortMaskedBelowSeqlenK;
  f.stream_k_tail = C::kStreamKTail;
  return f;
}

// The other shapes exist where the default config names a threshold for them (tile_config.hpp).
template <int kDqk, int kDv>
TileFacts facts_for_shape(TileShape shape) {
  using C = TileConfig<kDqk, kDv>;
  if constexpr (C::kLongMinSeqlenK > 0) {
    if (shape == TileShape::kLong) return facts_of<kDqk, kDv, TileShape::kLong>();
  }
  if constexpr (C::kShortMaskedBelowSeqlenK > 0) {
    if (shape == TileShape::kShort) return facts_of<kDqk, kDv, TileShape::kShort>();
  }
  if (shape != TileShape::kDefault) return {};
  return facts_of<kDqk, kDv, TileShape::kDefault>();
}

bool has_keys(const AttentionParams& p) { return p.k != nullptr && p.v != nullptr; }

// Every query row sees every key (no causal mask, no window that cuts any row).
bool all_keys_visible(const AttentionParams& p, const attn::VisibilityMask& mask) {
  return p.seqlen_q > 0 && mask.tile_fully_visible(0, p.seqlen_q - 1, 0, p.seqlen_k - 1);
}

ForwardKernel masked_kernel(const TileFacts& config, TileShape shape) {
  ForwardKernel k;
  k.shape = shape;
  k.block_n = config.block_n_for(false, false);
  return k;
}

// A call in which every row sees every key: pairs of CTAs sharing K/V (the cluster kernel) where
// the query blocks pair up and the keys are long enough for the saved L2 traffic to pay.
ForwardKernel all_keys_kernel(const AttentionParams& p, const TileFacts& config, TileShape shape,
                              const ForwardOverrides& o, bool padded) {
  ForwardKernel k;
  k.shape = shape;
  k.all_keys_visible = true;
  k.block_n = config.block_n_for(true, false);
  if (config.cluster_m > 1 && !padded) {
    const int num_m_blocks = (p.seqlen_q + config.block_m() - 1) / config.block_m();
    const bool cluster_pays = o.cluster > 0 || (o.cluster < 0 && p.seqlen_k >= config.cluster_min_seqlen_k);
    if (cluster_pays && num_m_blocks % config.cluster_m == 0) k.cluster_m = config.cluster_m;
  }
  return k;
}

}  // namespace

TileFacts tile_facts(int head_dim_qk, int head_dim_v, TileShape shape) {
#define FLASHCORE_KERNEL(DQK, DV, DTYPE, ELEMENT, BUILT) \
  if (head_dim_qk == DQK && head_dim_v == DV) return facts_for_shape<DQK, DV>(shape);
#include "kernels/sm90_fwd_kernels.inc"
#undef FLASHCORE_KERNEL
  return {};
}

attn::VisibilityMask call_mask(const AttentionParams& p) { return attn::make_mask(p, p.seqlen_q, p.seqlen_k); }

namespace {

Status choose_kernel_of(const AttentionParams& p, int tile_dqk, int tile_dv, const TileFacts& config,
                        const ForwardOverrides& o, ForwardKernel* kernel) {
  *kernel = ForwardKernel{};
  // The cluster kernel multicasts whole 5-D boxes: calls padded to the kernel (per-chunk maps) run
  // on one CTA per query block.
  const bool padded = tile_dqk != p.head_dim_qk || tile_dv != p.head_dim_v;
  if (p.cu_seqlens_q != nullptr || p.cu_seqlens_k != nullptr || p.seqused_k != nullptr || p.is_paged()) {
    // Per-sequence lengths, or paged K/V (whose pieces the varlen kernel's producer warp issues):
    // the varlen kernel, at the configured schedule and kVarlenBlockN only.
    kernel->varlen = true;
    kernel->schedule = config.schedule;
    kernel->block_n = config.block_n_for(false, true);
    kernel->alibi = p.alibi_slopes != nullptr;
    kernel->kv_row_groups = paged_row_groups(p, tile_dqk, tile_dv);
    return Status::Ok();
  }
  if (p.alibi_slopes != nullptr) {
    // ALiBi: its own build of the default shape's masked kernel (KernelTraits::kAlibi): as a
    // runtime branch in every block's score preparation the bias slows the calls without it
    // (docs/design/sm90.md).
    *kernel = masked_kernel(config, TileShape::kDefault);
    kernel->schedule = config.schedule;
    kernel->alibi = true;
    return Status::Ok();
  }
  const Schedule schedule = o.schedule < 0 ? config.schedule : Schedule(o.schedule);
  const attn::VisibilityMask mask = call_mask(p);
  const bool all_visible = all_keys_visible(p, mask);
  const int configured_block_n = config.block_n_for(all_visible, false);
  if (o.block_n == 0 || o.block_n == configured_block_n) {
    if (schedule == Schedule::kSerial) {
      kernel->schedule = Schedule::kSerial;
      kernel->block_n = config.block_n;
      kernel->tuning_only = config.schedule != Schedule::kSerial;
    } else if (config.schedule != Schedule::kOverlapPingPong) {
      return Status::Unsupported("sm90: the overlap schedule is not built for head dim " + std::to_string(tile_dqk));
    } else if (config.short_masked_below_seqlen_k > 0 && !all_visible &&
               (o.short_tiles > 0 ||
                (o.short_tiles < 0 && o.block_n == 0 && p.seqlen_k < config.short_masked_below_seqlen_k))) {
      // Short masked calls: the head dim's short tile shape.
      *kernel = masked_kernel(tile_facts(tile_dqk, tile_dv, TileShape::kShort), TileShape::kShort);
    } else if (config.long_min_seqlen_k > 0 &&
               (o.long_tiles > 0 || (o.long_tiles < 0 && o.block_n == 0 && mask.window_left >= p.seqlen_k &&
                                     p.seqlen_k >= config.long_min_seqlen_k))) {
      // Long calls without a left window edge: the head dim's long tile shape.
      const TileFacts long_config = tile_facts(tile_dqk, tile_dv, TileShape::kLong);
      *kernel = all_visible ? all_keys_kernel(p, long_config, TileShape::kLong, o, padded)
                            : masked_kernel(long_config, TileShape::kLong);
    } else {
      *kernel = all_visible ? all_keys_kernel(p, config, TileShape::kDefault, o, padded)
                            : masked_kernel(config, TileShape::kDefault);
    }
  } else if (config.alt_block_n > 0 && o.block_n == config.alt_block_n) {
    // The tuning candidate, serial schedule only: with the overlap schedule its larger S and P
    // fragments do not fit the consumer registers.
    kernel->schedule = Schedule::kSerial;
    kernel->block_n = config.alt_block_n;
    kernel->tuning_only = true;
  } else {
    return Status::Unsupported("sm90: kBlockN " + std::to_string(o.block_n) + " is not built for head dim " +
                               std::to_string(tile_dqk) + " (tile_config.hpp: kBlockN / kAltBlockN)");
  }
  if (kernel->tuning_only && !kTuningKernelsBuilt) {
    return Status::Unsupported("sm90: the tuning kernel " + describe(*kernel) +
                               " is not in this build (configure with FLASHCORE_BUILD_TUNING_KERNELS=ON)");
  }
  return Status::Ok();
}

}  // namespace

Status choose_forward_kernel(const AttentionParams& p, int tile_dqk, int tile_dv, const ForwardOverrides& o,
                             ForwardKernel* kernel) {
  const TileFacts config = tile_facts(tile_dqk, tile_dv);
  if (!config.found) return Status::Unsupported("sm90: no tile configuration for these head dims");
  if (tile_dqk < p.head_dim_qk || tile_dv < p.head_dim_v) return Status::Internal("sm90: a kernel narrower than the call");
  const Status status = choose_kernel_of(p, tile_dqk, tile_dv, config, o, kernel);
  kernel->head_dim_qk = tile_dqk;
  kernel->head_dim_v = tile_dv;
  return status;
}

Status plan_forward(const AttentionParams& p, const ForwardKernel& kernel, const DeviceFacts& device,
                    const ForwardOverrides& o, ForwardPlan* out) {
  ForwardPlan plan;
  plan.kernel = kernel;
  const TileFacts config = tile_facts(kernel.head_dim_qk, kernel.head_dim_v, kernel.shape);
  if (!config.found) return Status::Internal("sm90: plan for a kernel without a tile configuration");
  const attn::VisibilityMask mask = call_mask(p);
  const int cluster_m = kernel.cluster_m;

  plan.always_rescale_o = o.always_rescale < 0 ? config.always_rescale_o : o.always_rescale != 0;
  plan.block_m = config.block_m();
  plan.num_m_blocks = (p.seqlen_q + plan.block_m - 1) / plan.block_m;
  // The long shape's masked kernel puts the short query block first (scheduler.cuh).
  const bool partial_block_first =
      !kernel.all_keys_visible && !kernel.varlen && cluster_m == 1 && kernel.shape == TileShape::kLong;
  plan.m_row_shift = partial_block_first ? plan.num_m_blocks * plan.block_m - p.seqlen_q : 0;
  if (plan.num_m_blocks % cluster_m != 0) return Status::Internal("sm90: cluster kernel with an odd query-block count");
  const int64_t num_tiles = (int64_t)(plan.num_m_blocks / cluster_m) * p.heads_q * p.batch;
  if (num_tiles > INT32_MAX) return Status::Unsupported("sm90: more than 2^31 query tiles");
  if (num_tiles == 0) {
    *out = plan;
    return Status::Ok();
  }

  const int max_units = o.max_grid_units > 0 ? std::min(device.resident_units, o.max_grid_units) : device.resident_units;
  // Heads whose tiles interleave in the scheduler; query heads sharing a KV head under GQA share its bytes.
  const double kv_bytes_per_query_head =
      (double)p.seqlen_k * (p.head_dim_qk + p.head_dim_v) * 2 / (p.heads_q / p.heads_kv);
  const bool uneven_tiles = mask.window_left < p.seqlen_k || mask.window_right < p.seqlen_k;
  const int tile_grid = (int)std::min<int64_t>(num_tiles, max_units);  // the grid if every unit were one tile
  const int m_units = plan.num_m_blocks / cluster_m;
  plan.heads_per_group = o.heads_per_group > 0 ? std::min(o.heads_per_group, p.batch * p.heads_q)
                                               : attn::heads_per_group(kv_bytes_per_query_head, kL2GroupBytes, m_units,
                                                                       tile_grid, p.batch * p.heads_q, uneven_tiles);
  // Uneven tiles go in balanced pairs when they grow with the query block (a causal triangle: no
  // left window bound) and the head groups cut waves. Varlen sequences have their own lengths, and
  // the cluster kernel runs only calls whose tiles are all equally long.
  const bool may_pair = cluster_m == 1 && !kernel.varlen;
  const bool triangle = mask.window_left >= p.seqlen_k;
  const bool pairs_pay = o.pair_tiles > 0 || (o.pair_tiles < 0 && triangle &&
                                              !attn::groups_fill_waves(m_units, plan.heads_per_group, tile_grid));
  plan.pair_tiles = may_pair && uneven_tiles && pairs_pay;
  attn::TileOrder order;
  order.m_units = m_units;
  order.total_heads = p.batch * p.heads_q;
  order.heads_per_group = plan.heads_per_group;
  order.paired = plan.pair_tiles;
  plan.num_units = order.num_units();
  plan.grid_units = std::min(plan.num_units, max_units);

  // Equal tiles: the stream-K tail when the last wave is partial and the split pays (by default
  // only for head dims whose tile config has kStreamKTail). Every tile of such a call visits KV
  // blocks 0 .. ceil(Sk / kBlockN) - 1.
  plan.tail = attn::plan_stream_k_tail(plan.num_units, plan.grid_units, 0, 0);
  if (kernel.stream_k()) {
    const int blocks_per_tile = has_keys(p) ? (p.seqlen_k + kernel.block_n - 1) / kernel.block_n : 0;
    const int force = o.stream_k >= 0 ? o.stream_k : (config.stream_k_tail ? -1 : 0);
    plan.tail = attn::plan_stream_k_tail(plan.num_units, plan.grid_units, blocks_per_tile, force);
  }

  // Per-call workspace: the varlen handout's counter (scheduler.cuh, TileQueue), or the stream-K
  // tail's flags (one per CTA and consumer warpgroup) and fp32 partials (stream_k.cuh: O and two
  // row statistics per row pair, 128 threads per warpgroup). The zeroed part comes first.
  if (kernel.varlen) plan.workspace_zeroed_bytes = plan.workspace_bytes = sizeof(int);
  if (plan.tail.active()) {
    const size_t ctas = (size_t)plan.grid_units * cluster_m;
    const size_t floats_per_thread = kernel.head_dim_v / 2 + 4;  // the kernel's O fragment (padded or not)
    plan.workspace_zeroed_bytes = (ctas * config.consumer_warpgroups * sizeof(int) + 255) / 256 * 256;
    plan.workspace_bytes = plan.workspace_zeroed_bytes + ctas * sizeof(float) * floats_per_thread * 128 *
                                                             config.consumer_warpgroups;
  }
  *out = plan;
  return Status::Ok();
}

bool paged_row_groups(const AttentionParams& p, int tile_dqk, int tile_dv) {
  auto evenly_spaced = [&](int64_t page_stride, int64_t row_stride) {
    return p.num_pages == 1 || page_stride == int64_t(p.page_size) * row_stride;
  };
  return p.is_paged() && p.alibi_slopes == nullptr && p.head_dim_qk == tile_dqk && p.head_dim_v == tile_dv &&
         kv_row_group_tiles(tile_dqk, tile_dv) && p.page_size % 8 == 0 &&
         evenly_spaced(p.k_batch_stride, p.k_seq_stride) && evenly_spaced(p.v_batch_stride, p.v_seq_stride) &&
         int64_t(p.num_pages) * p.page_size / 8 < (int64_t(1) << 31);
}

std::string describe(const ForwardKernel& k) {
  std::string s = std::to_string(k.head_dim_qk) + "/" + std::to_string(k.head_dim_v) + " ";
  s += k.schedule == Schedule::kSerial ? "serial" : "overlap";
  s += " kBlockN " + std::to_string(k.block_n);
  if (k.shape == TileShape::kLong) s += " long-shape";
  if (k.shape == TileShape::kShort) s += " short-shape";
  if (k.varlen) s += " varlen";
  if (k.all_keys_visible) s += " all-keys-visible";
  if (k.cluster_m > 1) s += " cluster " + std::to_string(k.cluster_m);
  if (k.alibi) s += " alibi";
  if (k.kv_row_groups) s += " kv-row-groups";
  return s;
}

}  // namespace flashcore::sm90
