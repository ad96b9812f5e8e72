// The least shared memory per block among the GPUs the sm80 kernels run on: sm_86 and sm_89 (RTX 30
// and 40 series, A10, A40, L4, L40S) and sm_120 allow 99 KB (101376 bytes) per block, against 163 KB
// on an A100 and 227 KB on Hopper. Each sm80 tuning table (fwd, bwd, decode) gives the entries that
// need more a compact variant within this budget; a launch takes the compact variant when the
// device's limit (DeviceInfo::max_smem_per_block_optin) is below its entry's need, and only those
// entries compile a second kernel. Host code includes this header.
#pragma once

namespace flashcore::sm80 {

inline constexpr int kCompactSmemBytes = 101376;

}  // namespace flashcore::sm80
