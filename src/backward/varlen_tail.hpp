// Gradients of the tokens no varlen sequence owns: rows [cu_seqlens_q[B], total_q) of dq and
// [cu_seqlens_k[B], total_k) of dk, dv do not reach the output, so their gradient is 0. Every
// backward path leaves them to this step (attention_backward runs it after the path), so callers
// may pass unzeroed gradient buffers.
#pragma once

#include <cuda_runtime_api.h>

#include "flashcore/flashcore.hpp"

namespace flashcore::backward {

// Zeroes those rows of dq, dk, dv (a no-op for dense calls). Device gradients: one small kernel per
// tensor on `stream`, which reads cu_seqlens[B] itself (no host synchronization; graph-capturable);
// host gradients (the CPU reference): directly, reading the host cu_seqlens.
Status zero_varlen_gradient_tails(const BackwardParams& params, bool on_host, cudaStream_t stream);

}  // namespace flashcore::backward
