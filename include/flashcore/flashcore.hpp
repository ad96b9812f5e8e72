// flashcore — fused multi-head attention for NVIDIA GPUs.
//
// The C++ API: one plain parameter struct (`AttentionParams`) with explicit strides, one entry point
// (`attention_forward`) and one capability query (`supports`). The struct is trivially copyable and
// is handed unchanged to every kernel path, so the API, the CPU reference and the GPU kernels all read
// the same fields. Semantics (masks, softcap, ALiBi, varlen, LSE) are specified in docs/semantics.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

// Members of AttentionParams that kernels may call are host-device under nvcc.
#if defined(__CUDACC__)
#define FLASHCORE_HOST_DEVICE __host__ __device__
#else
#define FLASHCORE_HOST_DEVICE
#endif

namespace flashcore {

// ---------------------------------------------------------------------------------------------
// Status
// ---------------------------------------------------------------------------------------------
enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument = 1,  // the call breaks a rule of the API; the message names the argument
  kUnsupported = 2,      // valid call, but no kernel path of this build/device computes it
  kCudaError = 3,        // a CUDA runtime call failed
  kInternal = 4,
};

struct Status {
  StatusCode code = StatusCode::kOk;
  std::string message;

  bool ok() const { return code == StatusCode::kOk; }
  static Status Ok() { return {}; }
  static Status InvalidArgument(std::string msg) { return {StatusCode::kInvalidArgument, std::move(msg)}; }
  static Status Unsupported(std::string msg) { return {StatusCode::kUnsupported, std::move(msg)}; }
  static Status CudaError(std::string msg) { return {StatusCode::kCudaError, std::move(msg)}; }
  static Status Internal(std::string msg) { return {StatusCode::kInternal, std::move(msg)}; }
};

const char* status_code_name(StatusCode code);

// ---------------------------------------------------------------------------------------------
// Parameters
// ---------------------------------------------------------------------------------------------
enum class DType : int { kFloat16 = 0, kBFloat16 = 1, kFloat32 = 2 };

const char* dtype_name(DType dtype);
int dtype_size(DType dtype);

// Which diagonal a causal mask (and a sliding window) is aligned to when Sq != Sk.
//   kBottomRight: query i sees keys j <= i + Sk - Sq  (flash-attn's `causal=True`)
//   kTopLeft:     query i sees keys j <= i            (PyTorch SDPA's `is_causal=True`)
enum class MaskAlign : int { kBottomRight = 0, kTopLeft = 1 };

// Kernel paths, fastest first. kAuto picks the first path whose `supports()` says yes.
enum class KernelPath : int { kAuto = 0, kSm90 = 1, kSm80 = 2, kNaiveGpu = 3, kCpuReference = 4 };

const char* kernel_path_name(KernelPath path);

// "No limit" for window_left / window_right.
inline constexpr int kWindowInfinite = -1;

// Overrides of the sm90 forward plan's choices (src/sm90/fwd/plan.hpp), for tests and tuning
// (flashcore-bench --override). Each default leaves the plan's own rule; a forced choice that the
// call or this build cannot take is an Unsupported error. Other paths ignore them.
struct ForwardOverrides {
  int schedule = -1;         // 0: the serial schedule (a tuning kernel), 1: overlap
  int block_n = 0;           // the tile table's kBlockN, or its kAltBlockN (a tuning kernel)
  int always_rescale = -1;   // 0: rescale O only when a row's max moved, 1: after every KV block
  int cluster = -1;          // 0: never the cluster kernel, 1: whenever the call allows it
  int long_tiles = -1;       // 0: never the long tile shape, 1: whenever the call allows it
  int short_tiles = -1;      // 0: never the short tile shape, 1: for every masked call
  int pair_tiles = -1;       // 0: never pair uneven tiles, 1: always pair them
  int heads_per_group = 0;   // > 0: that many (batch, head)s per scheduler group
  int stream_k = -1;         // 0: never a stream-K tail, 1: whenever the last wave is partial
  int max_grid_units = 0;    // > 0: at most this many CTAs (clusters) in the persistent grid
};

// Layout (flash-attn's):  q [B, Sq, Hq, Dqk]   k [B, Sk, Hkv, Dqk]   v [B, Sk, Hkv, Dv]
//                         o [B, Sq, Hq, Dv]    lse [B, Hq, Sq] float32
// Strides are in elements; the last dimension of q, k, v, o must be contiguous (stride 1).
// PyTorch's [B, H, S, D] tensors are the same data with other strides.
//
// Varlen (cu_seqlens_q != nullptr): sequences are packed along one token axis,
//   q [total_q, Hq, Dqk], k/v [total_k, Hkv, D], o [total_q, Hq, Dv], lse [Hq, total_q];
//   batch strides are ignored; sequence b spans tokens [cu_seqlens_q[b], cu_seqlens_q[b+1]).
//   `seqlen_q`/`seqlen_k` then hold max_seqlen_q/k (an upper bound over the batch).
struct AttentionParams {
  // ---- tensors -------------------------------------------------------------------------------
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  float* lse = nullptr;  // optional; natural-log log-sum-exp per (b, h, i); -inf for empty rows

  int64_t q_batch_stride = 0, q_seq_stride = 0, q_head_stride = 0;
  int64_t k_batch_stride = 0, k_seq_stride = 0, k_head_stride = 0;
  int64_t v_batch_stride = 0, v_seq_stride = 0, v_head_stride = 0;
  int64_t o_batch_stride = 0, o_seq_stride = 0, o_head_stride = 0;
  int64_t lse_batch_stride = 0, lse_head_stride = 0;  // lse seq stride is 1

  // ---- sizes ---------------------------------------------------------------------------------
  int batch = 0;
  int seqlen_q = 0;  // Sq (varlen: max_seqlen_q)
  int seqlen_k = 0;  // Sk (varlen: max_seqlen_k)
  int heads_q = 0;   // Hq
  int heads_kv = 0;  // Hkv; Hq % Hkv == 0 (GQA/MQA)
  int head_dim_qk = 0;
  int head_dim_v = 0;
  DType dtype = DType::kFloat16;

  // ---- score function ------------------------------------------------------------------------
  float softmax_scale = 0.0f;   // 0 means the default 1/sqrt(head_dim_qk)
  float softcap = 0.0f;         // > 0: s = softcap * tanh(s / softcap)
  const float* alibi_slopes = nullptr;  // fp32 [Hq] or [B, Hq]; s -= slope * |i + Sk - Sq - j|
  int64_t alibi_batch_stride = 0;       // 0: one slope vector for every batch entry

  // ---- visibility ----------------------------------------------------------------------------
  bool causal = false;  // same as window_right = 0
  MaskAlign mask_align = MaskAlign::kBottomRight;
  int window_left = kWindowInfinite;
  int window_right = kWindowInfinite;

  // ---- varlen --------------------------------------------------------------------------------
  const int32_t* cu_seqlens_q = nullptr;  // [B+1], monotone, starts at 0
  const int32_t* cu_seqlens_k = nullptr;  // [B+1], monotone, starts at 0
  const int32_t* seqused_k = nullptr;     // [B], optional: only the first seqused_k[b] keys count
  int64_t total_q = 0;                    // varlen: rows of q/o (cu_seqlens_q[B] must be <= this)
  int64_t total_k = 0;                    // varlen: rows of k/v
  // Device-resident cu_seqlens/seqused_k are copied to the host and checked (one stream sync) when
  // true. Set false in hot loops to trust them (no sync); their bounds are then the caller's promise.
  // (While the stream captures a CUDA graph they are never read.)
  bool check_device_metadata = true;

  // ---- dispatch ------------------------------------------------------------------------------
  KernelPath path = KernelPath::kAuto;
  int num_splits = 0;  // reserved (split-KV); 0 = heuristic
  const ForwardOverrides* overrides = nullptr;  // tests and tuning only (ForwardOverrides)

  FLASHCORE_HOST_DEVICE bool is_varlen() const { return cu_seqlens_q != nullptr; }
  // Effective scale (resolves the 0 = default convention).
  float effective_scale() const;
};

// Fills the strides of a dense, contiguous [B, S, H, D] problem (flash-attn layout) and
// lse [B, Hq, Sq]. Pointers, sizes and dtype must already be set.
void set_dense_strides(AttentionParams& params);

// ---------------------------------------------------------------------------------------------
// Entry points
// ---------------------------------------------------------------------------------------------

// Checks every rule of the API. Reads cu_seqlens/seqused_k when they are host-readable (or copies
// them from the device when `stream` is not capturing a graph). Writes nothing.
Status validate(const AttentionParams& params, cudaStream_t stream = nullptr);

// Computes attention. Device pointers run on `stream` with the fastest path that supports the call;
// host pointers (or a machine with no GPU) run the fp64 CPU reference synchronously.
// On any error nothing is written and the status names the argument and the rule.
// Device memory: the sm90 path may take a small per-call workspace from the device's stream-ordered
// pool (cudaMallocAsync on `stream`, freed on it after the kernel; allowed during graph capture):
// 4 bytes for varlen calls, and for calls whose rows all see every key, when the last wave of tiles
// is partial, 55-105 KiB per SM of fp32 partials at d64/d128 (docs/semantics.md, "Paths").
Status attention_forward(const AttentionParams& params, cudaStream_t stream = nullptr);

// ---------------------------------------------------------------------------------------------
// Backward
// ---------------------------------------------------------------------------------------------
// The gradients of attention_forward for the call `forward` describes, given dO. `forward` is the
// forward's parameter struct as it ran: its q, k, v are read, and so are its o and lse (the forward's
// outputs, or any O and LSE the caller vouches for, e.g. ring attention's merged ones; lse is
// required). With P = exp(S - lse) (docs/semantics.md): D = rowsum(dO * O), dV = P^T dO,
// dS = P (dO V^T - D) (times the softcap's derivative), dQ = scale dS K, dK = scale dS^T Q; GQA sums
// dK, dV over the query heads of a group; a row with no visible key contributes nothing.
// dout has o's shape, dq q's, dk k's, dv v's; each has its own strides (batch, seq, head; the last
// dimension contiguous), in forward.dtype. dq, dk, dv are overwritten entirely.
struct BackwardParams {
  AttentionParams forward;
  const void* dout = nullptr;
  int64_t dout_batch_stride = 0, dout_seq_stride = 0, dout_head_stride = 0;
  void* dq = nullptr;
  int64_t dq_batch_stride = 0, dq_seq_stride = 0, dq_head_stride = 0;
  void* dk = nullptr;
  int64_t dk_batch_stride = 0, dk_seq_stride = 0, dk_head_stride = 0;
  void* dv = nullptr;
  int64_t dv_batch_stride = 0, dv_seq_stride = 0, dv_head_stride = 0;
  // Bitwise-equal gradients from run to run (the fp32 dQ accumulation in a fixed order). The CPU
  // reference is always deterministic.
  bool deterministic = false;
};

// dout, dq, dk, dv with the strides of o, q, k, v as `forward` has them.
void set_grad_strides_like_forward(BackwardParams& params);

// Checks every rule of the forward (validate()) plus the backward's own: lse, dout, dq, dk, dv
// present, in range, element-aligned, and dq, dk, dv overlapping no other tensor. Writes nothing.
Status validate_backward(const BackwardParams& params, cudaStream_t stream = nullptr);

// Computes dq, dk, dv on the first backward path that supports the call (forward.path pins one):
// sm80 (mma.sync; fp16/bf16, head dims 32, 64, 96, 128; compute capability >= 8.0), the naive GPU
// backward (any call on a device), the fp64 CPU reference (host pointers). The sm80 path takes a
// stream-ordered workspace on `stream` (cudaMallocAsync, freed after its kernels; allowed during
// graph capture): fp32 dQ plus two floats per query row and head. On any error nothing is written.
Status attention_backward(const BackwardParams& params, cudaStream_t stream = nullptr);

// The path attention_backward would pick (kAuto resolved), or an error naming why each path cannot
// run the call. `params` must already be valid (see validate_backward()).
Status select_backward_path(const BackwardParams& params, KernelPath* chosen);

// Whether `path` can compute `params` on the current device (or on the host, for the CPU path),
// and if not, why. `params` must already be valid (see validate()).
struct Support {
  KernelPath path = KernelPath::kAuto;
  bool supported = false;
  std::string reason;  // empty when supported
};
Support supports(const AttentionParams& params, KernelPath path);
// One entry per concrete path, in dispatch order.
std::vector<Support> supports(const AttentionParams& params);

// The path attention_forward would pick (kAuto resolved), or an error if none can run the call.
Status select_path(const AttentionParams& params, KernelPath* chosen);

// Library build facts: version, compiled architectures, head dims and dtypes.
std::string build_info();

}  // namespace flashcore
