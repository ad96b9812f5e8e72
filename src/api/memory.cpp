#include "api/memory.hpp"

#include <cstring>
#include <string>

#include <cuda_runtime_api.h>

#include "common/cuda_check.hpp"

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

std::string placement_problem(const char* name, Memory m, bool runs_on_host) {
  if (runs_on_host && m == Memory::kDevice) {
    return std::string(name) + ": must be host memory when q is host memory (got device memory)";
  }
  if (!runs_on_host && m == Memory::kHostPageable) {
    return std::string(name) + ": must be device-accessible memory (device, managed or pinned host) when q is device "
           "memory (got pageable host memory)";
  }
  return "";
}

Status classify_pointer(const void* ptr, PointerInfo* info) {
  *info = PointerInfo{};
  cudaPointerAttributes attr{};
  const cudaError_t err = cudaPointerGetAttributes(&attr, ptr);
  if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver || err == cudaErrorInitializationError) {
    cudaGetLastError();  // no usable device: every pointer is host memory
    return Status::Ok();
  }
  if (err != cudaSuccess) {
    cudaGetLastError();  // clears a non-sticky error; a sticky one stays and is reported again later
    return Status::CudaError(std::string("cudaPointerGetAttributes: ") + cudaGetErrorName(err) + " (" +
                             cudaGetErrorString(err) +
                             "); an earlier failure (e.g. a kernel fault, which leaves the CUDA context unusable) "
                             "must be handled before further calls");
  }
  switch (attr.type) {
    case cudaMemoryTypeHost: info->memory = Memory::kHostPinned; break;
    case cudaMemoryTypeDevice: info->memory = Memory::kDevice; break;
    case cudaMemoryTypeManaged: info->memory = Memory::kManaged; break;
    default: info->memory = Memory::kHostPageable; break;
  }
  info->device = attr.device;
  return Status::Ok();
}

Status read_small_arrays(const std::vector<SmallArray>& arrays, cudaStream_t stream, bool check_device_metadata,
                         bool* available) {
  *available = true;
  bool any_on_device = false;
  for (const SmallArray& a : arrays) any_on_device = any_on_device || !is_host(memory_of(a.src));
  if (any_on_device && !check_device_metadata) {  // the caller vouches for the contents: no sync
    *available = false;
    return Status::Ok();
  }
  if (any_on_device) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    FC_CUDA_RETURN(cudaStreamIsCapturing(stream, &capture));
    if (capture != cudaStreamCaptureStatusNone) {
      *available = false;
      return Status::Ok();
    }
  }
  for (const SmallArray& a : arrays) {
    a.host->assign(size_t(a.count), 0);
    const size_t bytes = size_t(a.count) * sizeof(int32_t);
    if (is_host(memory_of(a.src))) {
      std::memcpy(a.host->data(), a.src, bytes);
    } else {
      FC_CUDA_RETURN(cudaMemcpyAsync(a.host->data(), a.src, bytes, cudaMemcpyDefault, stream));
    }
  }
  if (any_on_device) FC_CUDA_RETURN(cudaStreamSynchronize(stream));
  return Status::Ok();
}

}  // namespace flashcore::detail
