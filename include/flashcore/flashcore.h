/* flashcore C ABI: the C++ API (flashcore.hpp) for C, ctypes and other foreign-function callers.
 *
 * Plain C: fixed-width fields, enums passed as int32_t, streams as void* (a cudaStream_t; NULL is the
 * legacy default stream). No exception crosses this boundary. Every function that returns fc_status
 * sets the calling thread's error message when it returns a non-zero code and clears it when it
 * returns FC_STATUS_OK; read it with fc_last_error_message().
 *
 * Always start from fc_params_init(): it sets struct_size and the defaults (windows -1 = infinite,
 * not 0; a zero-filled struct would mean "each query sees only its diagonal key"). Calls reject a
 * struct whose struct_size is not sizeof(fc_attention_params).
 *
 * Field meanings, layout and rules are those of flashcore::AttentionParams (flashcore.hpp) and
 * docs/semantics.md; each field below mirrors the C++ field of the same name.
 */
#ifndef FLASHCORE_FLASHCORE_H_
#define FLASHCORE_FLASHCORE_H_

#include <stddef.h>
#include <stdint.h>

#include "flashcore/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes: equal to flashcore::StatusCode. */
typedef int32_t fc_status;
#define FC_STATUS_OK 0
#define FC_STATUS_INVALID_ARGUMENT 1 /* the call breaks a rule; the message names the argument */
#define FC_STATUS_UNSUPPORTED 2      /* valid, but no kernel path of this build/device runs it */
#define FC_STATUS_CUDA_ERROR 3
#define FC_STATUS_INTERNAL 4

/* dtype: equal to flashcore::DType. */
#define FC_DTYPE_FLOAT16 0
#define FC_DTYPE_BFLOAT16 1
#define FC_DTYPE_FLOAT32 2

/* mask_align: equal to flashcore::MaskAlign. */
#define FC_MASK_ALIGN_BOTTOM_RIGHT 0 /* flash-attn's causal: query i sees keys j <= i + Sk - Sq */
#define FC_MASK_ALIGN_TOP_LEFT 1     /* PyTorch SDPA's is_causal: query i sees keys j <= i */

/* path: equal to flashcore::KernelPath. */
#define FC_PATH_AUTO 0
#define FC_PATH_SM90 1
#define FC_PATH_SM80 2
#define FC_PATH_NAIVE_GPU 3
#define FC_PATH_CPU_REFERENCE 4
#define FC_PATH_DECODE 5

#define FC_WINDOW_INFINITE (-1)

typedef struct fc_attention_params {
  uint32_t struct_size; /* sizeof(fc_attention_params); set by fc_params_init */

  /* tensors: q [B, Sq, Hq, Dqk], k [B, Sk, Hkv, Dqk], v [B, Sk, Hkv, Dv], o [B, Sq, Hq, Dv],
   * lse [B, Hq, Sq] float32 (optional). Strides in elements; the last dimension is contiguous. */
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;

  int64_t q_batch_stride, q_seq_stride, q_head_stride;
  int64_t k_batch_stride, k_seq_stride, k_head_stride;
  int64_t v_batch_stride, v_seq_stride, v_head_stride;
  int64_t o_batch_stride, o_seq_stride, o_head_stride;
  int64_t lse_batch_stride, lse_head_stride;

  /* sizes (varlen: seqlen_q / seqlen_k hold max_seqlen_q / max_seqlen_k) */
  int32_t batch;
  int32_t seqlen_q;
  int32_t seqlen_k;
  int32_t heads_q;
  int32_t heads_kv;
  int32_t head_dim_qk;
  int32_t head_dim_v;
  int32_t dtype; /* FC_DTYPE_* */

  /* score function */
  float softmax_scale; /* 0: 1/sqrt(head_dim_qk) */
  float softcap;       /* 0: off */
  const float* alibi_slopes;
  int64_t alibi_batch_stride;

  /* visibility */
  int32_t causal;     /* 0 or 1 */
  int32_t mask_align; /* FC_MASK_ALIGN_* */
  int32_t window_left;
  int32_t window_right;

  /* varlen */
  const int32_t* cu_seqlens_q;
  const int32_t* cu_seqlens_k;
  const int32_t* seqused_k;
  int64_t total_q;
  int64_t total_k;
  int32_t check_device_metadata; /* 1 (default): read device cu_seqlens/seqused_k to check them (one
                                    stream sync); 0: trust them, no sync */

  /* dispatch */
  int32_t path; /* FC_PATH_* */
  int32_t num_splits;

  /* KV cache (flashcore.hpp, "KV cache"): paged K/V, batch index, left padding; all null / 0: off */
  const int32_t* block_table; /* int32 [batch, block_table_batch_stride]: pages of each entry */
  int64_t block_table_batch_stride;
  int32_t pages_per_seq;
  int32_t page_size;
  int32_t num_pages;
  const int32_t* kv_batch_idx; /* int32 [batch]: the cache row of each entry */
  int32_t kv_batch;
  const int32_t* leftpad_k; /* int32 [batch]: the first key row of each entry */
} fc_attention_params;

/* Sets struct_size and every default (null pointers, zero sizes and strides, windows -1, fp16,
 * bottom-right alignment, path auto). */
FLASHCORE_API fc_status fc_params_init(fc_attention_params* params);

/* Fills the strides of a dense [B, S, H, D] problem (and lse [B, Hq, Sq]; varlen: [Hq, total_q])
 * from the sizes already set. */
FLASHCORE_API fc_status fc_set_dense_strides(fc_attention_params* params);

/* Checks every rule (docs/validation.md). May synchronize `stream` to read device cu_seqlens. */
FLASHCORE_API fc_status fc_validate(const fc_attention_params* params, void* stream);

/* Computes attention on `stream` (host pointers: the CPU reference, synchronously). On any error
 * nothing is written. */
FLASHCORE_API fc_status fc_attention_forward(const fc_attention_params* params, void* stream);

/* The backward of the forward call `forward` describes (its q, k, v, o and lse are read; lse is
 * required): dout has o's shape, dq q's, dk k's, dv v's, each with its own strides, in the forward's
 * dtype. flashcore::BackwardParams in flashcore.hpp states the math. */
typedef struct fc_backward_params {
  fc_attention_params forward;
  const void* dout;
  int64_t dout_batch_stride, dout_seq_stride, dout_head_stride;
  void* dq;
  int64_t dq_batch_stride, dq_seq_stride, dq_head_stride;
  void* dk;
  int64_t dk_batch_stride, dk_seq_stride, dk_head_stride;
  void* dv;
  int64_t dv_batch_stride, dv_seq_stride, dv_head_stride;
  int32_t deterministic; /* 1: bitwise-equal gradients run to run */
} fc_backward_params;

/* Initializes `forward` as fc_params_init does and zeroes the rest. */
FLASHCORE_API fc_status fc_backward_params_init(fc_backward_params* params);

/* Sets the gradients' strides to those of o, q, k, v in `forward`. */
FLASHCORE_API fc_status fc_set_grad_strides_like_forward(fc_backward_params* params);

/* Computes dq, dk, dv on `stream` (flashcore::attention_backward: the fused sm90 / sm80 backwards,
 * the naive GPU backward, or, for host pointers, the fp64 CPU reference synchronously). Every
 * element of dq, dk, dv is written. On any error nothing is written. */
FLASHCORE_API fc_status fc_attention_backward(const fc_backward_params* params, void* stream);

/* Whether `path` (FC_PATH_*) can run the call: FC_STATUS_OK if so, FC_STATUS_UNSUPPORTED with the
 * reason otherwise, FC_STATUS_INVALID_ARGUMENT if the call itself is invalid. The reason (empty when
 * supported) is copied NUL-terminated into reason_buf, truncated to reason_len - 1 characters;
 * reason_buf may be NULL when reason_len is 0. */
FLASHCORE_API fc_status fc_supports(const fc_attention_params* params, int32_t path, char* reason_buf, size_t reason_len);

/* The calling thread's message of its last failing call, "" after a successful one. Valid until the
 * thread's next fc_* call that returns fc_status. */
FLASHCORE_API const char* fc_last_error_message(void);

/* "ok", "invalid argument", "unsupported", "CUDA error", "internal error" or "unknown". */
FLASHCORE_API const char* fc_status_name(fc_status code);

/* Version, compiled architectures, head dims, dtypes and paths. Static storage. */
FLASHCORE_API const char* fc_build_info(void);

/* Waits for `stream` (NULL: the legacy default stream), then reports the problem the device check of
 * an earlier call's varlen metadata found (check_device_metadata 0, or a captured graph) as
 * FC_STATUS_INVALID_ARGUMENT with its message, clearing it; FC_STATUS_OK if none. */
FLASHCORE_API fc_status fc_check_errors(void* stream);

/* What a call left to the automatic path does when only the naive reference kernel can run it
 * (flashcore::SlowPathPolicy in flashcore.hpp): FC_SLOW_PATH_WARN (the default; one message per
 * distinct reason, to stderr or the handler), FC_SLOW_PATH_ERROR (strict: the call fails with
 * FC_STATUS_UNSUPPORTED, writing nothing), FC_SLOW_PATH_ALLOW. The environment variable
 * FLASHCORE_STRICT=1 starts a process in FC_SLOW_PATH_ERROR. */
#define FC_SLOW_PATH_WARN 0
#define FC_SLOW_PATH_ERROR 1
#define FC_SLOW_PATH_ALLOW 2
FLASHCORE_API fc_status fc_set_slow_path_policy(int32_t policy);
FLASHCORE_API int32_t fc_slow_path_policy(void);
/* The warning handler (NULL: stderr); it may be called from any thread that calls flashcore. */
FLASHCORE_API void fc_set_slow_path_handler(void (*handler)(const char* message));

/* Merging attention states (flashcore::MergeStatesParams in flashcore.hpp states the rules): two
 * attentions of the same queries over disjoint key sets combined into the attention over their union,
 *   lse = log(exp(lse_a) + exp(lse_b)),  o = exp(lse_a - lse) o_a + exp(lse_b - lse) o_b.
 * A side with lse -inf or +inf is empty; both empty give o = 0, lse = -inf. o_* [B, S, H, D] (varlen:
 * [T, H, D] with batch = 1, seqlen = T), lse_* [B, H, S] float32; o may be o_a and lse may be lse_a
 * exactly (in place). Always start from fc_merge_states_params_init(). */
typedef struct fc_merge_states_params {
  uint32_t struct_size; /* sizeof(fc_merge_states_params); set by fc_merge_states_params_init */

  const void* o_a;
  const float* lse_a;
  const void* o_b;
  const float* lse_b;
  void* o;
  float* lse; /* optional */

  int32_t batch;
  int32_t seqlen;
  int32_t heads;
  int32_t head_dim;
  int32_t dtype; /* FC_DTYPE_* */

  /* strides in elements; the last dimension of each o is contiguous, and so is lse's seq dimension */
  int64_t o_a_batch_stride, o_a_seq_stride, o_a_head_stride;
  int64_t o_b_batch_stride, o_b_seq_stride, o_b_head_stride;
  int64_t o_batch_stride, o_seq_stride, o_head_stride;
  int64_t lse_a_batch_stride, lse_a_head_stride;
  int64_t lse_b_batch_stride, lse_b_head_stride;
  int64_t lse_batch_stride, lse_head_stride;
} fc_merge_states_params;

/* Sets struct_size and every default (null pointers, zero sizes and strides, fp16). */
FLASHCORE_API fc_status fc_merge_states_params_init(fc_merge_states_params* params);

/* Merges on `stream` (host pointers: on the CPU, synchronously). On any error nothing is written. */
FLASHCORE_API fc_status fc_merge_attention_states(const fc_merge_states_params* params, void* stream);

/* KV cache (flashcore::KvCacheParams in flashcore.hpp states the rules; flash-attn's
 * flash_attn_with_kvcache): appends k_new / v_new [B, seqlen_new, Hkv, D] to the cache `attention.k`,
 * `attention.v` at rows [cache_seqlens[b], cache_seqlens[b] + seqlen_new) (k_new rotated first when
 * rotary_cos is set), then attends attention.q over cache rows [leftpad_k[b], cache_seqlens[b] +
 * seqlen_new). attention.seqused_k must be null and the call not varlen. Always start from
 * fc_kvcache_params_init(). */
typedef struct fc_kvcache_params {
  uint32_t struct_size; /* sizeof(fc_kvcache_params); set by fc_kvcache_params_init */
  fc_attention_params attention; /* initialised as fc_params_init does */
  const int32_t* cache_seqlens;  /* int32 [batch]; NULL: every cache row is in use (no append) */
  const void* k_new;             /* optional; k_new and v_new together */
  const void* v_new;
  int32_t seqlen_new;
  int64_t k_new_batch_stride, k_new_seq_stride, k_new_head_stride;
  int64_t v_new_batch_stride, v_new_seq_stride, v_new_head_stride;
  const void* rotary_cos; /* [rotary_len, rotary_dim / 2] in the call's dtype, contiguous; optional */
  const void* rotary_sin;
  int32_t rotary_dim; /* even, <= head_dim_qk */
  int32_t rotary_len;
  int32_t rotary_interleaved; /* 1: pairs (2i, 2i + 1) (GPT-J); 0: (i, i + rotary_dim / 2) (GPT-NeoX) */
} fc_kvcache_params;

/* Sets struct_size, initialises `attention` with fc_params_init and zeroes the rest. */
FLASHCORE_API fc_status fc_kvcache_params_init(fc_kvcache_params* params);

/* Appends and attends on `stream` (host pointers: on the CPU, synchronously). No host synchronization
 * when attention.check_device_metadata is 0 or the stream captures a graph. On a validation error
 * nothing is written. */
FLASHCORE_API fc_status fc_attention_with_kvcache(const fc_kvcache_params* params, void* stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FLASHCORE_FLASHCORE_H_ */
