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

#include "flashcore/export.h"

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

FLASHCORE_API const char* status_code_name(StatusCode code);

// ---------------------------------------------------------------------------------------------
// Parameters
// ---------------------------------------------------------------------------------------------
enum class DType : int { kFloat16 = 0, kBFloat16 = 1, kFloat32 = 2 };

FLASHCORE_API const char* dtype_name(DType dtype);
FLASHCORE_API int dtype_size(DType dtype);

// Which diagonal a causal mask (and a sliding window) is aligned to when Sq != Sk.
//   kBottomRight: query i sees keys j <= i + Sk - Sq  (flash-attn's `causal=True`)
//   kTopLeft:     query i sees keys j <= i            (PyTorch SDPA's `is_causal=True`)
enum class MaskAlign : int { kBottomRight = 0, kTopLeft = 1 };

// Kernel paths, fastest first. kAuto picks the first path whose `supports()` says yes.
// Dispatch order: kDecode (split-KV, for calls with few query rows per KV head, and every paged call),
// kSm90, kSm80, kNaiveGpu, kCpuReference (the enum values are the C ABI's, not the order).
enum class KernelPath : int { kAuto = 0, kSm90 = 1, kSm80 = 2, kNaiveGpu = 3, kCpuReference = 4, kDecode = 5 };

FLASHCORE_API const char* kernel_path_name(KernelPath path);

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
struct FLASHCORE_API AttentionParams {
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
  // Device-resident cu_seqlens/seqused_k are copied to the host and checked before the call runs
  // (one stream sync) when true. False (and while the stream captures a CUDA graph): no sync; a
  // one-block kernel checks them on the device in stream order and the next call, or check_errors(),
  // reports a problem it found; the kernels clamp every length into the tensors meanwhile, so a
  // malformed array gives wrong results but no access outside them (docs/validation.md).
  bool check_device_metadata = true;

  // ---- KV cache: paged K/V, batch index, left padding (docs/semantics.md, "KV cache") ---------
  // Paged (block_table != nullptr): k is [num_pages, page_size, Hkv, Dqk], v [num_pages, page_size,
  // Hkv, Dv], k/v_batch_stride being the page stride. Key row r of batch entry b (r counts from 0 in
  // dense and varlen calls alike: cu_seqlens_k then only give lengths) lives in page
  // block_table[b * block_table_batch_stride + r / page_size] at row r % page_size. `seqlen_k` is
  // the longest sequence a table row can hold (pages_per_seq * page_size, or max_seqlen_k in varlen).
  // validate() checks the entries (in [0, num_pages)) wherever it reads the small arrays; where it
  // cannot (graph capture, check_device_metadata off) the kernels clamp them into the pool, so a bad
  // entry yields wrong values but no access outside k and v.
  const int32_t* block_table = nullptr;  // int32 [batch, pages_per_seq]
  int64_t block_table_batch_stride = 0;  // >= pages_per_seq
  int pages_per_seq = 0;
  int page_size = 0;
  int num_pages = 0;
  // Dense cache with a batch index (flash-attn's cache_batch_idx): batch entry b reads k/v batch row
  // kv_batch_idx[b] of a cache with kv_batch rows (not with varlen or paged K/V; entries outside
  // [0, kv_batch) are checked or clamped as block_table's are).
  const int32_t* kv_batch_idx = nullptr;
  int kv_batch = 0;
  // Left padding (flash-attn's cache_leftpad): the keys of batch entry b are cache rows
  // [leftpad_k[b], end), end = seqused_k[b] if given, else seqlen_k; key positions (for causal,
  // windows and ALiBi) count from leftpad_k[b]. Not with varlen.
  const int32_t* leftpad_k = nullptr;

  // ---- dispatch ------------------------------------------------------------------------------
  KernelPath path = KernelPath::kAuto;
  // Split-KV (decode path): how many key ranges each (batch entry, KV head) is cut into; 0 = the
  // plan's choice from the SM count, 1 = no split. Other paths ignore it.
  int num_splits = 0;
  const ForwardOverrides* overrides = nullptr;  // tests and tuning only (ForwardOverrides)

  FLASHCORE_HOST_DEVICE bool is_varlen() const { return cu_seqlens_q != nullptr; }
  FLASHCORE_HOST_DEVICE bool is_paged() const { return block_table != nullptr; }
  // Effective scale (resolves the 0 = default convention).
  float effective_scale() const;
};

// Fills the strides of a dense, contiguous [B, S, H, D] problem (flash-attn layout) and
// lse [B, Hq, Sq]. Pointers, sizes and dtype must already be set.
FLASHCORE_API void set_dense_strides(AttentionParams& params);

// ---------------------------------------------------------------------------------------------
// Entry points
// ---------------------------------------------------------------------------------------------

// Checks every rule of the API. Reads cu_seqlens/seqused_k when they are host-readable (or copies
// them from the device when `stream` is not capturing a graph). Writes nothing.
FLASHCORE_API Status validate(const AttentionParams& params, cudaStream_t stream = nullptr);

// Computes attention. Device pointers run on `stream` with the fastest path that supports the call;
// host pointers (or a machine with no GPU) run the fp64 CPU reference synchronously.
// On any error nothing is written and the status names the argument and the rule.
// Device memory: the sm90 path may take a small per-call workspace from the device's stream-ordered
// pool (cudaMallocAsync on `stream`, freed on it after the kernel; allowed during graph capture):
// 4 bytes for varlen calls, and for calls whose rows all see every key, when the last wave of tiles
// is partial, 55-105 KiB per SM of fp32 partials at d64/d128 (docs/semantics.md, "Paths").
FLASHCORE_API Status attention_forward(const AttentionParams& params, cudaStream_t stream = nullptr);

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
FLASHCORE_API void set_grad_strides_like_forward(BackwardParams& params);

// Checks every rule of the forward (validate()) plus the backward's own: lse, dout, dq, dk, dv
// present, in range, element-aligned, and dq, dk, dv overlapping no other tensor. Writes nothing.
FLASHCORE_API Status validate_backward(const BackwardParams& params, cudaStream_t stream = nullptr);

// Computes dq, dk, dv on the first backward path that supports the call (forward.path pins one):
// sm90 (wgmma + TMA; fp16/bf16, head dims up to 256; compute capability 9.0, sm_90a builds), sm80
// (mma.sync; fp16/bf16, head dims up to 256; compute capability >= 8.0), the naive GPU backward (any
// call on a device), the fp64 CPU reference (host pointers). Every element of dq, dk, dv is written
// (zeros for keys no row sees, rows that see no key and varlen tokens past the last sequence), so
// they need no zeroing. The fused paths take a stream-ordered workspace on `stream`
// (cudaMallocAsync, freed after their kernels; allowed during graph capture): fp32 dQ plus two
// floats per query row and head. On any error nothing is written.
FLASHCORE_API Status attention_backward(const BackwardParams& params, cudaStream_t stream = nullptr);

// The path attention_backward would pick (kAuto resolved), or an error naming why each path cannot
// run the call. `params` must already be valid (see validate_backward()).
FLASHCORE_API Status select_backward_path(const BackwardParams& params, KernelPath* chosen);

// ---------------------------------------------------------------------------------------------
// KV cache (flash-attn's flash_attn_with_kvcache)
// ---------------------------------------------------------------------------------------------
// Appends new keys/values to a KV cache in place, then attends q over the cache:
//   `attention` describes the attention over the cache: q, o, lse; k, v = the caches (dense
//   [kv_batch or batch, seqlen_k, Hkv, D], or paged with block_table); kv_batch_idx, leftpad_k,
//   masks, softcap, ALiBi, num_splits, path. Its seqused_k must be null (cache_seqlens says it) and
//   it must not be varlen.
//   Batch entry b holds cache_seqlens[b] keys before the call (cache rows [0, cache_seqlens[b]),
//   null: seqlen_k, full); k_new / v_new [B, seqlen_new, Hkv, D] are written to rows
//   [cache_seqlens[b], cache_seqlens[b] + seqlen_new) (k_new rotated first when rotary is on), and
//   the attention then sees cache rows [leftpad_k[b], cache_seqlens[b] + seqlen_new).
//   Rotary (rotary_cos != nullptr): cos/sin [rotary_len, rotary_dim / 2] in the call's dtype rotate
//   the first rotary_dim features of q and k_new; the new key i of entry b takes position
//   cache_seqlens[b] + i, and so does query i when the call is causal or windowed (flash-attn's
//   rule; otherwise every query takes position cache_seqlens[b]). interleaved: pairs (2i, 2i + 1)
//   (GPT-J); otherwise (i, i + rotary_dim / 2) (GPT-NeoX).
// Positions past the cache (cache_seqlens[b] + seqlen_new > seqlen_k) or past rotary_len are an
// error where validate can read cache_seqlens, and are clamped (those keys are not written) where it
// cannot. Device work is stream-ordered with no host synchronization when check_device_metadata
// is off or the stream captures a graph: a decode step can be captured in a CUDA graph.
struct KvCacheParams {
  AttentionParams attention;
  const int32_t* cache_seqlens = nullptr;  // int32 [batch]
  const void* k_new = nullptr;             // optional; k_new and v_new together
  const void* v_new = nullptr;
  int seqlen_new = 0;
  int64_t k_new_batch_stride = 0, k_new_seq_stride = 0, k_new_head_stride = 0;
  int64_t v_new_batch_stride = 0, v_new_seq_stride = 0, v_new_head_stride = 0;
  const void* rotary_cos = nullptr;        // [rotary_len, rotary_dim / 2], contiguous
  const void* rotary_sin = nullptr;
  int rotary_dim = 0;                      // even, <= head_dim_qk
  int rotary_len = 0;
  bool rotary_interleaved = false;
};

FLASHCORE_API Status validate_kvcache(const KvCacheParams& params, cudaStream_t stream = nullptr);
FLASHCORE_API Status attention_with_kvcache(const KvCacheParams& params, cudaStream_t stream = nullptr);

// ---------------------------------------------------------------------------------------------
// Merging attention states (split-KV, cascade inference, ring attention)
// ---------------------------------------------------------------------------------------------
// Two attentions of the same queries over disjoint key sets, (o_a, lse_a) and (o_b, lse_b), combined
// into the attention over their union:
//   lse = log(exp(lse_a) + exp(lse_b)),  o = exp(lse_a - lse) o_a + exp(lse_b - lse) o_b
// exactly (in fp32). A side with lse = -inf (no key) contributes nothing; both empty give o = 0,
// lse = -inf. +inf is taken as -inf (flash-attn's convention for empty rows). Shapes: o_* [B, S, H,
// D] (or varlen-packed [T, H, D] with batch = 1), lse_* [B, H, S] fp32; o may alias o_a (in place)
// and lse may alias lse_a. dtype fp16, bf16 or fp32 (o, o_a, o_b share it).
struct MergeStatesParams {
  const void* o_a = nullptr;
  const float* lse_a = nullptr;
  const void* o_b = nullptr;
  const float* lse_b = nullptr;
  void* o = nullptr;
  float* lse = nullptr;  // optional
  int batch = 0, seqlen = 0, heads = 0, head_dim = 0;
  DType dtype = DType::kFloat16;
  int64_t o_a_batch_stride = 0, o_a_seq_stride = 0, o_a_head_stride = 0;
  int64_t o_b_batch_stride = 0, o_b_seq_stride = 0, o_b_head_stride = 0;
  int64_t o_batch_stride = 0, o_seq_stride = 0, o_head_stride = 0;
  int64_t lse_a_batch_stride = 0, lse_a_head_stride = 0;  // lse seq stride is 1
  int64_t lse_b_batch_stride = 0, lse_b_head_stride = 0;
  int64_t lse_batch_stride = 0, lse_head_stride = 0;
};

FLASHCORE_API Status merge_attention_states(const MergeStatesParams& params, cudaStream_t stream = nullptr);

// Whether `path` can compute `params` on the current device (or on the host, for the CPU path),
// and if not, why. `params` must already be valid (see validate()).
struct Support {
  KernelPath path = KernelPath::kAuto;
  bool supported = false;
  std::string reason;  // empty when supported
};
FLASHCORE_API Support supports(const AttentionParams& params, KernelPath path);
// One entry per concrete path, in dispatch order.
FLASHCORE_API std::vector<Support> supports(const AttentionParams& params);

// The path attention_forward would pick (kAuto resolved), or an error if none can run the call.
FLASHCORE_API Status select_path(const AttentionParams& params, KernelPath* chosen);

// Waits for `stream`, then reports the problem that the device check of an earlier call's varlen
// metadata found (AttentionParams::check_device_metadata false, or a captured graph), clearing it;
// Ok if none. Every call reports it too, before running anything.
FLASHCORE_API Status check_errors(cudaStream_t stream = nullptr);

// ---- No silent slow path ----------------------------------------------------------------------
// A call left to kAuto whose tensors live on a GPU, and that no fused path (decode, sm90, sm80) takes
// even after its operands are copied to aligned buffers (attention_forward does that where it lets a
// fused path run), runs on the naive reference kernel: tens to hundreds of times slower. The policy
// decides what such a call does (forward, KV-cache call and backward alike):
//   kWarn   (default) it runs; the warning handler gets one message per distinct set of reasons,
//           naming each fused path's reason and the fix;
//   kError  ("strict") it fails with Unsupported and that message, writing nothing;
//   kAllow  it runs silently.
// A call that asks for KernelPath::kNaiveGpu itself is never warned about. The initial policy is
// kError when the environment variable FLASHCORE_STRICT is set to anything but "" or "0" (read once,
// at the first call that needs it), else kWarn.
enum class SlowPathPolicy : int { kWarn = 0, kError = 1, kAllow = 2 };
FLASHCORE_API void set_slow_path_policy(SlowPathPolicy policy);
FLASHCORE_API SlowPathPolicy slow_path_policy();
// The warning handler (called on the calling thread, possibly from several threads); nullptr restores
// the default, which writes the message to stderr.
using SlowPathHandler = void (*)(const char* message);
FLASHCORE_API void set_slow_path_handler(SlowPathHandler handler);

// Library build facts: version, compiled architectures, head dims and dtypes.
FLASHCORE_API std::string build_info();

}  // namespace flashcore
