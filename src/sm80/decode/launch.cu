// The decode path's entry in the dispatch table: supports() says exactly why a call cannot run
// here; run() hands the call to its (Dqk, Dv, dtype) instantiation (kernel.cuh's launch_decode:
// plan, split kernel, combine).
#include <string>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "api/built_kernels.hpp"
#include "api/paths.hpp"
#include "attention/mask.hpp"
#include "sm80/decode/launch_decode.hpp"
#include "sm80/decode/tile_config.hpp"

namespace flashcore::detail {

namespace {

using LaunchFn = Status (*)(const AttentionParams&, int device, int sm_count, bool compact, cudaStream_t);
using Instantiation = BuiltKernel<LaunchFn>;

constexpr Instantiation kInstantiations[] = {
#define FLASHCORE_KERNEL(DQK, DV, DTYPE, ELEMENT, BUILT) \
  FLASHCORE_BUILT_ENTRY(BUILT, (&sm80::launch_decode<DQK, DV, ELEMENT>), DQK, DV, DTYPE)
#include "kernels/sm80_decode_kernels.inc"
#undef FLASHCORE_KERNEL
    {0, 0, DType::kFloat32, nullptr},  // end marker (keeps the table non-empty in pruned builds)
};

// The call's own (Dqk, Dv), or the covering pair it is padded to (api/built_kernels.hpp).
const Instantiation* find_kernel(const AttentionParams& p) {
  return find_covering_kernel(kInstantiations, p.head_dim_qk, p.head_dim_v, p.dtype);
}

// Packed query rows (tokens x query heads per KV head) up to which a dense call is decode-shaped:
// two row tiles. Beyond it each extra tile re-reads the whole K/V, and the prefill paths (which
// stream K/V once per 128-row tile) are faster.
constexpr int kMaxDenseRows = 64;

int64_t packed_rows(const AttentionParams& p) { return int64_t(p.seqlen_q) * (p.heads_q / p.heads_kv); }

std::string decode_supports(const AttentionParams& p, const DeviceInfo& d) {
  if (!d.has_device || d.pointers_on_host) return "the decode path needs a CUDA device and device pointers";
  if (d.cc_major < 8) {
    return "the decode path needs compute capability >= 8.0 (device is sm_" + std::to_string(d.cc_major) +
           std::to_string(d.cc_minor) + ")";
  }
  if (std::string why = missing_code_reason("sm80-path", d.cc_major, d.cc_minor); !why.empty()) return why;
  if (p.dtype != DType::kFloat16 && p.dtype != DType::kBFloat16) return "the decode path runs fp16 and bf16 only";
  if (find_kernel(p) == nullptr) {
    return "head dims Dqk=" + std::to_string(p.head_dim_qk) + ", Dv=" + std::to_string(p.head_dim_v) + " in " +
           dtype_name(p.dtype) + " are not in this build of the decode path (built: " + built_kernels_list(kInstantiations) +
           "; padded to a covering pair when both are multiples of " + std::to_string(kPaddedHeadDimMultiple) + ")";
  }
  const int64_t rows = packed_rows(p);
  if (!attn::uses_kv_cache_layout(p) && rows > kMaxDenseRows) {
    return "prefill-shaped call: " + std::to_string(rows) + " query rows per KV head (seqlen_q x heads_q / heads_kv) "
           "exceed the decode path's " + std::to_string(kMaxDenseRows) + " for dense K/V";
  }
  const bool wide_rows = sm80::decode_wide_rows(rows);  // the tile shape launch_decode picks
  const Instantiation* inst = find_kernel(p);
  // The table's shape, or its compact variant where the device allows less (common/smem_budget.hpp).
  const int smem = sm80::decode_smem_bytes(
      inst->head_dim_qk, inst->head_dim_v, int(dtype_size(p.dtype)),
      sm80::decode_shape_for(inst->head_dim_qk, inst->head_dim_v, wide_rows, sm80::decode_kv(p.is_paged(), p.page_size),
                             (long long)d.max_smem_per_block_optin));
  if (size_t(smem) > d.max_smem_per_block_optin) {
    return "the decode kernel for Dqk=" + std::to_string(inst->head_dim_qk) + ", Dv=" + std::to_string(inst->head_dim_v) +
           " needs " + std::to_string(smem) + " bytes of shared memory per block; the device allows " +
           std::to_string(d.max_smem_per_block_optin);
  }
  // 16-byte cp.async rows of q, k, v; 8-byte stores of o.
  if (std::string why = vector_alignment_problem(p, 16); !why.empty()) return why;
  if (p.batch > 65535 || p.heads_kv > 65535) return "the decode path launches at most 65535 batch entries and KV heads";
  return "";
}

// Automatic dispatch passes prefill-shaped paged calls on to the sm90 path where it takes them: it
// streams whole pages through TMA once per 128-row query tile. The decode path still runs them when
// pinned, and runs every paged call on other devices.
std::string decode_defers(const AttentionParams& p, const DeviceInfo& d) {
  if (!p.is_paged() || packed_rows(p) <= kMaxDenseRows || !sm90_path().supports(p, d).empty()) return "";
  return "prefill-shaped paged call: " + std::to_string(packed_rows(p)) +
         " query rows per KV head exceed the decode path's " + std::to_string(kMaxDenseRows) +
         "; the sm90 path reads these pages faster";
}

Status decode_run(const AttentionParams& p, const DeviceInfo& d, cudaStream_t stream) {
  const Instantiation* inst = find_kernel(p);
  if (inst == nullptr) return Status::Unsupported("decode: no instantiation for this call");
  const bool compact = sm80::decode_compact(inst->head_dim_qk, inst->head_dim_v, sm80::decode_wide_rows(packed_rows(p)),
                                            sm80::decode_kv(p.is_paged(), p.page_size),
                                            (long long)d.max_smem_per_block_optin);
  return inst->launch(p, d.device, d.sm_count, compact, stream);
}

}  // namespace

PathOps decode_path() { return {KernelPath::kDecode, &decode_supports, &decode_run, &decode_defers}; }

}  // namespace flashcore::detail
