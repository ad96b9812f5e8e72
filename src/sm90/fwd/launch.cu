// The sm90 forward path's entry: supports() (what this path computes, and exactly why not otherwise)
// and run() (the plan's kernel choice, then the (head dims, dtype) unit of this build that holds it).
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <string>

#include "api/built_kernels.hpp"
#include "api/paths.hpp"
#include "attention/mask.hpp"
#include "attention/score_transform.hpp"
#include "common/cuda_check.hpp"
#include "sm90/fwd/kernel_traits.cuh"
#include "sm90/fwd/launch_args.hpp"
#include "sm90/wide/launch.hpp"

namespace flashcore {
namespace sm90 {

namespace {

// ---- What this build holds (cmake/KernelList.cmake) -----------------------------------------------
using BuiltUnit = detail::BuiltKernel<Status (*)(const LaunchArgs&, cudaStream_t)>;

constexpr BuiltUnit kBuiltUnits[] = {
#define FLASHCORE_KERNEL(DQK, DV, DTYPE, ELEMENT, BUILT) \
  FLASHCORE_BUILT_ENTRY(BUILT, (&launch_forward<DQK, DV, ELEMENT>), DQK, DV, DTYPE)
#include "kernels/sm90_fwd_kernels.inc"
#undef FLASHCORE_KERNEL
    {0, 0, DType::kFloat32, nullptr},  // end marker (keeps the array non-empty in pruned builds)
};

// Every kernel the list declares for this path, built in this build or not.
constexpr detail::DeclaredKernel kDeclared[] = {
#define FLASHCORE_KERNEL(DQK, DV, DTYPE, ELEMENT, BUILT) {DQK, DV, DType::DTYPE},
#include "kernels/sm90_fwd_kernels.inc"
#undef FLASHCORE_KERNEL
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
// 0 for a head-dim pair the kernel list does not declare for this path.
size_t smem_needed(int dqk, int dv) {
#define FLASHCORE_KERNEL(DQK, DV, DTYPE, ELEMENT, BUILT) \
  if (dqk == DQK && dv == DV) return smem_estimate<DQK, DV>();
#include "kernels/sm90_fwd_kernels.inc"
#undef FLASHCORE_KERNEL
  return 0;
}

// Rows and batch entries of the q/o and k/v tensor maps: dense [B][S], or varlen's packed tokens.
struct TokenAxes {
  int rows_q = 0, rows_k = 0, batch = 0;
};
TokenAxes token_axes(const AttentionParams& p) {
  if (p.is_varlen()) return {(int)p.total_q, (int)p.total_k, 1};  // validate(): total_q/k < 2^31
  return {p.seqlen_q, p.seqlen_k, p.batch};
}
// The k and v maps' views: the call's tensors, or the page pool (a page per map batch).
OperandView key_view(const AttentionParams& p, const void* base, int head_dim, int64_t seq_stride, int64_t head_stride,
                     int64_t batch_stride) {
  if (p.is_paged()) return {base, head_dim, p.page_size, p.heads_kv, p.num_pages, seq_stride, head_stride, batch_stride};
  const TokenAxes ax = token_axes(p);
  return {base, head_dim, ax.rows_k, p.heads_kv, ax.batch, seq_stride, head_stride, batch_stride};
}

std::string operand_strides_problem(const AttentionParams& p);

std::string sm90_supports(const AttentionParams& p, const detail::DeviceInfo& d) {
  if (p.kv_batch_idx != nullptr || p.leftpad_k != nullptr) {
    return "the sm90 path reads dense, varlen or paged K/V (kv_batch_idx, leftpad_k: the decode path)";
  }
  if (p.is_paged()) {
    // A page is read in boxes of gcd(page_size, kBlockN) rows, which must keep the tiles' 8-row
    // swizzle pattern (mainloop.cuh, Producer::load_paged_block).
    if (p.page_size % 8 != 0) {
      return "page_size " + std::to_string(p.page_size) +
             ": the sm90 path reads pages of a multiple of 8 rows (the decode path takes any page size)";
    }
    if (p.head_dim_qk >= wide::kMinHeadDim || p.head_dim_v >= wide::kMinHeadDim) {
      return "paged K/V with head dims above 256: not on the sm90 path (the decode path reads pages)";
    }
  }
  if (d.pointers_on_host || !d.has_device) return "the sm90 path needs device pointers on a CUDA device";
  if (d.cc_major != 9 || d.cc_minor != 0) {
    return "the sm90 path needs compute capability 9.0 (sm_90a); device is " + std::to_string(d.cc_major) + "." +
           std::to_string(d.cc_minor);
  }
  if (p.dtype != DType::kFloat16 && p.dtype != DType::kBFloat16) {
    return std::string("dtype ") + dtype_name(p.dtype) + " is not supported by the sm90 path (fp16, bf16 only)";
  }
  // The softmax takes each block's max over the unscaled dots (masked ones -inf) and only then
  // scales it, which gives the max of the scores only for a positive scale. The sm80 path scales
  // first when the scale is not positive.
  if (!(p.effective_scale() > 0.0f)) {
    return "softmax_scale " + std::to_string(p.effective_scale()) +
           " is not supported by the sm90 path (positive scales only; the sm80 path runs it)";
  }
  const std::string dims = "head dims " + std::to_string(p.head_dim_qk) + "/" + std::to_string(p.head_dim_v);
  if (p.head_dim_qk >= wide::kMinHeadDim || p.head_dim_v >= wide::kMinHeadDim) {
#if defined(FLASHCORE_HAS_SM90_WIDE)
    if (std::string why = wide::why_not(p); !why.empty()) return why;
    return operand_strides_problem(p);
#else
    return dims + " are not supported by the sm90 path in this build: head dims above 256 need its wide kernels "
                  "(FLASHCORE_BUILD_SM90_WIDE=ON, the default, builds them)";
#endif
  }
  if (detail::find_covering_kernel(kDeclared, p.head_dim_qk, p.head_dim_v, p.dtype) == nullptr) {
    return dims + " are not supported by the sm90 path (pairs: " + detail::declared_pairs_list(kDeclared) +
           ", and any head dims they cover that are multiples of " +
           std::to_string(detail::kPaddedHeadDimMultiple) + ")";
  }
  const BuiltUnit* unit = detail::find_covering_kernel(kBuiltUnits, p.head_dim_qk, p.head_dim_v, p.dtype);
  if (unit == nullptr) {
    // A pruned build (tests skip on this wording: "not in this build").
    return dims + " with " + dtype_name(p.dtype) +
           " are not in this build of the sm90 path (configure FLASHCORE_HEAD_DIMS / FLASHCORE_DTYPES; built: " +
           detail::built_kernels_list(kBuiltUnits) + ")";
  }
  const size_t smem = smem_needed(unit->head_dim_qk, unit->head_dim_v);
  if (d.max_smem_per_block_optin < smem) {
    return "the sm90 configuration for head dims " + std::to_string(unit->head_dim_qk) + "/" +
           std::to_string(unit->head_dim_v) + " needs " + std::to_string(smem) +
           " bytes of shared memory per block; the device allows " + std::to_string(d.max_smem_per_block_optin);
  }
  return operand_strides_problem(p);
}

// TMA's rules for the operands' bases and strides (every sm90 kernel loads and stores through TMA).
std::string operand_strides_problem(const AttentionParams& p) {
  // The tensor maps' extents: varlen packs the tokens (total_q/total_k rows, no batch dimension).
  const TokenAxes ax = token_axes(p);
  auto view = [&](const void* base, int64_t seq, int64_t head, int64_t batch, int rows, int heads) {
    return OperandView{base, 0, rows, heads, ax.batch, seq, head, batch};
  };
  std::string why = operand_view_problem(
      "q", view(p.q, p.q_seq_stride, p.q_head_stride, p.q_batch_stride, ax.rows_q, p.heads_q));
  if (why.empty() && p.k != nullptr) {
    why = operand_view_problem("k", key_view(p, p.k, 0, p.k_seq_stride, p.k_head_stride, p.k_batch_stride));
  }
  if (why.empty() && p.v != nullptr) {
    why = operand_view_problem("v", key_view(p, p.v, 0, p.v_seq_stride, p.v_head_stride, p.v_batch_stride));
  }
  if (!why.empty()) return why;
  // O leaves through TMA stores (or 4-byte stores of element pairs): the same rules as the inputs.
  return operand_view_problem("o", view(p.o, p.o_seq_stride, p.o_head_stride, p.o_batch_stride, ax.rows_q, p.heads_q));
}

Status sm90_run(const AttentionParams& p, const detail::DeviceInfo& d, cudaStream_t stream) {
#if defined(FLASHCORE_HAS_SM90_WIDE)
  if (p.head_dim_qk >= wide::kMinHeadDim || p.head_dim_v >= wide::kMinHeadDim) return wide::run(p, stream);
#endif
  // The call's own (Dqk, Dv) unit, or the covering one it is padded to (api/built_kernels.hpp).
  const BuiltUnit* unit = detail::find_covering_kernel(kBuiltUnits, p.head_dim_qk, p.head_dim_v, p.dtype);
  if (unit == nullptr) return Status::Unsupported(sm90_supports(p, d));

  LaunchArgs a;
  a.dtype = p.dtype;
  const TokenAxes ax = token_axes(p);
  a.q = {p.q, p.head_dim_qk, ax.rows_q, p.heads_q, ax.batch, p.q_seq_stride, p.q_head_stride, p.q_batch_stride};
  a.k = key_view(p, p.k, p.head_dim_qk, p.k_seq_stride, p.k_head_stride, p.k_batch_stride);
  a.v = key_view(p, p.v, p.head_dim_v, p.v_seq_stride, p.v_head_stride, p.v_batch_stride);
  a.o = {p.o, p.head_dim_v, ax.rows_q, p.heads_q, ax.batch, p.o_seq_stride, p.o_head_stride, p.o_batch_stride};
  a.sm_count = d.sm_count > 0 ? d.sm_count : 1;
  a.call = &p;
  if (p.overrides != nullptr) a.overrides = *p.overrides;
  FC_RETURN_IF_ERROR(choose_forward_kernel(p, unit->head_dim_qk, unit->head_dim_v, a.overrides, &a.kernel));

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
  k.total_q = p.total_q;
  // Paged keys live in the pool (attn::sequence_extent's rule); the producer counts a sequence's
  // keys from row 0 of its table row.
  k.total_k = p.is_paged() ? attn::kPagedKeyRowBound : p.total_k;
  if (p.is_paged()) {
    k.pages = attn::PageTable::of(p);
    k.page_div = FastDivmod(uint32_t(p.page_size));
  }
  k.mask = call_mask(p);
  k.mask_align = p.mask_align;
  // The score transform's scale and softcap, with the scale folded into exp2 and the softcap in dot
  // units; the kernel reads the ALiBi slopes per tile.
  const attn::ScoreTransform transform = attn::shared_score_transform(p);
  k.scale = transform.scale;
  k.scale_log2 = transform.scale * attn::kLog2e;
  k.has_softcap = transform.softcap > 0.0f;
  k.softcap = transform.dot_softcap();
  k.alibi_slopes = p.alibi_slopes;
  k.alibi_batch_stride = p.alibi_batch_stride;
  return unit->launch(a, stream);
}

}  // namespace

}  // namespace sm90

namespace detail {
PathOps sm90_path() { return {KernelPath::kSm90, &sm90::sm90_supports, &sm90::sm90_run}; }
}  // namespace detail

}  // namespace flashcore
