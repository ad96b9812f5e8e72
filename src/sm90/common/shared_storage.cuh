// The start of every sm90 kernel: its SharedStorage placed in the dynamic shared window, and the
// thread's warp roles.
#pragma once

#include <cstdint>

#include "common/host_device.hpp"
#include "ptx/mbarrier.hpp"

namespace flashcore::sm90 {

#if defined(__CUDACC__)
// Swizzled tiles must sit on 1024-byte boundaries of the shared window (tensor-core notes §3), which
// dynamic shared memory only guarantees to 16 bytes: kernels ask for 1 KiB of slack and start their
// storage at the first boundary.
template <class Storage>
FC_DEVICE Storage& aligned_shared_storage(uint8_t* smem_raw) {
  const uint32_t misalign = ptx::smem_addr(smem_raw) & 1023u;
  return *reinterpret_cast<Storage*>(smem_raw + ((1024u - misalign) & 1023u));
}

// Warpgroup and warp (within it) broadcast from lane 0, so the compiler knows they are warp-uniform
// and keeps what derives from them in uniform registers.
struct WarpRoles {
  int warpgroup, warp, lane;
};
FC_DEVICE WarpRoles uniform_warp_roles() {
  return {__shfl_sync(0xffffffffu, int(threadIdx.x / 128), 0), __shfl_sync(0xffffffffu, int(threadIdx.x / 32) % 4, 0),
          int(threadIdx.x % 32)};
}
#endif  // __CUDACC__

}  // namespace flashcore::sm90
