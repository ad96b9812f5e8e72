// Where a pointer lives, as the API sees it: one classification for validation (which side reads
// cu_seqlens and friends) and dispatch (whether the CPU reference or a GPU path runs the call).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "flashcore/flashcore.hpp"

namespace flashcore::detail {

enum class Memory { kHostPageable, kHostPinned, kDevice, kManaged };

// cudaPointerGetAttributes' answer; with no device or driver every pointer is plain host memory.
// (Any other failure is also taken for host memory here: the small arrays use it after
// classify_pointer has vetted the call's tensors.)
Memory memory_of(const void* ptr);

// The same for a tensor of the call, with its device, and with CUDA failures reported instead of
// guessed: a sticky error left by an earlier kernel fault (illegal address, ...) or a lost device is
// a CudaError naming it; only "no device / no driver" means host memory.
struct PointerInfo {
  Memory memory = Memory::kHostPageable;
  int device = -1;  // device memory: the device that owns it
};
Status classify_pointer(const void* ptr, PointerInfo* info);

// Pageable or pinned host memory: read directly by the host, and a q there means the CPU path runs.
inline bool is_host(Memory m) { return m == Memory::kHostPageable || m == Memory::kHostPinned; }

// Empty when memory `m` can be read by the side that runs the call (host: host memory; device:
// device, managed or pinned host memory), else the rule broken, naming the argument.
std::string placement_problem(const char* name, Memory m, bool runs_on_host);

// One small int32 array the kernels will read (cu_seqlens, seqused_k, block tables, cache lengths)
// and where its host copy goes.
struct SmallArray {
  const int32_t* src;
  int64_t count;
  std::vector<int32_t>* host;
};

// Copies the arrays to the host for validation. Host memory is read directly; device or managed
// memory is copied on `stream` (ordered after the work that produced it), then the stream is waited
// for once. While `stream` captures a graph no copy may run, and with check_device_metadata off the
// caller vouches for them: *available is then false and the device contents go unchecked.
Status read_small_arrays(const std::vector<SmallArray>& arrays, cudaStream_t stream, bool check_device_metadata,
                         bool* available);

}  // namespace flashcore::detail
