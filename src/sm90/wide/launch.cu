// Host side of the sm90 wide forward: which (Dqk, Dv) tile a call runs on, and its launch.
#include "sm90/wide/launch.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "api/built_kernels.hpp"
#include "sm90/wide/kernel.cuh"

namespace flashcore::sm90::wide {

namespace {

using LaunchFn = Status (*)(const AttentionParams&, cudaStream_t);
using Instantiation = detail::BuiltKernel<LaunchFn>;

constexpr Instantiation kInstantiations[] = {
#define FLASHCORE_KERNEL(DQK, DV, DTYPE, ELEMENT, BUILT) \
  FLASHCORE_BUILT_ENTRY(BUILT, (&launch_wide<DQK, DV, ELEMENT>), DQK, DV, DTYPE)
#include "kernels/sm90_wide_kernels.inc"
#undef FLASHCORE_KERNEL
    {0, 0, DType::kFloat32, nullptr},  // end marker (keeps the table non-empty in pruned builds)
};

// The tile a call runs on (api/built_kernels.hpp: find_dv_parts_kernel); nullptr if none.
const Instantiation* wide_tile(const AttentionParams& p) {
  int parts = 0;
  return detail::find_dv_parts_kernel(kInstantiations, p.head_dim_qk, p.head_dim_v, p.dtype, &parts);
}

}  // namespace

std::string why_not(const AttentionParams& p) {
  if (wide_tile(p) == nullptr) {
    return "head dims " + std::to_string(p.head_dim_qk) + "/" + std::to_string(p.head_dim_v) + " in " +
           dtype_name(p.dtype) + " are not covered by this build's sm90 wide kernels (built: " +
           detail::built_kernels_list(kInstantiations) +
           "; a call runs on a tile with Dqk >= its own, Dv in parts of the tile's, both multiples of " +
           std::to_string(detail::kPaddedHeadDimMultiple) + ")";
  }
  return "";
}

Status run(const AttentionParams& p, cudaStream_t stream) {
  const Instantiation* tile = wide_tile(p);
  if (tile == nullptr) return Status::Unsupported(why_not(p));
  return tile->launch(p, stream);
}

}  // namespace flashcore::sm90::wide
