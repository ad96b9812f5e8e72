#include "backward/varlen_tail.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "common/cuda_check.hpp"

namespace flashcore::backward {

namespace {

// One gradient tensor [total, heads, dim] (seq and head strides in elements, the dim contiguous).
struct GradRows {
  void* base;
  int64_t seq_stride, head_stride;
  int heads, dim;
  int64_t total;
  const int32_t* cu_seqlens;  // [batch + 1]; rows from cu_seqlens[batch] on are the tail
};

// Grid-stride over the tail's (row, head) pairs; each pair's dim contiguous elements of elem_bytes.
// A tail past `total` (a cu_seqlens[B] that breaks the trusted rule) zeroes nothing.
template <typename Word>
__global__ void zero_tail_kernel(GradRows g, int batch) {
  const int64_t first = max(int64_t(0), int64_t(g.cu_seqlens[batch]));
  if (first >= g.total) return;
  const int64_t pairs = (g.total - first) * g.heads;
  for (int64_t pair = blockIdx.x * int64_t(blockDim.y) + threadIdx.y; pair < pairs;
       pair += int64_t(gridDim.x) * blockDim.y) {
    const int64_t row = first + pair / g.heads;
    Word* dst = static_cast<Word*>(g.base) + row * g.seq_stride + (pair % g.heads) * g.head_stride;
    for (int d = threadIdx.x; d < g.dim; d += blockDim.x) dst[d] = Word(0);
  }
}

constexpr int kTailBlocks = 64;  // enough for any tail a packing leaves; a call without one returns at once

Status zero_on_device(const GradRows& g, int batch, int elem_bytes, cudaStream_t stream, const char* name) {
  const dim3 block(32, 8);
  if (elem_bytes == 4) {
    zero_tail_kernel<uint32_t><<<kTailBlocks, block, 0, stream>>>(g, batch);
  } else {
    zero_tail_kernel<uint16_t><<<kTailBlocks, block, 0, stream>>>(g, batch);
  }
  return cuda_status(cudaGetLastError(), (std::string("zeroing the varlen tail of ") + name).c_str());
}

void zero_on_host(const GradRows& g, int batch, int elem_bytes) {
  const int64_t first = std::max<int64_t>(0, g.cu_seqlens[batch]);
  for (int64_t row = first; row < g.total; ++row)
    for (int h = 0; h < g.heads; ++h) {
      char* dst = static_cast<char*>(g.base) + (row * g.seq_stride + h * g.head_stride) * elem_bytes;
      std::memset(dst, 0, size_t(g.dim) * elem_bytes);
    }
}

}  // namespace

Status zero_varlen_gradient_tails(const BackwardParams& bp, bool on_host, cudaStream_t stream) {
  const AttentionParams& p = bp.forward;
  if (!p.is_varlen()) return Status::Ok();
  const int elem_bytes = dtype_size(p.dtype);
  const GradRows rows[3] = {
      {bp.dq, bp.dq_seq_stride, bp.dq_head_stride, p.heads_q, p.head_dim_qk, p.total_q, p.cu_seqlens_q},
      {bp.dk, bp.dk_seq_stride, bp.dk_head_stride, p.heads_kv, p.head_dim_qk, p.total_k, p.cu_seqlens_k},
      {bp.dv, bp.dv_seq_stride, bp.dv_head_stride, p.heads_kv, p.head_dim_v, p.total_k, p.cu_seqlens_k}};
  const char* names[3] = {"dq", "dk", "dv"};
  for (int t = 0; t < 3; ++t) {
    if (rows[t].total == 0 || rows[t].heads == 0 || rows[t].dim == 0) continue;
    if (on_host) {
      zero_on_host(rows[t], p.batch, elem_bytes);
    } else {
      FC_RETURN_IF_ERROR(zero_on_device(rows[t], p.batch, elem_bytes, stream, names[t]));
    }
  }
  return Status::Ok();
}

}  // namespace flashcore::backward
