// Varlen calls without a host sync: their device-resident cu_seqlens_q/k and seqused_k are checked
// on the device, in stream order, by a one-block kernel that records the first problem it finds in a
// word of mapped host memory; the next call (or check_errors()) reports it. The kernels themselves
// clamp every length into the tensors (attention/mask.hpp, sequence_extent), so a malformed array
// gives wrong results, never an access outside q, k, v or o.
#pragma once

#include <cuda_runtime.h>

#include "flashcore/flashcore.hpp"

namespace flashcore::detail {

// Launches the device check when the call has device-resident varlen arrays that validate() did not
// read (check_device_metadata off, or the stream is capturing a graph); a no-op otherwise.
Status check_metadata_on_device(const AttentionParams& params, cudaStream_t stream);

// The problem an earlier call's device check recorded (InvalidArgument, naming the array, index and
// values), clearing it; Ok if none. Reads host memory only: no synchronization.
Status take_deferred_error();

// Whether any call launched the device check in this process (check_errors() has nothing to wait for
// otherwise).
bool device_check_ever_ran();

}  // namespace flashcore::detail
