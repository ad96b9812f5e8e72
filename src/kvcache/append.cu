// attention_with_kvcache's work before its attention, one kernel: the append of k_new / v_new into
// the cache (rotating k_new), the rotation of q into a temporary, and the per-entry key counts after
// the append. One block per row (entry, token, head), its threads striding over the head dim; the
// grid strides over rows beyond kMaxBlocks. The rules of each element (target row, clamping, rotary
// position, the rotation) are rotary.hpp's, so the host implementation writes the same bits. The
// cache is addressed only through attn::kv_row_offset (dense, batch-indexed and paged caches alike).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "attention/mask.hpp"
#include "common/cuda_check.hpp"
#include "common/device_dtype.cuh"
#include "kvcache/append.hpp"
#include "kvcache/rotary.hpp"

namespace flashcore::kvcache {
namespace {

constexpr int kThreads = 128;
constexpr int64_t kMaxBlocks = int64_t(1) << 16;

unsigned grid_for(int64_t rows) { return unsigned(rows < kMaxBlocks ? rows : kMaxBlocks); }

// dst[0, dim) = src[0, dim), the first rotary_dim features rotated by the cos/sin row at `pos` when
// `rotary`; the other features are copied bit for bit. src and dst never alias.
template <typename T>
FC_DEVICE void write_row(const KvCacheParams& p, const T* __restrict__ src, T* __restrict__ dst, int dim, bool rotary,
                         int64_t pos) {
  const T* cos_row = static_cast<const T*>(p.rotary_cos) + pos * (p.rotary_dim / 2);
  const T* sin_row = static_cast<const T*>(p.rotary_sin) + pos * (p.rotary_dim / 2);
  for (int d = threadIdx.x; d < dim; d += blockDim.x) {
    if (rotary && d < p.rotary_dim) {
      const RotaryPair r = rotary_pair(d, p.rotary_dim, p.rotary_interleaved);
      dst[d] = from_float<T>(rotate(to_float(src[d]), to_float(src[r.partner]), to_float(cos_row[r.m]),
                                    to_float(sin_row[r.m]), r.first));
    } else {
      dst[d] = src[d];
    }
  }
}

// Writes new key row `job` (job = (b * seqlen_new + i) * heads_kv + h) into the cache.
template <typename T>
FC_DEVICE void append_row(const KvCacheParams& p, int64_t job, bool rotary) {
  const AttentionParams& a = p.attention;
  const int h = int(job % a.heads_kv);
  const int64_t token = job / a.heads_kv;
  const int i = int(token % p.seqlen_new);
  const int b = int(token / p.seqlen_new);
  const int64_t row = cached_rows(p, b) + i;
  if (!new_key_written(p, row)) return;  // the same answer for the whole block
  const T* k_src = static_cast<const T*>(p.k_new) + b * p.k_new_batch_stride + i * p.k_new_seq_stride +
                   h * p.k_new_head_stride;
  const T* v_src = static_cast<const T*>(p.v_new) + b * p.v_new_batch_stride + i * p.v_new_seq_stride +
                   h * p.v_new_head_stride;
  T* k_dst = const_cast<T*>(static_cast<const T*>(a.k)) +
             attn::kv_row_offset(a, a.k_batch_stride, a.k_seq_stride, a.k_head_stride, b, row, h);
  T* v_dst = const_cast<T*>(static_cast<const T*>(a.v)) +
             attn::kv_row_offset(a, a.v_batch_stride, a.v_seq_stride, a.v_head_stride, b, row, h);
  write_row(p, k_src, k_dst, a.head_dim_qk, rotary, row);
  write_row(p, v_src, v_dst, a.head_dim_v, false, 0);
}

// Writes query row `job` (job = (b * Sq + i) * Hq + h) of q, rotated, into q_rot.
template <typename T>
FC_DEVICE void rotate_q_row(const KvCacheParams& p, T* q_rot, int64_t job) {
  const AttentionParams& a = p.attention;
  const int h = int(job % a.heads_q);
  const int64_t token = job / a.heads_q;
  const int i = int(token % a.seqlen_q);
  const int b = int(token / a.seqlen_q);
  const T* src = static_cast<const T*>(a.q) + b * a.q_batch_stride + i * a.q_seq_stride + h * a.q_head_stride;
  write_row(p, src, q_rot + job * a.head_dim_qk, a.head_dim_qk, true, query_position(p, b, i));
}

// Everything a call does before its attention, in one grid: rows [0, q_rows) are q's rotation
// (q_rot), rows [q_rows, q_rows + new_rows) the new keys' append, and the first threads write the
// key counts (keys). The three read only the caller's arrays and write disjoint buffers.
template <typename T>
__global__ void __launch_bounds__(kThreads) prepare_kernel(const KvCacheParams p, int32_t* keys, T* q_rot,
                                                           int64_t q_rows, int64_t new_rows) {
  if (keys != nullptr) {
    for (int b = int(blockIdx.x * blockDim.x + threadIdx.x); b < p.attention.batch; b += int(gridDim.x * blockDim.x)) {
      keys[b] = keys_after_append(p, b);
    }
  }
  const bool rotary = p.rotary_cos != nullptr;
  for (int64_t job = blockIdx.x; job < q_rows + new_rows; job += gridDim.x) {
    if (job < q_rows) {
      rotate_q_row(p, q_rot, job);
    } else {
      append_row<T>(p, job - q_rows, rotary);
    }
  }
}

template <typename T>
Status prepare_typed(const KvCacheParams& p, int32_t* keys, void* q_rot, cudaStream_t stream) {
  const AttentionParams& a = p.attention;
  const int64_t q_rows = q_rot != nullptr ? int64_t(a.batch) * a.seqlen_q * a.heads_q : 0;
  const int64_t new_rows = p.k_new != nullptr ? int64_t(a.batch) * p.seqlen_new * a.heads_kv : 0;
  const int64_t key_blocks = keys != nullptr ? (a.batch + kThreads - 1) / kThreads : 0;
  const int64_t blocks = q_rows + new_rows > key_blocks ? q_rows + new_rows : key_blocks;
  if (blocks == 0) return Status::Ok();
  prepare_kernel<T><<<grid_for(blocks), kThreads, 0, stream>>>(p, keys, static_cast<T*>(q_rot), q_rows, new_rows);
  FC_CHECK_LAUNCH("kvcache prepare_kernel");
  return Status::Ok();
}

}  // namespace

Status launch_prepare(const KvCacheParams& p, int32_t* keys, void* q_rot, cudaStream_t stream) {
  switch (p.attention.dtype) {
    case DType::kFloat16: return prepare_typed<__half>(p, keys, q_rot, stream);
    case DType::kBFloat16: return prepare_typed<__nv_bfloat16>(p, keys, q_rot, stream);
    case DType::kFloat32: return prepare_typed<float>(p, keys, q_rot, stream);
  }
  return Status::Internal("kvcache prepare: unknown dtype");
}

}  // namespace flashcore::kvcache
