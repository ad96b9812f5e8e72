// The contract between dispatch and each kernel path. A path answers `supports` (and why not) and
// `run`s a validated call. Paths that a build prunes are still declared: their stub answers
// "not built" so the error comes from the same table as every other capability.
#pragma once

#include <string>

#include "flashcore/flashcore.hpp"

namespace flashcore::detail {

// Facts about the device the call runs on (or the host, for the CPU path).
struct DeviceInfo {
  bool has_device = false;   // a CUDA device is usable
  int device = -1;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  size_t max_smem_per_block_optin = 0;
  bool pointers_on_host = false;  // q/k/v/o are host memory: only the CPU path applies
};

// Queries the current device and where params' pointers live.
Status query_device(const AttentionParams& params, DeviceInfo* info);

// One entry per concrete path. `supports` returns an empty string when it can run the call,
// otherwise the reason. `run` assumes a validated call that `supports` accepted. `defers` (optional):
// non-empty when automatic dispatch should pass a call this path supports on to a later path that
// runs it faster (the reason); a call pinned to the path still runs there.
struct PathOps {
  KernelPath path;
  std::string (*supports)(const AttentionParams&, const DeviceInfo&);
  Status (*run)(const AttentionParams&, const DeviceInfo&, cudaStream_t);
  std::string (*defers)(const AttentionParams&, const DeviceInfo&) = nullptr;
};

// The first path of the dispatch order (dispatch.cpp) that supports `params` on `info`'s device
// (params.path pins one), or Unsupported with every path's reason. For callers that know the device
// facts already (the KV-cache call, whose stream-ordered temporaries cannot be classified while a
// graph is being captured).
// `refusals`, when given, receives the "\n  <path>: <reason>" lines of the paths passed over.
Status select_path(const AttentionParams& params, const DeviceInfo& info, PathOps* chosen,
                   std::string* refusals = nullptr);

// Whether a call that chose `chosen` by kAuto landed on the naive GPU reference: the slow-path
// policy applies (api/slow_path.hpp).
inline bool fell_back_to_naive(const AttentionParams& params, KernelPath chosen) {
  return params.path == KernelPath::kAuto && chosen == KernelPath::kNaiveGpu;
}

// The backward of a path (one table per operation: a path lists its backward here once it has one).
struct BackwardOps {
  KernelPath path;
  std::string (*supports)(const BackwardParams&, const DeviceInfo&);
  Status (*run)(const BackwardParams&, const DeviceInfo&, cudaStream_t);
};
BackwardOps sm90_backward_path();  // stubbed when the sm90 path is pruned
BackwardOps sm80_backward_path();  // stubbed when the sm80 path is pruned
BackwardOps naive_gpu_backward_path();
BackwardOps cpu_reference_backward_path();

// Implemented by each path (src/sm90, src/sm80, src/reference) or by its stub when pruned.
PathOps decode_path();  // src/sm80/decode (part of the sm80 build; stubbed with it)
PathOps sm90_path();
PathOps sm80_path();
PathOps naive_gpu_path();
PathOps cpu_reference_path();

// Empty when q, k, v, o (base pointers, strides, last-dim extents) allow `vector_bytes`-wide
// accesses; otherwise the reason, naming the argument. Fast paths call it from supports();
// validation itself only requires element alignment. (Defined in validate.cpp.)
std::string vector_alignment_problem(const AttentionParams& params, int vector_bytes = 16);
// The same for a backward call: the forward's tensors and dout, dq, dk, dv.
std::string vector_alignment_problem(const BackwardParams& params, int vector_bytes = 16);

}  // namespace flashcore::detail
