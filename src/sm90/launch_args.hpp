// What launch.cu hands an instantiation unit (no CUDA device code here, so launch.cu stays a plain
// host translation unit of the sm90 path).
#pragma once

#include <cuda.h>

#include "common/host_device.hpp"
#include "flashcore/flashcore.hpp"
#include "sm90/params.hpp"
#include "sm90/tile_config.hpp"

namespace flashcore::sm90 {

// One operand of the kernel as a TMA view: [batch][heads][seqlen][head_dim] with explicit element
// strides (the flash-attn layout and PyTorch's [B, H, S, D] are both just strides). Varlen: seqlen
// is the packed token count (total_q / total_k) and batch is 1.
struct OperandView {
  const void* base = nullptr;
  int head_dim = 0, seqlen = 0, heads = 0, batch = 0;
  int64_t seq_stride = 0, head_stride = 0, batch_stride = 0;  // elements
};

// Builds the tensor map the kernel loads `view` through, both filling a [ceil(head_dim/64)][box_rows][64]
// tile with the 128-byte swizzle:
//   head_dim % 64 == 0: a 5-D view {64, seqlen, head_dim/64, heads, batch}; one box
//                       {64, box_rows, head_dim/64, 1, 1} is the whole tile (one TMA instruction),
//                       or, with box_chunks > 0, {64, box_rows, box_chunks, 1, 1} (the cluster
//                       kernel's share of a tile);
//   otherwise (chunked): a 4-D view {head_dim, seqlen, heads, batch} and a box {64, box_rows, 1, 1}
//                       per 64-column chunk; the last chunk's columns past head_dim are zero-filled on
//                       loads and not written on stores.
// Defined in launch.cu (it owns the driver entry point).
FC_HOST_DEVICE constexpr bool chunked_map(int head_dim) { return head_dim % 64 != 0; }
Status encode_operand_map(CUtensorMap* map, const OperandView& view, DType dtype, int box_rows, int box_chunks = 0);

struct LaunchArgs {
  OperandView q, k, v, o;
  DType dtype = DType::kFloat16;
  KernelParams params;  // the tile-independent fields; the launcher fills num_m_blocks / num_units
  int sm_count = 1;
  int schedule = -1;    // -1: the tile config's schedule; otherwise a Schedule value (tuning/tests)
  int always_rescale = -1;  // -1: the tile config's kAlwaysRescaleO; 0/1 override (tuning)
  int block_n = 0;      // 0: the tile config's kBlockN; otherwise kBlockN or kAltBlockN (tuning)
  // The cluster kernel (tile_config.hpp, kClusterM): -1 where the config's kClusterMinSeqlenK says it
  // pays, 0 never, 1 whenever the call allows it (FLASHCORE_SM90_CLUSTER=off|on, tuning/tests).
  int cluster = -1;
  // The long tile shape (tile_config.hpp, TileShape): -1 from the config's kLongMinSeqlenK keys on
  // (calls without a left window edge), 0 never, 1 always (FLASHCORE_SM90_LONG_TILES=off|on).
  int long_tiles = -1;
  // The short tile shape: -1 for masked calls below the config's kShortMaskedBelowSeqlenK keys, 0
  // never, 1 for every masked call (FLASHCORE_SM90_SHORT_TILES=off|on).
  int short_tiles = -1;
  int pair_tiles = -1;   // paired tile order (tile_order.hpp): -1 where it pays, 0 never, 1 always
                         // for uneven tiles (FLASHCORE_SM90_TILE_ORDER=longest|paired, tuning/tests)
  int heads_per_group = 0;  // 0: head_groups.hpp's rule; > 0: that many (FLASHCORE_SM90_HEADS_PER_GROUP, tests)
  // The stream-K tail of equal-tile calls (stream_k.hpp): -1 where it pays (plan_stream_k_tail), 0
  // never, 1 whenever the last wave is partial (FLASHCORE_SM90_STREAM_K=off|on, tuning/tests).
  int stream_k = -1;
  // > 0: at most this many CTAs (clusters) in the persistent grid (FLASHCORE_SM90_GRID=<n>, tests:
  // small calls with several waves and a stream-K tail).
  int max_grid_units = 0;
};

// One per built (Dqk, Dv, dtype) instantiation unit.
template <int kDqk, int kDv, typename Element>
Status launch_forward(const LaunchArgs& args, cudaStream_t stream);

}  // namespace flashcore::sm90
