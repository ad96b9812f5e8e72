// The fused backwards' fp32 workspace (sm90 and sm80): one stream-ordered allocation per call (graph
// capture works), shared by the preprocess, the path's main kernel and the postprocess.
//
// Rows: every (query head, sequence) owns a run of padded_rows(length) rows, so a query block of the
// main kernel (at most kBwdRowPad rows, starting at a multiple of kRowAlign inside the sequence)
// reads statistics and adds dQ without bounds checks; padding rows hold lse2 = +inf (P = 0) and
// D = 0, and their dQ rows are never read.
//   row(h, b, i) = h * rows_per_head + seq_base(b) + i
//   dense:  seq_base(b) = b * padded_rows(Sq)
//   varlen: seq_base(b) = round_up(cu_seqlens_q[b], kRowAlign) + b * (kBwdRowPad + kRowAlign)
// Every seq_base is a multiple of kRowAlign (16-byte statistics loads), and the varlen runs are
// disjoint: seq_base(b + 1) - seq_base(b) >= len(b) - (kRowAlign - 1) + kBwdRowPad + kRowAlign
// > padded_rows(len(b)).
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/host_device.hpp"
#include "flashcore/flashcore.hpp"

namespace flashcore::backward {

// The most query rows of a main kernel's block: the rows of the fp32 workspaces (dQ accumulator, log2
// LSE, D) reserved per sequence cover every block that starts inside it (padded_rows).
inline constexpr int kBwdRowPad = 128;

inline constexpr int kRowAlign = 16;  // rows; seq_base, rows_per_head and block starts are multiples of it

FC_HOST_DEVICE constexpr int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// Rows reserved for a sequence of `len` query rows: a block of at most kBwdRowPad rows starting at a
// multiple of kRowAlign below len ends at most round_up(len, kRowAlign) - kRowAlign + kBwdRowPad.
FC_HOST_DEVICE constexpr int64_t padded_rows(int64_t len) { return round_up(len, kRowAlign) + kBwdRowPad - kRowAlign; }

struct BwdWorkspace {
  float* dq_accum = nullptr;  // [rows][Dqk]: dQ summed over KV blocks; zeroed before the main kernel
  float* lse2 = nullptr;      // [rows]: lse * log2(e); +inf on padding rows and rows with lse = -inf
  float* row_d = nullptr;     // [rows]: D = rowsum(dO * O) in fp32; 0 on padding rows
  int* dq_turn = nullptr;     // deterministic mode, per (head, query block): KV blocks that have added dQ
  int64_t rows_per_head = 0;
  int64_t dense_rows_per_seq = 0;
  int dq_row_stride = 0;  // floats per dq_accum row: the kernel's Dqk (a padded call's is larger)
  // 0: dq_accum is row-major. Otherwise its query blocks of this many rows are in fragment order
  // (dq_tile.hpp; dq_row_stride is kDqTileCols).
  int dq_tile_rows = 0;
  bool varlen = false;

  FC_HOST_DEVICE int64_t seq_base(int b, int64_t q_start) const {
    return varlen ? round_up(q_start, kRowAlign) + int64_t(b) * (kBwdRowPad + kRowAlign)
                  : int64_t(b) * dense_rows_per_seq;
  }
  FC_HOST_DEVICE int64_t row(int h, int b, int64_t q_start, int i) const {
    return int64_t(h) * rows_per_head + seq_base(b, q_start) + i;
  }
  // One turn counter per query block, indexed by its first row (a multiple of kRowAlign): blocks of
  // different sequences or heads never share one (their row runs are disjoint).
  FC_HOST_DEVICE int* turn(int64_t first_row) const { return dq_turn + first_row / kRowAlign; }
};

// How a path's main kernel adds dQ: the accumulator's floats per row, and the rows of its
// fragment-ordered blocks (0: row-major; BwdWorkspace::dq_tile_rows).
struct DqLayout {
  int cols = 0;
  int tile_rows = 0;
};

// Byte sizes of the workspace's parts (each rounded up to 256 bytes) and of the whole allocation.
struct BwdWorkspaceBytes {
  size_t dq_accum = 0;  // zeroed before the main kernel
  size_t stats = 0;     // lse2, and again row_d
  size_t turns = 0;     // zeroed in deterministic mode
  size_t total() const { return dq_accum + 2 * stats + turns; }
};

// The layout for a validated call run by the kernel of head dim `kernel_dqk` (>= the call's: a padded
// call's dQ rows hold the kernel's columns), with every pointer offset from `base` (nullptr: sizes only).
// with_dq_accum = false: no dQ accumulator (a main kernel that writes dq itself; ws.dq_accum null).
inline BwdWorkspace bwd_workspace_layout(const AttentionParams& p, int kernel_dqk, void* base, BwdWorkspaceBytes* bytes,
                                         bool with_dq_accum = true) {
  BwdWorkspace ws;
  ws.dq_row_stride = kernel_dqk;
  ws.varlen = p.is_varlen();
  ws.dense_rows_per_seq = padded_rows(p.seqlen_q);
  ws.rows_per_head = round_up(ws.varlen ? round_up(p.total_q, kRowAlign) + int64_t(p.batch) * (kBwdRowPad + kRowAlign)
                                        : int64_t(p.batch) * ws.dense_rows_per_seq,
                              kBwdRowPad);
  const int64_t rows = int64_t(p.heads_q) * ws.rows_per_head;
  bytes->dq_accum = with_dq_accum ? size_t(round_up(rows * kernel_dqk * 4, 256)) : 0;
  bytes->stats = size_t(round_up(rows * 4, 256));
  bytes->turns = size_t(round_up((rows / kRowAlign + 1) * 4, 256));  // one counter per kRowAlign rows
  if (base != nullptr) {
    char* at = static_cast<char*>(base);
    ws.dq_accum = with_dq_accum ? reinterpret_cast<float*>(at) : nullptr;
    ws.lse2 = reinterpret_cast<float*>(at + bytes->dq_accum);
    ws.row_d = reinterpret_cast<float*>(at + bytes->dq_accum + bytes->stats);
    ws.dq_turn = reinterpret_cast<int*>(at + bytes->dq_accum + 2 * bytes->stats);
  }
  return ws;
}

}  // namespace flashcore::backward
