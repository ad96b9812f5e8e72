// Which keys each query sees, as small functors shared by the CPU reference, the naive GPU reference,
// the sm80 path and the sm90 path, so every path computes one function (the scores themselves:
// score_transform.hpp).
//
//   visible(i, j) = lo(i) <= j <= hi(i), 0 <= j < Sk             (VisibilityMask)
//
// Indices i, j are positions inside one sequence (varlen: relative to the sequence start).
#pragma once

#include <climits>

#include "common/host_device.hpp"
#include "flashcore/flashcore.hpp"

namespace flashcore::attn {


// Which keys a query sees. Both bounds are inclusive; an infinite side is stored as a bound far
// outside any sequence so the hot loops never branch on "is this side infinite".
struct VisibilityMask {
  int seqlen_k = 0;
  int diag_offset = 0;              // Sk - Sq (bottom-right alignment) or 0 (top-left)
  int window_left = INT_MAX / 4;    // "infinite" is a large positive number
  int window_right = INT_MAX / 4;

  FC_HOST_DEVICE int first_key(int i) const {  // first visible key of query i (may be > last_key)
    const long long lo = (long long)i + diag_offset - window_left;
    return lo < 0 ? 0 : (int)lo;
  }
  FC_HOST_DEVICE int last_key(int i) const {   // last visible key of query i (may be < 0)
    const long long hi = (long long)i + diag_offset + window_right;
    return hi >= seqlen_k ? seqlen_k - 1 : (int)hi;
  }
  FC_HOST_DEVICE bool visible(int i, int j) const { return j >= first_key(i) && j <= last_key(i); }

  // The same rule as a band of diagonals: key j is visible to query i exactly when
  //   min_diagonal() <= j - i <= max_diagonal()  and  0 <= j < seqlen_k.
  // j - i of real positions fits in an int, so kernels can test it per element with two 32-bit
  // compares against two per-sequence numbers instead of keeping per-row bounds. Clamping to the
  // int range keeps the test exact (a bound beyond it is beyond every j - i).
  FC_HOST_DEVICE int min_diagonal() const { return clamp_to_int((long long)diag_offset - window_left); }
  FC_HOST_DEVICE int max_diagonal() const { return clamp_to_int((long long)diag_offset + window_right); }
  // The band test with the two diagonals already at hand (kernels keep them in registers rather
  // than calling min_diagonal() / max_diagonal() per element).
  static FC_HOST_DEVICE bool in_band(int i, int j, int min_diag, int max_diag, int seqlen_k) {
    const int diag = j - i;
    return diag >= min_diag && diag <= max_diag && j < seqlen_k;
  }
  static FC_HOST_DEVICE int clamp_to_int(long long v) {
    return v < INT_MIN ? INT_MIN : v > INT_MAX ? INT_MAX : (int)v;
  }

  // True when every (i, j) with i in [i0, i1], j in [j0, j1] (j1 < seqlen_k) is visible, so the
  // tile needs no per-element masking.
  FC_HOST_DEVICE bool tile_fully_visible(int i0, int i1, int j0, int j1) const {
    // first_key is monotone non-decreasing in i, last_key too: check the corners that bind.
    return first_key(i1) <= j0 && last_key(i0) >= j1;
  }
};

// One batch entry's sequence: where its tokens start and how many there are.
struct SequenceExtent {
  int64_t q_start = 0;  // first token row of this sequence in q/o (varlen) or 0
  int64_t k_start = 0;  // first token row in k/v (varlen) or 0
  int seqlen_q = 0;
  int seqlen_k = 0;     // keys that count (seqused_k applied)
};

// Resolves batch entry b from the varlen metadata (any of the three pointers may be null: dense
// lengths then apply). The arrays must be readable from the calling side (host pointers on the CPU,
// device pointers in a kernel). Every value is clamped into what the tensors hold — a sequence's
// tokens into [0, total_q) / [0, total_k), seqused_k into its keys — so arrays that no one checked
// before the launch (flashcore's no-sync varlen calls: api/metadata_check.hpp reports them) can give
// wrong results but never an access outside q, k, v or o. Valid arrays pass unchanged.
FC_HOST_DEVICE int64_t clamp_i64(int64_t x, int64_t lo, int64_t hi) { return x < lo ? lo : x > hi ? hi : x; }
FC_HOST_DEVICE SequenceExtent sequence_extent(const int32_t* cu_seqlens_q, const int32_t* cu_seqlens_k,
                                              const int32_t* seqused_k, int seqlen_q, int seqlen_k, int64_t total_q,
                                              int64_t total_k, int b) {
  SequenceExtent e;
  if (cu_seqlens_q != nullptr) {
    e.q_start = clamp_i64(cu_seqlens_q[b], 0, total_q);
    e.seqlen_q = int(clamp_i64(cu_seqlens_q[b + 1], e.q_start, total_q) - e.q_start);
  } else {
    e.seqlen_q = seqlen_q;
  }
  if (cu_seqlens_k != nullptr) {
    e.k_start = clamp_i64(cu_seqlens_k[b], 0, total_k);
    e.seqlen_k = int(clamp_i64(cu_seqlens_k[b + 1], e.k_start, total_k) - e.k_start);
  } else {
    e.seqlen_k = seqlen_k;
  }
  if (seqused_k != nullptr) e.seqlen_k = int(clamp_i64(seqused_k[b], 0, e.seqlen_k));
  return e;
}
// With the KV-cache fields: a paged sequence's rows count from 0 in its block-table row (cu_seqlens_k
// then only give lengths), and left padding moves the first key to row leftpad_k[b] (clamped into
// the sequence, as every kernel must read inside it even when the caller's array is wrong).
// The key-row bound of paged calls, in place of total_k: their keys live in the page pool, so
// cu_seqlens_k give lengths only (kv_row_location clamps pages).
inline constexpr int64_t kPagedKeyRowBound = int64_t(1) << 62;
FC_HOST_DEVICE SequenceExtent sequence_extent(const AttentionParams& p, int b) {
  SequenceExtent e = sequence_extent(p.cu_seqlens_q, p.cu_seqlens_k, p.seqused_k, p.seqlen_q, p.seqlen_k, p.total_q,
                                     p.block_table != nullptr ? kPagedKeyRowBound : p.total_k, b);
  if (p.block_table != nullptr) e.k_start = 0;
  if (p.leftpad_k != nullptr) {
    const int pad = p.leftpad_k[b] < 0 ? 0 : p.leftpad_k[b] > e.seqlen_k ? e.seqlen_k : p.leftpad_k[b];
    e.k_start += pad;
    e.seqlen_k -= pad;
  }
  return e;
}

// Whether the call reads K/V through the KV-cache fields (paged, batch-indexed or left-padded), which
// only the decode path and the references take.
FC_HOST_DEVICE bool uses_kv_cache_layout(const AttentionParams& p) {
  return p.block_table != nullptr || p.kv_batch_idx != nullptr || p.leftpad_k != nullptr;
}

// Element offset of (batch entry b, token, head h) in a tensor with these strides. `token` counts
// from the sequence's start in the packed varlen layout (packed: no batch axis, the batch stride is
// ignored) or from 0 in the dense one.
FC_HOST_DEVICE int64_t token_offset(bool packed, int64_t batch_stride, int64_t seq_stride, int64_t head_stride,
                                    int b, int64_t token, int h) {
  return (packed ? 0 : int64_t(b) * batch_stride) + token * seq_stride + int64_t(h) * head_stride;
}

// Where key row `row` of batch entry b lives (rows as SequenceExtent::k_start counts them: the
// packed token row in varlen, the row of the entry's cache otherwise): `batch` is the index on k/v's
// batch axis (the entry, its cache row kv_batch_idx[b], or its page) and `row` the row inside it.
// Table and index entries are clamped into the pool, so a wrong entry can give wrong keys but never
// an access outside k and v (validate() rejects them where it can read them). 32-bit division:
// rows are below 2^31 (seqlen_k is an int).
struct KvRowLocation {
  int64_t batch;
  int64_t row;
};
// A page pool and its block table (AttentionParams' paged fields), as the kernels that read pages
// hold it: row r of entry b lives at row r % page_size of page block_table[b][r / page_size], with
// the slot and the page clamped into the table row and the pool.
struct PageTable {
  const int32_t* table = nullptr;
  int64_t batch_stride = 0;
  int page_size = 1, pages_per_seq = 1, num_pages = 1;

  FC_HOST_DEVICE static PageTable of(const AttentionParams& p) {
    return {p.block_table, p.block_table_batch_stride, p.page_size, p.pages_per_seq, p.num_pages};
  }
  FC_HOST_DEVICE KvRowLocation locate(int b, int row) const { return {page_of(entry(b, row)), row % page_size}; }
  // The two halves of locate(), for a kernel that reads the entry well before it uses the page.
  FC_HOST_DEVICE int entry(int b, int row) const { return slot_entry(b, row / page_size); }
  // The entry in table slot `slot` (row / page_size) of entry b; slots past the row read its last.
  FC_HOST_DEVICE int slot_entry(int b, int slot) const {
    slot = slot < pages_per_seq ? slot : pages_per_seq - 1;
    return table[int64_t(b) * batch_stride + slot];
  }
  FC_HOST_DEVICE int page_of(int entry) const { return entry < 0 ? 0 : entry >= num_pages ? num_pages - 1 : entry; }
};
FC_HOST_DEVICE KvRowLocation kv_row_location(const AttentionParams& p, int b, int64_t row) {
  if (p.block_table != nullptr) return PageTable::of(p).locate(b, int(row));
  int kv_b = b;
  if (p.kv_batch_idx != nullptr) {
    kv_b = p.kv_batch_idx[b];
    kv_b = kv_b < 0 ? 0 : kv_b >= p.kv_batch ? p.kv_batch - 1 : kv_b;
  }
  return {kv_b, row};
}

// Element offset of a located row's KV head h in k or v (their strides passed in); `packed`: varlen
// K/V without pages, which has no batch axis.
FC_HOST_DEVICE int64_t kv_location_offset(KvRowLocation at, bool packed, int64_t batch_stride, int64_t seq_stride,
                                          int64_t head_stride, int h) {
  return (packed ? 0 : at.batch * batch_stride) + at.row * seq_stride + int64_t(h) * head_stride;
}
// The same for key row `row` of batch entry b.
FC_HOST_DEVICE int64_t kv_row_offset(const AttentionParams& p, int64_t batch_stride, int64_t seq_stride,
                                     int64_t head_stride, int b, int64_t row, int h) {
  const bool packed = p.cu_seqlens_k != nullptr && p.block_table == nullptr;
  return kv_location_offset(kv_row_location(p, b, row), packed, batch_stride, seq_stride, head_stride, h);
}

// `rule` (its window bounds) applied to a sequence of the given lengths: the diagonal follows the
// lengths under bottom-right alignment. Kernels that see many sequences (varlen) keep one rule and
// resize it per sequence.
FC_HOST_DEVICE VisibilityMask mask_for_lengths(VisibilityMask rule, MaskAlign align, int seqlen_q, int seqlen_k) {
  rule.seqlen_k = seqlen_k;
  rule.diag_offset = align == MaskAlign::kBottomRight ? seqlen_k - seqlen_q : 0;
  return rule;
}

// The visibility mask of one sequence (params already validated).
FC_HOST_DEVICE VisibilityMask make_mask(const AttentionParams& p, int seqlen_q, int seqlen_k) {
  VisibilityMask m;
  if (p.window_left >= 0) m.window_left = p.window_left;
  if (p.window_right >= 0) m.window_right = p.window_right;
  if (p.causal) m.window_right = 0;
  return mask_for_lengths(m, p.mask_align, seqlen_q, seqlen_k);
}

}  // namespace flashcore::attn
