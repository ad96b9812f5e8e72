// The naive GPU backward: fp32 math, any dtype in and out, every rule of the semantics, no tensor
// cores, no atomics (so it is deterministic run to run). Three kernels:
//   row_dot_kernel   D_i = dO_i . O_i per (batch, query head, row), into a stream-ordered workspace;
//   dq_kernel        one block per query row: walks the row's visible keys, dQ_i = scale sum_j dS_ij k_j;
//   dkdv_kernel      one block per key: walks the rows of every query head of its KV head's group
//                    that see it, dK_j = scale sum dS_ij q_i, dV_j = sum P_ij dO_i.
// P_ij = exp(s_ij - lse_i) from the forward's LSE, dS_ij = P_ij (dO_i . v_j - D_i) softcap'(s_ij).
// Each block's four warps take every fourth key (row) and keep their own partial sums in shared
// memory, added in warp order at the end: the summation order is fixed.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>

#include "api/built_kernels.hpp"
#include "api/paths.hpp"
#include "attention/mask.hpp"
#include "attention/score_transform.hpp"
#include "common/cuda_check.hpp"
#include "common/device_dtype.cuh"

namespace flashcore::detail {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;

__device__ __forceinline__ float warp_sum(float x) {
  for (int off = 16; off > 0; off >>= 1) x += __shfl_xor_sync(0xffffffffu, x, off);
  return x;
}

template <typename T>
__device__ float dot_row(const T* a, const float* b, int n, int lane) {
  float acc = 0.0f;
  for (int d = lane; d < n; d += 32) acc = fmaf(to_float(a[d]), b[d], acc);
  return warp_sum(acc);
}

// D into row_d[(b * Hq + h) * max_seqlen_q + i]. One warp per row.
template <typename T>
__global__ void __launch_bounds__(32) row_dot_kernel(const BackwardParams bp, float* row_d) {
  const AttentionParams& p = bp.forward;
  const int i = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const attn::SequenceExtent seq = attn::sequence_extent(p, b);
  if (i >= seq.seqlen_q) return;
  const bool packed_q = p.is_varlen();
  const T* o = static_cast<const T*>(p.o) + attn::token_offset(packed_q, p.o_batch_stride, p.o_seq_stride, p.o_head_stride, b, seq.q_start + i, h);
  const T* dout = static_cast<const T*>(bp.dout) +
                  attn::token_offset(packed_q, bp.dout_batch_stride, bp.dout_seq_stride, bp.dout_head_stride, b, seq.q_start + i, h);
  float acc = 0.0f;
  for (int d = threadIdx.x; d < p.head_dim_v; d += 32) acc = fmaf(to_float(o[d]), to_float(dout[d]), acc);
  acc = warp_sum(acc);
  if (threadIdx.x == 0) row_d[(int64_t(b) * p.heads_q + h) * p.seqlen_q + i] = acc;
}

// dS_ij for one (row, key) pair from the warp's dot products; 0 where the key is invisible.
__device__ __forceinline__ float dscore(const attn::ScoreTransform& t, float qk, float dprob, float lse, float row_d,
                                        int i, int j, float* prob) {
  const float capped = t.softcapped(qk);
  *prob = expf(capped - t.alibi_bias<float>(i, j) - lse);
  return *prob * (dprob - row_d) * t.softcap_derivative(capped) * t.scale;
}

// Shared memory (floats): q_i [Dqk] | dO_i [Dv] | per-warp dQ partials [kWarps][Dqk].
template <typename T>
__global__ void __launch_bounds__(kThreads) dq_kernel(const BackwardParams bp, const float* row_d) {
  extern __shared__ float smem[];
  const AttentionParams& p = bp.forward;
  const int dqk = p.head_dim_qk, dv = p.head_dim_v;
  float* q = smem;
  float* dout = q + dqk;
  float* partial = dout + dv;
  const int i = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const attn::SequenceExtent seq = attn::sequence_extent(p, b);
  if (i >= seq.seqlen_q) return;
  const bool packed_q = p.is_varlen(), packed_k = p.cu_seqlens_k != nullptr;
  const int h_kv = h / (p.heads_q / p.heads_kv);
  const attn::VisibilityMask mask = attn::make_mask(p, seq.seqlen_q, seq.seqlen_k);
  const attn::ScoreTransform t = attn::make_score_transform(p, b, h, seq.seqlen_q, seq.seqlen_k);
  const T* q_row = static_cast<const T*>(p.q) + attn::token_offset(packed_q, p.q_batch_stride, p.q_seq_stride, p.q_head_stride, b, seq.q_start + i, h);
  const T* do_row = static_cast<const T*>(bp.dout) +
                    attn::token_offset(packed_q, bp.dout_batch_stride, bp.dout_seq_stride, bp.dout_head_stride, b, seq.q_start + i, h);
  for (int d = threadIdx.x; d < dqk; d += kThreads) q[d] = to_float(q_row[d]);
  for (int d = threadIdx.x; d < dv; d += kThreads) dout[d] = to_float(do_row[d]);
  for (int d = threadIdx.x; d < kWarps * dqk; d += kThreads) partial[d] = 0.0f;
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t lse_batch = packed_q ? 0 : int64_t(b) * p.lse_batch_stride;
  const float lse = p.lse[lse_batch + int64_t(h) * p.lse_head_stride + seq.q_start + i];
  const float d_i = row_d[(int64_t(b) * p.heads_q + h) * p.seqlen_q + i];
  const int first = mask.first_key(i), last = mask.last_key(i);
  for (int j = first + warp; j <= last; j += kWarps) {
    const T* k_row = static_cast<const T*>(p.k) + attn::token_offset(packed_k, p.k_batch_stride, p.k_seq_stride, p.k_head_stride, b, seq.k_start + j, h_kv);
    const T* v_row = static_cast<const T*>(p.v) + attn::token_offset(packed_k, p.v_batch_stride, p.v_seq_stride, p.v_head_stride, b, seq.k_start + j, h_kv);
    float prob;
    const float ds = dscore(t, dot_row(k_row, q, dqk, lane), dot_row(v_row, dout, dv, lane), lse, d_i, i, j, &prob);
    for (int d = lane; d < dqk; d += 32) partial[warp * dqk + d] = fmaf(ds, to_float(k_row[d]), partial[warp * dqk + d]);
  }
  __syncthreads();
  T* dq = static_cast<T*>(bp.dq) + attn::token_offset(packed_q, bp.dq_batch_stride, bp.dq_seq_stride, bp.dq_head_stride, b, seq.q_start + i, h);
  for (int d = threadIdx.x; d < dqk; d += kThreads) {
    float acc = 0.0f;
    for (int w = 0; w < kWarps; ++w) acc += partial[w * dqk + d];
    dq[d] = from_float<T>(acc);  // 0 for a row with no visible key
  }
}

// Shared memory (floats): k_j [Dqk] | v_j [Dv] | per-warp dK partials [kWarps][Dqk] | dV partials [kWarps][Dv].
template <typename T>
__global__ void __launch_bounds__(kThreads) dkdv_kernel(const BackwardParams bp, const float* row_d) {
  extern __shared__ float smem[];
  const AttentionParams& p = bp.forward;
  const int dqk = p.head_dim_qk, dv = p.head_dim_v;
  float* k = smem;
  float* v = k + dqk;
  float* dk_part = v + dv;
  float* dv_part = dk_part + kWarps * dqk;
  const int j = blockIdx.x, h_kv = blockIdx.y, b = blockIdx.z;
  const attn::SequenceExtent seq = attn::sequence_extent(p, b);
  // Keys of the tensor that belong to this sequence: its cu_seqlens_k range (or the dense Sk);
  // those past seqused_k were never read and get zero gradients.
  const int keys_in_tensor = p.cu_seqlens_k != nullptr ? p.cu_seqlens_k[b + 1] - p.cu_seqlens_k[b] : p.seqlen_k;
  if (j >= keys_in_tensor) return;
  const bool packed_q = p.is_varlen(), packed_k = p.cu_seqlens_k != nullptr;
  const bool used = j < seq.seqlen_k;
  const T* k_row = static_cast<const T*>(p.k) + attn::token_offset(packed_k, p.k_batch_stride, p.k_seq_stride, p.k_head_stride, b, seq.k_start + j, h_kv);
  const T* v_row = static_cast<const T*>(p.v) + attn::token_offset(packed_k, p.v_batch_stride, p.v_seq_stride, p.v_head_stride, b, seq.k_start + j, h_kv);
  for (int d = threadIdx.x; d < dqk; d += kThreads) k[d] = to_float(k_row[d]);
  for (int d = threadIdx.x; d < dv; d += kThreads) v[d] = to_float(v_row[d]);
  for (int d = threadIdx.x; d < kWarps * (dqk + dv); d += kThreads) dk_part[d] = 0.0f;
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = p.heads_q / p.heads_kv;
  const attn::VisibilityMask mask = attn::make_mask(p, seq.seqlen_q, seq.seqlen_k);
  const int64_t lse_batch = packed_q ? 0 : int64_t(b) * p.lse_batch_stride;
  for (int g = 0; used && g < group; ++g) {
    const int h = h_kv * group + g;
    const attn::ScoreTransform t = attn::make_score_transform(p, b, h, seq.seqlen_q, seq.seqlen_k);
    for (int i = warp; i < seq.seqlen_q; i += kWarps) {
      if (!mask.visible(i, j)) continue;
      const T* q_row = static_cast<const T*>(p.q) + attn::token_offset(packed_q, p.q_batch_stride, p.q_seq_stride, p.q_head_stride, b, seq.q_start + i, h);
      const T* do_row = static_cast<const T*>(bp.dout) +
                        attn::token_offset(packed_q, bp.dout_batch_stride, bp.dout_seq_stride, bp.dout_head_stride, b, seq.q_start + i, h);
      const float lse = p.lse[lse_batch + int64_t(h) * p.lse_head_stride + seq.q_start + i];
      const float d_i = row_d[(int64_t(b) * p.heads_q + h) * p.seqlen_q + i];
      float prob;
      const float ds = dscore(t, dot_row(q_row, k, dqk, lane), dot_row(do_row, v, dv, lane), lse, d_i, i, j, &prob);
      for (int d = lane; d < dqk; d += 32) dk_part[warp * dqk + d] = fmaf(ds, to_float(q_row[d]), dk_part[warp * dqk + d]);
      for (int d = lane; d < dv; d += 32) dv_part[warp * dv + d] = fmaf(prob, to_float(do_row[d]), dv_part[warp * dv + d]);
    }
  }
  __syncthreads();
  T* dk = static_cast<T*>(bp.dk) + attn::token_offset(packed_k, bp.dk_batch_stride, bp.dk_seq_stride, bp.dk_head_stride, b, seq.k_start + j, h_kv);
  T* dvo = static_cast<T*>(bp.dv) + attn::token_offset(packed_k, bp.dv_batch_stride, bp.dv_seq_stride, bp.dv_head_stride, b, seq.k_start + j, h_kv);
  for (int d = threadIdx.x; d < dqk; d += kThreads) {
    float acc = 0.0f;
    for (int w = 0; w < kWarps; ++w) acc += dk_part[w * dqk + d];
    dk[d] = from_float<T>(acc);
  }
  for (int d = threadIdx.x; d < dv; d += kThreads) {
    float acc = 0.0f;
    for (int w = 0; w < kWarps; ++w) acc += dv_part[w * dv + d];
    dvo[d] = from_float<T>(acc);
  }
}

size_t dq_smem(int dqk, int dv) { return sizeof(float) * (size_t(dqk) * (1 + kWarps) + dv); }
size_t dkdv_smem(int dqk, int dv) { return sizeof(float) * (size_t(dqk) + dv) * (1 + kWarps); }

template <typename T>
Status launch(const BackwardParams& bp, cudaStream_t stream) {
  const AttentionParams& p = bp.forward;
  const size_t dq_bytes = dq_smem(p.head_dim_qk, p.head_dim_v), dkdv_bytes = dkdv_smem(p.head_dim_qk, p.head_dim_v);
  if (dq_bytes > 48 * 1024) {
    FC_CUDA_RETURN(cudaFuncSetAttribute(dq_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(dq_bytes)));
  }
  if (dkdv_bytes > 48 * 1024) {
    FC_CUDA_RETURN(cudaFuncSetAttribute(dkdv_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(dkdv_bytes)));
  }
  // D per (batch, query head, row up to max_seqlen_q): stream-ordered, so graph capture works.
  float* row_d = nullptr;
  const size_t d_bytes = sizeof(float) * size_t(p.batch) * p.heads_q * size_t(std::max(p.seqlen_q, 1));
  FC_CUDA_RETURN(cudaMallocAsync(reinterpret_cast<void**>(&row_d), d_bytes, stream));
  Status status = Status::Ok();
  row_dot_kernel<T><<<dim3(p.seqlen_q, p.heads_q, p.batch), 32, 0, stream>>>(bp, row_d);
  status = cuda_status(cudaGetLastError(), "naive row_dot_kernel");
  if (status.ok()) {
    dq_kernel<T><<<dim3(p.seqlen_q, p.heads_q, p.batch), kThreads, dq_bytes, stream>>>(bp, row_d);
    status = cuda_status(cudaGetLastError(), "naive dq_kernel");
  }
  // Keys: the dense Sk, or (varlen) the longest cu_seqlens_k range, which validate() bounds by total_k.
  const int64_t max_keys = p.cu_seqlens_k != nullptr ? p.total_k : p.seqlen_k;
  if (status.ok() && max_keys > 0) {
    dkdv_kernel<T><<<dim3(unsigned(max_keys), p.heads_kv, p.batch), kThreads, dkdv_bytes, stream>>>(bp, row_d);
    status = cuda_status(cudaGetLastError(), "naive dkdv_kernel");
  }
  const cudaError_t freed = cudaFreeAsync(row_d, stream);
  if (status.ok()) status = cuda_status(freed, "naive backward: freeing the workspace");
  return status;
}

std::string naive_backward_supports(const BackwardParams& bp, const DeviceInfo& d) {
  const AttentionParams& p = bp.forward;
  if (d.pointers_on_host || !d.has_device) return "the naive GPU backward needs device pointers on a CUDA device";
  if (std::string why = missing_code_reason("naive GPU", d.cc_major, d.cc_minor); !why.empty()) return why;
  if (std::max(dq_smem(p.head_dim_qk, p.head_dim_v), dkdv_smem(p.head_dim_qk, p.head_dim_v)) > d.max_smem_per_block_optin) {
    return "head dims need more shared memory than the device offers";
  }
  if (p.heads_q > 65535 || p.batch > 65535) return "heads_q or batch exceeds the naive path's grid (65535)";
  return "";
}

Status naive_backward_run(const BackwardParams& bp, const DeviceInfo&, cudaStream_t stream) {
  switch (bp.forward.dtype) {
    case DType::kFloat16: return launch<__half>(bp, stream);
    case DType::kBFloat16: return launch<__nv_bfloat16>(bp, stream);
    case DType::kFloat32: return launch<float>(bp, stream);
  }
  return Status::InvalidArgument("dtype: unknown value");
}

}  // namespace

BackwardOps naive_gpu_backward_path() {
  return {KernelPath::kNaiveGpu, &naive_backward_supports, &naive_backward_run};
}

}  // namespace flashcore::detail
