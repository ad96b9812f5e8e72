// Where a pointer lives, as the API sees it: one classification for validation (which side reads
// cu_seqlens and friends) and dispatch (whether the CPU reference or a GPU path runs the call).
#pragma once

namespace flashcore::detail {

enum class Memory { kHostPageable, kHostPinned, kDevice, kManaged };

// cudaPointerGetAttributes' answer; with no device or driver every pointer is plain host memory.
Memory memory_of(const void* ptr);

// Pageable or pinned host memory: read directly by the host, and a q there means the CPU path runs.
inline bool is_host(Memory m) { return m == Memory::kHostPageable || m == Memory::kHostPinned; }

}  // namespace flashcore::detail
