#include "api/memory.hpp"

#include <cuda_runtime_api.h>

namespace flashcore::detail {

Memory memory_of(const void* ptr) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    cudaGetLastError();  // no device or no driver: plain host memory (and no sticky error left)
    return Memory::kHostPageable;
  }
  switch (attr.type) {
    case cudaMemoryTypeHost: return Memory::kHostPinned;
    case cudaMemoryTypeDevice: return Memory::kDevice;
    case cudaMemoryTypeManaged: return Memory::kManaged;
    default: return Memory::kHostPageable;
  }
}

}  // namespace flashcore::detail
