// The naive GPU reference: fp32 math, any dtype in/out, every rule of the semantics, no tensor cores.
//
// It exists to check the fast paths on shapes too large for the fp64 CPU reference (S = 16k), so it
// favours obviously-right code over speed: a block owns kRows query rows of one (batch, head), walks
// the visible keys in chunks, materializes that chunk's scores in shared memory, and keeps the usual
// online-softmax state (running max, running sum, unnormalized O) in shared memory too.
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

constexpr int kRows = 8;          // query rows per block: one warp owns each row's reductions
constexpr int kThreads = kRows * 32;
constexpr int kKeyChunk = 128;    // keys scored per step

__device__ __forceinline__ float warp_max(float x) {
  for (int off = 16; off > 0; off >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, off));
  return x;
}
__device__ __forceinline__ float warp_sum(float x) {
  for (int off = 16; off > 0; off >>= 1) x += __shfl_xor_sync(0xffffffffu, x, off);
  return x;
}

// Dynamic shared memory layout (floats): q_rows[kRows][Dqk] | scores[kRows][kKeyChunk] |
// o_acc[kRows][Dv] | row_max[kRows] | row_sum[kRows] | rescale[kRows]
size_t smem_bytes(int dqk, int dv) {
  return sizeof(float) * (size_t(kRows) * dqk + size_t(kRows) * kKeyChunk + size_t(kRows) * dv + 3 * kRows);
}

template <typename T>
__global__ void __launch_bounds__(kThreads) naive_attention_kernel(const AttentionParams p) {
  extern __shared__ float smem[];
  const int dqk = p.head_dim_qk, dv = p.head_dim_v;
  float* q_rows = smem;
  float* scores = q_rows + kRows * dqk;
  float* o_acc = scores + kRows * kKeyChunk;
  float* row_max = o_acc + kRows * dv;
  float* row_sum = row_max + kRows;
  float* rescale = row_sum + kRows;

  const int b = blockIdx.z, h = blockIdx.y;
  const attn::SequenceExtent seq = attn::sequence_extent(p, b);
  const int row0 = blockIdx.x * kRows;
  if (row0 >= seq.seqlen_q) return;  // this sequence is shorter than the longest one
  const int rows = min(kRows, seq.seqlen_q - row0);
  const int h_kv = h / (p.heads_q / p.heads_kv);
  const attn::VisibilityMask mask = attn::make_mask(p, seq.seqlen_q, seq.seqlen_k);
  const attn::ScoreTransform score_fn = attn::make_score_transform(p, b, h, seq.seqlen_q, seq.seqlen_k);

  const int64_t q_batch = p.is_varlen() ? 0 : int64_t(b) * p.q_batch_stride;
  const int64_t o_batch = p.is_varlen() ? 0 : int64_t(b) * p.o_batch_stride;
  const T* q = static_cast<const T*>(p.q) + q_batch + (seq.q_start + row0) * p.q_seq_stride + h * p.q_head_stride;
  // Key j's rows: attn::kv_row_offset (dense, varlen, paged, batch-indexed alike).
  const T* k_pool = static_cast<const T*>(p.k);
  const T* v_pool = static_cast<const T*>(p.v);
  T* o = static_cast<T*>(p.o) + o_batch + (seq.q_start + row0) * p.o_seq_stride + h * p.o_head_stride;

  for (int idx = threadIdx.x; idx < kRows * dqk; idx += kThreads) {
    const int r = idx / dqk, d = idx % dqk;
    q_rows[idx] = r < rows ? to_float(q[int64_t(r) * p.q_seq_stride + d]) : 0.0f;
  }
  for (int idx = threadIdx.x; idx < kRows * dv; idx += kThreads) o_acc[idx] = 0.0f;
  if (threadIdx.x < kRows) {
    row_max[threadIdx.x] = -INFINITY;
    row_sum[threadIdx.x] = 0.0f;
  }
  __syncthreads();

  // Keys any row of this block can see; chunks outside are skipped entirely.
  const int key_begin = mask.first_key(row0);
  const int key_end = mask.last_key(row0 + rows - 1) + 1;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  for (int chunk = key_begin; chunk < key_end; chunk += kKeyChunk) {
    const int chunk_len = min(kKeyChunk, key_end - chunk);
    // 1. Scores of the chunk (masked entries are -inf). A warp reads each key row once, coalesced,
    //    and dots it with all kRows query rows, so K is read once per block rather than per row.
    for (int c = warp; c < kKeyChunk; c += kRows) {
      const int j = chunk + c;
      float dot[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r) dot[r] = 0.0f;
      if (c < chunk_len) {
        const T* k_row =
            k_pool + attn::kv_row_offset(p, p.k_batch_stride, p.k_seq_stride, p.k_head_stride, b, seq.k_start + j, h_kv);
        for (int d = lane; d < dqk; d += 32) {
          const float kd = to_float(k_row[d]);
#pragma unroll
          for (int r = 0; r < kRows; ++r) dot[r] = fmaf(q_rows[r * dqk + d], kd, dot[r]);
        }
      }
#pragma unroll
      for (int r = 0; r < kRows; ++r) dot[r] = warp_sum(dot[r]);
      if (lane < kRows) {
        const int r = lane, i = row0 + r;
        float dot_r = dot[0];
#pragma unroll
        for (int rr = 1; rr < kRows; ++rr) dot_r = r == rr ? dot[rr] : dot_r;
        const bool keep = r < rows && c < chunk_len && mask.visible(i, j);
        scores[r * kKeyChunk + c] = keep ? score_fn.apply(dot_r, i, j) : -INFINITY;
      }
    }
    __syncthreads();
    // 2. Online softmax state: warp `warp` owns row `warp`.
    {
      float* row_scores = scores + warp * kKeyChunk;
      float chunk_max = -INFINITY;
      for (int c = lane; c < kKeyChunk; c += 32) chunk_max = fmaxf(chunk_max, row_scores[c]);
      chunk_max = warp_max(chunk_max);
      const float old_max = row_max[warp];
      const float new_max = fmaxf(old_max, chunk_max);
      // A row that has seen no visible key yet keeps max -inf; exp(-inf - (-inf)) must not be NaN.
      const float safe_max = new_max == -INFINITY ? 0.0f : new_max;
      float chunk_sum = 0.0f;
      for (int c = lane; c < kKeyChunk; c += 32) {
        const float prob = expf(row_scores[c] - safe_max);
        row_scores[c] = prob;
        chunk_sum += prob;
      }
      chunk_sum = warp_sum(chunk_sum);
      __syncwarp();
      if (lane == 0) {
        const float alpha = expf(old_max - safe_max);  // old_max == -inf gives 0
        rescale[warp] = alpha;
        row_sum[warp] = row_sum[warp] * alpha + chunk_sum;
        row_max[warp] = new_max;
      }
    }
    __syncthreads();
    // 3. O = O * alpha + P V for the chunk: a thread owns column d of every row, so each V element
    //    is read once per block, coalesced across the warp.
    for (int d = threadIdx.x; d < dv; d += kThreads) {
      float acc[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r) acc[r] = o_acc[r * dv + d] * rescale[r];
      for (int c = 0; c < chunk_len; ++c) {
        const T* v_row = v_pool + attn::kv_row_offset(p, p.v_batch_stride, p.v_seq_stride, p.v_head_stride, b,
                                                      seq.k_start + chunk + c, h_kv);
        const float vd = to_float(v_row[d]);
#pragma unroll
        for (int r = 0; r < kRows; ++r) acc[r] = fmaf(scores[r * kKeyChunk + c], vd, acc[r]);
      }
#pragma unroll
      for (int r = 0; r < kRows; ++r) o_acc[r * dv + d] = acc[r];
    }
    __syncthreads();
  }

  // Epilogue: normalize; rows with no visible key get O = 0 and LSE = -inf.
  for (int idx = threadIdx.x; idx < kRows * dv; idx += kThreads) {
    const int r = idx / dv, d = idx % dv;
    if (r >= rows) continue;
    const float sum = row_sum[r];
    const float out = sum > 0.0f ? o_acc[idx] / sum : 0.0f;
    o[int64_t(r) * p.o_seq_stride + d] = from_float<T>(out);
  }
  if (p.lse != nullptr && threadIdx.x < rows) {
    const int r = threadIdx.x;
    const float sum = row_sum[r];
    const float lse = sum > 0.0f ? row_max[r] + logf(sum) : -INFINITY;
    const int64_t lse_batch = p.is_varlen() ? 0 : int64_t(b) * p.lse_batch_stride;
    p.lse[lse_batch + int64_t(h) * p.lse_head_stride + seq.q_start + row0 + r] = lse;
  }
}

template <typename T>
Status launch(const AttentionParams& p, cudaStream_t stream) {
  const size_t smem = smem_bytes(p.head_dim_qk, p.head_dim_v);
  auto kernel = naive_attention_kernel<T>;
  if (smem > 48 * 1024) {
    FC_CUDA_RETURN(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  }
  const int max_rows = p.seqlen_q;  // varlen: max_seqlen_q
  dim3 grid((max_rows + kRows - 1) / kRows, p.heads_q, p.batch);
  kernel<<<grid, kThreads, smem, stream>>>(p);
  FC_CHECK_LAUNCH("naive_attention_kernel");
  return Status::Ok();
}

std::string naive_supports(const AttentionParams& p, const DeviceInfo& d) {
  if (d.pointers_on_host) return "the naive GPU path needs device pointers (q is host memory)";
  if (!d.has_device) return "no CUDA device";
  if (std::string why = missing_code_reason("naive GPU", d.cc_major, d.cc_minor); !why.empty()) return why;
  if (smem_bytes(p.head_dim_qk, p.head_dim_v) > d.max_smem_per_block_optin)
    return "head dims need more shared memory than the device offers";
  if (p.seqlen_q > 65535 * kRows) return "seqlen_q too large for the naive path's grid";
  if (p.heads_q > 65535 || p.batch > 65535) return "heads_q or batch exceeds the naive path's grid";
  return "";
}

Status naive_run(const AttentionParams& p, const DeviceInfo&, cudaStream_t stream) {
  switch (p.dtype) {
    case DType::kFloat16: return launch<__half>(p, stream);
    case DType::kBFloat16: return launch<__nv_bfloat16>(p, stream);
    case DType::kFloat32: return launch<float>(p, stream);
  }
  return Status::InvalidArgument("dtype: unknown value");
}

}  // namespace

PathOps naive_gpu_path() { return {KernelPath::kNaiveGpu, &naive_supports, &naive_run}; }

}  // namespace flashcore::detail
