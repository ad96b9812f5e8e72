// Programmatic dependent launch (PDL): a kernel launched as a programmatic dependent of the
// previous kernel in its stream may be scheduled once every block of that kernel has called
// ptx::allow_next_grid_to_start (or exited), and must call ptx::wait_for_previous_grid before it
// touches what that kernel writes (ptx/barrier.hpp). Devices of compute capability 9.0 and later
// take it; elsewhere the same call is a plain launch.
#pragma once

#include <atomic>
#include <utility>

#include <cuda_runtime_api.h>

namespace flashcore {

// Whether `device` takes programmatic dependent launches, queried once per device.
inline bool dependent_launch_supported(int device) {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cached_major[kMaxDevices] = {};  // 0: not queried yet
  int major = device >= 0 && device < kMaxDevices ? cached_major[device].load(std::memory_order_acquire) : 0;
  if (major == 0) {
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    if (device >= 0 && device < kMaxDevices) cached_major[device].store(major, std::memory_order_release);
  }
  return major >= 9;
}

// The same for the calling thread's current device.
inline bool dependent_launch_supported() {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return dependent_launch_supported(device);
}

// kernel<<<grid, block, shared_bytes, stream>>>(args...), as a programmatic dependent of the
// previous kernel in the stream when `dependent` is set. Returns the launch's error.
template <typename... Params, typename... Args>
cudaError_t launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
                          bool dependent, Args&&... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  config.attrs = dependent ? &attribute : nullptr;
  config.numAttrs = dependent ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

}  // namespace flashcore
