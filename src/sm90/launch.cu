// The sm90 path's entry: supports() (what this path computes, and exactly why not otherwise) and
// run() (tensor maps + dispatch to the (head dims, dtype) instantiation units this build holds).
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "api/built_kernels.hpp"
#include "api/paths.hpp"
#include "attention/mask.hpp"
#include "common/cuda_check.hpp"
#include "sm90/kernel_traits.cuh"
#include "sm90/launch_args.hpp"

namespace flashcore {
namespace sm90 {

namespace {

// ---- Driver entry point (no libcuda link) ------------------------------------------------------
PFN_cuTensorMapEncodeTiled_v12000 g_encode_tiled = nullptr;
cudaError_t g_encode_lookup_error = cudaSuccess;
std::once_flag g_encode_once;

Status get_encode_tiled(PFN_cuTensorMapEncodeTiled_v12000* fn) {
  std::call_once(g_encode_once, [] {
    cudaDriverEntryPointQueryResult query = cudaDriverEntryPointSymbolNotFound;
    void* ptr = nullptr;
    g_encode_lookup_error =
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &ptr, 12000, cudaEnableDefault, &query);
    if (g_encode_lookup_error == cudaSuccess && query == cudaDriverEntryPointSuccess) {
      g_encode_tiled = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(ptr);
    }
  });
  if (g_encode_tiled == nullptr) {
    if (g_encode_lookup_error != cudaSuccess) {
      return cuda_status(g_encode_lookup_error, "cudaGetDriverEntryPointByVersion(cuTensorMapEncodeTiled)");
    }
    return Status::CudaError("sm90: the driver has no cuTensorMapEncodeTiled (CUDA 12.0+ driver needed)");
  }
  *fn = g_encode_tiled;
  return Status::Ok();
}

// ---- What this build holds ---------------------------------------------------------------------
using BuiltUnit = detail::BuiltKernel<Status (*)(const LaunchArgs&, cudaStream_t)>;

constexpr BuiltUnit kBuiltUnits[] = {
#if FLASHCORE_HAS_SM90_D64_64_FP16
    {64, 64, DType::kFloat16, &launch_forward<64, 64, __half>},
#endif
#if FLASHCORE_HAS_SM90_D64_64_BF16
    {64, 64, DType::kBFloat16, &launch_forward<64, 64, __nv_bfloat16>},
#endif
#if FLASHCORE_HAS_SM90_D96_96_FP16
    {96, 96, DType::kFloat16, &launch_forward<96, 96, __half>},
#endif
#if FLASHCORE_HAS_SM90_D96_96_BF16
    {96, 96, DType::kBFloat16, &launch_forward<96, 96, __nv_bfloat16>},
#endif
#if FLASHCORE_HAS_SM90_D128_128_FP16
    {128, 128, DType::kFloat16, &launch_forward<128, 128, __half>},
#endif
#if FLASHCORE_HAS_SM90_D128_128_BF16
    {128, 128, DType::kBFloat16, &launch_forward<128, 128, __nv_bfloat16>},
#endif
#if FLASHCORE_HAS_SM90_D192_128_FP16
    {192, 128, DType::kFloat16, &launch_forward<192, 128, __half>},
#endif
#if FLASHCORE_HAS_SM90_D192_128_BF16
    {192, 128, DType::kBFloat16, &launch_forward<192, 128, __nv_bfloat16>},
#endif
#if FLASHCORE_HAS_SM90_D256_256_FP16
    {256, 256, DType::kFloat16, &launch_forward<256, 256, __half>},
#endif
#if FLASHCORE_HAS_SM90_D256_256_BF16
    {256, 256, DType::kBFloat16, &launch_forward<256, 256, __nv_bfloat16>},
#endif
    {0, 0, DType::kFloat32, nullptr},  // end marker (keeps the array non-empty in pruned builds)
};

// Shared memory of the (Dqk, Dv) configuration's kernel of one kind, at the kBlockN it runs.
template <int kDqk, int kDv, TileShape kShape, bool kAllKeysVisible, bool kVarlen = false>
constexpr size_t kernel_smem() {
  using C = TileConfig<kDqk, kDv, kShape>;
  return KernelTraits<kDqk, kDv, __half, C::kSchedule, block_n_for<C>(kAllKeysVisible, kVarlen), kVarlen, 1,
                      kAllKeysVisible, kShape>::kSmemBytes;
}
// ... and the most any of its kernels asks for: masked, kAllKeysVisible and kVarlen of the default
// shape, plus the long and short shapes where the config has them.
template <int kDqk, int kDv>
size_t smem_estimate() {
  using C = TileConfig<kDqk, kDv>;
  size_t bytes = std::max({kernel_smem<kDqk, kDv, TileShape::kDefault, false>(),
                           kernel_smem<kDqk, kDv, TileShape::kDefault, true>(),
                           kernel_smem<kDqk, kDv, TileShape::kDefault, false, true>()});
  if constexpr (C::kLongMinSeqlenK > 0) {
    bytes = std::max({bytes, kernel_smem<kDqk, kDv, TileShape::kLong, false>(),
                      kernel_smem<kDqk, kDv, TileShape::kLong, true>()});
  }
  if constexpr (C::kShortMaskedBelowSeqlenK > 0) bytes = std::max(bytes, kernel_smem<kDqk, kDv, TileShape::kShort, false>());
  return bytes;
}
// 0 for a head-dim pair the sm90 path has no tile config for (tile_config.hpp), built or not.
size_t smem_needed(int dqk, int dv) {
  if (dqk == 64 && dv == 64) return smem_estimate<64, 64>();
  if (dqk == 96 && dv == 96) return smem_estimate<96, 96>();
  if (dqk == 128 && dv == 128) return smem_estimate<128, 128>();
  if (dqk == 192 && dv == 128) return smem_estimate<192, 128>();
  if (dqk == 256 && dv == 256) return smem_estimate<256, 256>();
  return 0;
}

bool stride_ok(int64_t stride_elems) { return stride_elems > 0 && stride_elems % 8 == 0; }  // 16 B, 16-bit

std::string check_operand_strides(const char* name, const void* ptr, int64_t seq, int64_t head, int64_t batch,
                                  int seqlen, int heads, int batch_count) {
  if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0) return std::string(name) + ": base address must be 16-byte aligned";
  // A stride of a dimension of extent 1 is never used; TMA still needs a legal value (launch.cu
  // substitutes one), so only strides of real dimensions are checked.
  if (seqlen > 1 && !stride_ok(seq)) return std::string(name) + "_seq_stride must be a positive multiple of 8 elements (16 bytes) for TMA";
  if (heads > 1 && !stride_ok(head)) return std::string(name) + "_head_stride must be a positive multiple of 8 elements (16 bytes) for TMA";
  if (batch_count > 1 && !stride_ok(batch)) return std::string(name) + "_batch_stride must be a positive multiple of 8 elements (16 bytes) for TMA";
  return "";
}

// A legal stand-in stride for a dimension of extent 1 (its coordinate is always 0).
int64_t usable_stride(int64_t stride, int extent) { return extent > 1 ? stride : 8; }

// Rows and batch entries of the q/o and k/v tensor maps: dense [B][S], or varlen's packed tokens.
struct TokenAxes {
  int rows_q = 0, rows_k = 0, batch = 0;
};
TokenAxes token_axes(const AttentionParams& p) {
  if (p.is_varlen()) return {(int)p.total_q, (int)p.total_k, 1};  // validate(): total_q/k < 2^31
  return {p.seqlen_q, p.seqlen_k, p.batch};
}

std::string sm90_supports(const AttentionParams& p, const detail::DeviceInfo& d) {
  if (d.pointers_on_host || !d.has_device) return "the sm90 path needs device pointers on a CUDA device";
  if (d.cc_major != 9 || d.cc_minor != 0) {
    return "the sm90 path needs compute capability 9.0 (sm_90a); device is " + std::to_string(d.cc_major) + "." +
           std::to_string(d.cc_minor);
  }
  if (p.dtype != DType::kFloat16 && p.dtype != DType::kBFloat16) {
    return std::string("dtype ") + dtype_name(p.dtype) + " is not supported by the sm90 path (fp16, bf16 only)";
  }
  if (p.alibi_slopes != nullptr) return "ALiBi (alibi_slopes) is not supported by the sm90 path yet";
  // The softmax takes each block's max over the unscaled dots (masked ones -inf) and only then
  // scales it, which gives the max of the scores only for a positive scale. The sm80 path scales
  // first when the scale is not positive.
  if (!(p.effective_scale() > 0.0f)) {
    return "softmax_scale " + std::to_string(p.effective_scale()) +
           " is not supported by the sm90 path (positive scales only; the sm80 path runs it)";
  }
  const std::string dims = "head dims " + std::to_string(p.head_dim_qk) + "/" + std::to_string(p.head_dim_v);
  const size_t smem = smem_needed(p.head_dim_qk, p.head_dim_v);
  if (smem == 0) return dims + " are not supported by the sm90 path (pairs: 64/64, 96/96, 128/128, 192/128, 256/256)";
  if (detail::find_built_kernel(kBuiltUnits, p.head_dim_qk, p.head_dim_v, p.dtype) == nullptr) {
    // A pruned build (tests skip on this wording: "not in this build").
    return dims + " with " + dtype_name(p.dtype) +
           " are not in this build of the sm90 path (configure FLASHCORE_HEAD_DIMS / FLASHCORE_DTYPES; built: " +
           detail::built_kernels_list(kBuiltUnits) + ")";
  }
  if (d.max_smem_per_block_optin < smem) {
    return "the sm90 configuration for head dims " + std::to_string(p.head_dim_qk) + "/" +
           std::to_string(p.head_dim_v) + " needs " + std::to_string(smem) +
           " bytes of shared memory per block; the device allows " + std::to_string(d.max_smem_per_block_optin);
  }
  // The tensor maps' extents: varlen packs the tokens (total_q/total_k rows, no batch dimension).
  const TokenAxes ax = token_axes(p);
  std::string why = check_operand_strides("q", p.q, p.q_seq_stride, p.q_head_stride, p.q_batch_stride, ax.rows_q,
                                          p.heads_q, ax.batch);
  if (why.empty() && p.k != nullptr) {
    why = check_operand_strides("k", p.k, p.k_seq_stride, p.k_head_stride, p.k_batch_stride, ax.rows_k, p.heads_kv,
                                ax.batch);
  }
  if (why.empty() && p.v != nullptr) {
    why = check_operand_strides("v", p.v, p.v_seq_stride, p.v_head_stride, p.v_batch_stride, ax.rows_k, p.heads_kv,
                                ax.batch);
  }
  if (!why.empty()) return why;
  // O leaves through TMA stores (or 4-byte stores of element pairs): the same rules as the inputs.
  why = check_operand_strides("o", p.o, p.o_seq_stride, p.o_head_stride, p.o_batch_stride, ax.rows_q, p.heads_q,
                              ax.batch);
  if (!why.empty()) return why;
  return "";
}

// A two-word tuning/test knob: 0 when the variable `name` holds word0, 1 for word1, -1 when it is
// unset or holds anything else (the config's or launcher's own choice).
int two_word_override(const char* name, const char* word0, const char* word1) {
  const char* env = std::getenv(name);
  if (env != nullptr && std::strcmp(env, word0) == 0) return 0;
  if (env != nullptr && std::strcmp(env, word1) == 0) return 1;
  return -1;
}

static_assert(int(Schedule::kSerial) == 0 && int(Schedule::kOverlapPingPong) == 1,
              "FLASHCORE_SM90_SCHEDULE=serial|overlap reads as 0|1, the Schedule values");

// FLASHCORE_SM90_BLOCK_N=<n>: run the tile config's kAltBlockN instead of kBlockN (tuning).
int block_n_override() {
  const char* env = std::getenv("FLASHCORE_SM90_BLOCK_N");
  return env != nullptr ? std::atoi(env) : 0;
}

// FLASHCORE_SM90_HEADS_PER_GROUP=<n>: the scheduler's head groups (tile_order.hpp) hold n heads
// instead of what the L2 rule gives (tests: many groups with small shapes; tuning). 0: the rule.
int heads_per_group_override() {
  const char* env = std::getenv("FLASHCORE_SM90_HEADS_PER_GROUP");
  return env != nullptr ? std::max(std::atoi(env), 0) : 0;
}

// FLASHCORE_SM90_GRID=<n>: at most n CTAs (clusters) in the persistent grid (tests: several waves
// and a stream-K tail with small calls). 0 or unset: as many as fit the device.
int grid_override() {
  const char* env = std::getenv("FLASHCORE_SM90_GRID");
  return env != nullptr ? std::max(std::atoi(env), 0) : 0;
}

Status sm90_run(const AttentionParams& p, const detail::DeviceInfo& d, cudaStream_t stream) {
  const BuiltUnit* unit = detail::find_built_kernel(kBuiltUnits, p.head_dim_qk, p.head_dim_v, p.dtype);
  if (unit == nullptr) return Status::Unsupported(sm90_supports(p, d));

  LaunchArgs a;
  a.dtype = p.dtype;
  const TokenAxes ax = token_axes(p);
  a.q = {p.q, p.head_dim_qk, ax.rows_q, p.heads_q, ax.batch, p.q_seq_stride, p.q_head_stride, p.q_batch_stride};
  a.k = {p.k, p.head_dim_qk, ax.rows_k, p.heads_kv, ax.batch, p.k_seq_stride, p.k_head_stride, p.k_batch_stride};
  a.v = {p.v, p.head_dim_v, ax.rows_k, p.heads_kv, ax.batch, p.v_seq_stride, p.v_head_stride, p.v_batch_stride};
  a.o = {p.o, p.head_dim_v, ax.rows_q, p.heads_q, ax.batch, p.o_seq_stride, p.o_head_stride, p.o_batch_stride};
  a.sm_count = d.sm_count > 0 ? d.sm_count : 1;
  // Tuning/test knobs (launch_args.hpp says what each forces):
  //   FLASHCORE_SM90_SCHEDULE=serial|overlap compares the two schedules (Schedule values 0, 1);
  //   FLASHCORE_SM90_RESCALE=vote|always overrides tile_config.hpp's kAlwaysRescaleO;
  //   FLASHCORE_SM90_CLUSTER, _LONG_TILES, _SHORT_TILES=off|on: the cluster kernel, the long and the
  //   short tile shape never, or whenever the call allows them, whatever its length;
  //   FLASHCORE_SM90_TILE_ORDER=longest|paired: calls with uneven tiles (causal, windowed) take the
  //   plain longest-first order, or balanced pairs (kernel.cuh, tile_order.hpp);
  //   FLASHCORE_SM90_STREAM_K=off|on: equal-tile calls never, or whenever the last wave is partial,
  //   split the last waves' tiles along KV (stream_k.hpp).
  a.schedule = two_word_override("FLASHCORE_SM90_SCHEDULE", "serial", "overlap");
  a.block_n = block_n_override();
  a.always_rescale = two_word_override("FLASHCORE_SM90_RESCALE", "vote", "always");
  a.cluster = two_word_override("FLASHCORE_SM90_CLUSTER", "off", "on");
  a.long_tiles = two_word_override("FLASHCORE_SM90_LONG_TILES", "off", "on");
  a.short_tiles = two_word_override("FLASHCORE_SM90_SHORT_TILES", "off", "on");
  a.pair_tiles = two_word_override("FLASHCORE_SM90_TILE_ORDER", "longest", "paired");
  a.heads_per_group = heads_per_group_override();
  a.stream_k = two_word_override("FLASHCORE_SM90_STREAM_K", "off", "on");
  a.max_grid_units = grid_override();

  KernelParams& k = a.params;
  k.o = p.o;
  k.lse = p.lse;
  // Varlen rows are addressed by packed token (scheduler.cuh, Tile::q_offset): no batch strides.
  k.o_batch_stride = p.is_varlen() ? 0 : p.o_batch_stride;
  k.o_seq_stride = p.o_seq_stride;
  k.o_head_stride = p.o_head_stride;
  k.lse_batch_stride = p.is_varlen() ? 0 : p.lse_batch_stride;
  k.lse_head_stride = p.lse_head_stride;
  k.batch = p.batch;
  k.seqlen_q = p.seqlen_q;
  k.seqlen_k = p.seqlen_k;
  k.heads_q = p.heads_q;
  k.heads_per_kv = p.heads_q / p.heads_kv;
  k.cu_seqlens_q = p.cu_seqlens_q;
  k.cu_seqlens_k = p.cu_seqlens_k;
  k.seqused_k = p.seqused_k;
  k.mask = attn::make_mask(p, p.seqlen_q, p.seqlen_k);
  k.mask_align = p.mask_align;
  k.scale = p.effective_scale();
  k.scale_log2 = k.scale * attn::kLog2e;
  k.has_softcap = p.softcap > 0.0f;
  if (k.has_softcap) {
    k.softcap_over_scale = p.softcap / k.scale;
    k.scale_over_softcap = k.scale / p.softcap;
  }
  return unit->launch(a, stream);
}

}  // namespace

Status encode_operand_map(CUtensorMap* map, const OperandView& view, DType dtype, int box_rows, int box_chunks) {
  PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;
  FC_RETURN_IF_ERROR(get_encode_tiled(&encode));
  constexpr int64_t kElem = 2;  // fp16 / bf16
  const int seqlen = view.seqlen > 0 ? view.seqlen : 1;  // Sk = 0: never loaded, but dims must be >= 1
  const cuuint64_t seq_stride = usable_stride(view.seq_stride, seqlen) * kElem;
  const cuuint64_t head_stride = usable_stride(view.head_stride, view.heads) * kElem;
  const cuuint64_t batch_stride = usable_stride(view.batch_stride, view.batch) * kElem;
  const cuuint32_t element_strides[5] = {1, 1, 1, 1, 1};
  const CUtensorMapDataType type =
      dtype == DType::kBFloat16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  CUresult res;
  if (!chunked_map(view.head_dim)) {
    const cuuint64_t dims[5] = {64, (cuuint64_t)seqlen, (cuuint64_t)(view.head_dim / 64), (cuuint64_t)view.heads,
                                (cuuint64_t)view.batch};
    const cuuint64_t strides[4] = {seq_stride, 128, head_stride, batch_stride};
    const cuuint32_t chunks = box_chunks > 0 ? (cuuint32_t)box_chunks : (cuuint32_t)(view.head_dim / 64);
    const cuuint32_t box[5] = {64, (cuuint32_t)box_rows, chunks, 1, 1};
    res = encode(map, type, 5, const_cast<void*>(view.base), dims, strides, box, element_strides,
                 CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                 CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  } else {
    const cuuint64_t dims[4] = {(cuuint64_t)view.head_dim, (cuuint64_t)seqlen, (cuuint64_t)view.heads,
                                (cuuint64_t)view.batch};
    const cuuint64_t strides[3] = {seq_stride, head_stride, batch_stride};
    const cuuint32_t box[4] = {64, (cuuint32_t)box_rows, 1, 1};
    res = encode(map, type, 4, const_cast<void*>(view.base), dims, strides, box, element_strides,
                 CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                 CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  }
  if (res != CUDA_SUCCESS) {
    return Status::Internal("sm90: cuTensorMapEncodeTiled failed with CUresult " + std::to_string((int)res) +
                            " (head_dim " + std::to_string(view.head_dim) + ", seqlen " + std::to_string(view.seqlen) +
                            ", box rows " + std::to_string(box_rows) + ")");
  }
  return Status::Ok();
}

}  // namespace sm90

namespace detail {
PathOps sm90_path() { return {KernelPath::kSm90, &sm90::sm90_supports, &sm90::sm90_run}; }
}  // namespace detail

}  // namespace flashcore
