// TMA on flashcore's operand tiles: the tensor map of a [batch][heads][seqlen][head_dim] operand
// with explicit strides, and the loads and stores of whole [ceil(head_dim/64)][rows][64] tiles with
// the 128-byte swizzle (the layout every wgmma operand here uses).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <string>

#include "common/host_device.hpp"
#include "flashcore/flashcore.hpp"
#include "ptx/barrier.hpp"
#include "ptx/tma.hpp"

namespace flashcore::sm90 {

// One operand of the kernel as a TMA view: [batch][heads][seqlen][head_dim] with explicit element
// strides (the flash-attn layout and PyTorch's [B, H, S, D] are both just strides). Varlen: seqlen
// is the packed token count (total_q / total_k) and batch is 1.
struct OperandView {
  const void* base = nullptr;
  int head_dim = 0, seqlen = 0, heads = 0, batch = 0;
  int64_t seq_stride = 0, head_stride = 0, batch_stride = 0;  // elements
};

// Builds the tensor map the kernel loads `view` through, both filling a [ceil(tile_head_dim/64)][box_rows][64]
// tile with the 128-byte swizzle, where tile_head_dim (>= view.head_dim) is the kernel's head dim:
//   whole (tile_head_dim % 64 == 0 and view.head_dim == tile_head_dim): a 5-D view
//                       {64, seqlen, head_dim/64, heads, batch}; one box {64, box_rows, head_dim/64, 1, 1}
//                       is the whole tile (one TMA instruction), or, with box_chunks > 0,
//                       {64, box_rows, box_chunks, 1, 1} (the cluster kernel's share of a tile);
//   otherwise (per chunk): a 4-D view {head_dim, seqlen, heads, batch} and a box {64, box_rows, 1, 1}
//                       per 64-column chunk of the tile; the columns past view.head_dim (a head dim
//                       that is not a multiple of 64, or a call padded to a larger kernel) are
//                       zero-filled on loads and not written on stores.
// Defined in tensor_map.cu (it owns the driver entry point).
FC_HOST_DEVICE constexpr bool chunked_map(int head_dim) { return head_dim % 64 != 0; }
FC_HOST_DEVICE constexpr bool per_chunk_map(int head_dim, int tile_head_dim) {
  return chunked_map(tile_head_dim) || head_dim != tile_head_dim;
}
Status encode_operand_map(CUtensorMap* map, const OperandView& view, DType dtype, int tile_head_dim, int box_rows,
                          int box_chunks = 0);
// The per-chunk shape above whatever the head dims: boxes of box_rows rows that land at any row
// (a multiple of 8) of a tile of more rows (the paged K/V pieces, sm90/fwd/mainloop.cuh).
Status encode_operand_map_per_chunk(CUtensorMap* map, const OperandView& view, DType dtype, int box_rows);
// A page pool whose rows are evenly spaced across pages (batch_stride == seqlen * seq_stride, the
// contiguous [pages][page_size][heads][D] pool) with head_dim a multiple of 64, as 8-row groups over
// the whole pool: a 5-D view {64, 8, head_dim/64, pool rows / 8, heads} whose box {64, 8,
// head_dim/64, box_rows/8, 1} fills a [box_rows/8][head_dim/64][8][64] row-group tile (the 128-byte
// swizzle's 8-row atoms of one row group adjacent). One box is then a whole piece of box_rows rows
// starting at a row-group coordinate, all its columns (sm90/fwd/mainloop.cuh, kKvRowGroups).
// Internal error for other views (the plan chooses row groups only for these: paged_row_groups).
Status encode_row_group_map(CUtensorMap* map, const OperandView& view, DType dtype, int box_rows);
// Empty when `view` (16-bit elements) meets TMA's rules: a 16-byte aligned base and, for every
// dimension longer than 1, a stride that is a positive multiple of 8 elements (16 bytes); otherwise
// the rule it breaks, naming the tensor `name` (its strides as <name>_seq_stride, ...). A stride of a
// dimension of extent 1 is never used (encode_operand_map substitutes a legal value).
std::string operand_view_problem(const char* name, const OperandView& view);
// An fp32 matrix of `rows` rows of `cols` floats (cols a multiple of 32: the row pitch is cols * 4
// bytes) as a 2-D TMA view whose box is 32 columns x box_rows rows with the 128-byte swizzle: in
// shared memory one [box_rows][32] fp32 tile per box, 16-byte unit u of row r at u ^ (r % 8).
Status encode_fp32_matrix_map(CUtensorMap* map, float* base, int cols, int64_t rows, int box_rows);
// `count` floats as a 1-D TMA view loaded `box` floats at a time (box * 4 a multiple of 16).
Status encode_fp32_vector_map(CUtensorMap* map, const float* base, int64_t count, int box);

#if defined(__CUDACC__)
// One operand tile [ceil(D/64)][kRows][64] from token row `row` of (head, batch): one 5-D box, or one
// 4-D box per 64-column chunk (`per_chunk`: the map is per_chunk_map's, encode_operand_map).
template <int kHeadDim, int kRows>
FC_DEVICE void tma_load_operand(uint16_t* dst, const CUtensorMap* map, uint64_t* bar, int row, int head, int batch,
                                bool per_chunk) {
  if (!chunked_map(kHeadDim) && !per_chunk) {
    ptx::tma_load_5d(dst, map, bar, 0, row, 0, head, batch);
  } else {
#pragma unroll
    for (int c = 0; c < (kHeadDim + 63) / 64; ++c) ptx::tma_load_4d(dst + c * kRows * 64, map, bar, 64 * c, row, head, batch);
  }
}

// Cluster kernel: this CTA's share of a K or V block (kChunks of its 64-column chunks, from chunk
// rank * kChunks on), written into the same stage of every CTA of the cluster. The rank is read
// here, at each load, so it holds no register across the producer's loop (24 registers).
template <int kChunks, int kRows, int kClusterM>
FC_DEVICE void tma_load_operand_multicast(uint16_t* dst, const CUtensorMap* map, uint64_t* bar, int row, int head,
                                          int batch) {
  const uint32_t rank = ptx::cluster_ctarank();
  ptx::tma_load_5d_multicast(ptx::smem_addr(dst) + rank * (kChunks * kRows * 128), map, ptx::smem_addr(bar),
                             (1u << kClusterM) - 1u, 0, row, (int)rank * kChunks, head, batch);
}

// The 64 x Dv staging tile of one warpgroup to (token row `row`, head, batch): one 5-D box, or one
// 4-D box per 64-column chunk (`per_chunk`; columns past the map's head dim are not written).
template <int kHeadDim>
FC_DEVICE void tma_store_operand(const CUtensorMap* map, const uint8_t* src, int row, int head, int batch,
                                 bool per_chunk) {
  if (!chunked_map(kHeadDim) && !per_chunk) {
    ptx::tma_store_5d(map, src, 0, row, 0, head, batch);
  } else {
#pragma unroll
    for (int c = 0; c < (kHeadDim + 63) / 64; ++c) ptx::tma_store_4d(map, src + c * 64 * 128, 64 * c, row, head, batch);
  }
}
#endif  // __CUDACC__

}  // namespace flashcore::sm90
