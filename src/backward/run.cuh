// One backward call of a fused path: the workspace (workspace.hpp) in one stream-ordered
// allocation, zeroed turn counters (deterministic mode), preprocess (which zeroes the dQ accumulator), the
// path's main kernel, postprocess (both dQ accumulator steps only where the main kernel adds into
// it), free. Every step runs on the caller's stream; after the first
// error nothing more is launched, and the workspace is freed either way.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "backward/postprocess.cuh"
#include "backward/preprocess.cuh"
#include "backward/workspace.hpp"
#include "common/cuda_check.hpp"
#include "common/dependent_launch.hpp"

namespace flashcore::backward {

// Where dQ goes: added into the workspace's fp32 accumulator, which the postprocess scales and
// converts (kAccumulated), or written to dq, scaled, by the main kernel itself (kWrittenByMain: no
// accumulator, no zeroing, no postprocess).
enum class DqOutput { kAccumulated, kWrittenByMain };

// main_kernel(ws) launches the path's main kernel on `stream` and returns its Status; where the device
// takes programmatic dependent launches (common/dependent_launch.hpp) it launches it as a dependent of
// the preprocess, whose blocks let it start (ptx::allow_next_grid_to_start) and which its blocks wait
// for (ptx::wait_for_previous_grid) before they read lse2, D or the zeroed accumulator; every block
// waits, even one with nothing to do, so the main kernel completes after the preprocess. dq_layout: the
// accumulator the kernel adds into (its columns: the kernel's head dim, which a padded call's dQ rows
// hold; its fragment-ordered blocks, if any). `path` names the path in error messages.
template <typename Element, class MainKernel>
Status run_backward(const BackwardParams& bp, DqLayout dq_layout, const char* path, cudaStream_t stream,
                    MainKernel&& main_kernel, DqOutput dq_output = DqOutput::kAccumulated) {
  const int kernel_dqk = dq_layout.cols;
  const AttentionParams& p = bp.forward;
  const std::string where = std::string(path) + " backward: ";
  const bool accumulated = dq_output == DqOutput::kAccumulated;
  BwdWorkspaceBytes bytes;
  bwd_workspace_layout(p, kernel_dqk, nullptr, &bytes, accumulated);
  void* base = nullptr;
  FC_CUDA_RETURN(cudaMallocAsync(&base, bytes.total(), stream));
  BwdWorkspace ws = bwd_workspace_layout(p, kernel_dqk, base, &bytes, accumulated);
  ws.dq_tile_rows = dq_layout.tile_rows;
  Status status = Status::Ok();
  // The preprocess zeroes the dQ accumulator (ws.dq_accum, null when the main kernel writes dq).
  if (bp.deterministic) {
    status = cuda_status(cudaMemsetAsync(ws.dq_turn, 0, bytes.turns, stream), (where + "zeroing the turn counters").c_str());
  }
  if (status.ok()) {
    const unsigned row_blocks = unsigned(round_up(padded_rows(p.seqlen_q), kPreprocessRows) / kPreprocessRows);
    bwd_preprocess_kernel<Element><<<dim3(row_blocks, p.heads_q, p.batch), kPreprocessThreads, 0, stream>>>(bp, ws);
    status = cuda_status(cudaGetLastError(), (where + "bwd_preprocess_kernel").c_str());
  }
  if (status.ok()) status = main_kernel(ws);
  const bool dependent = dependent_launch_supported();
  // The postprocess is a programmatic dependent of the main kernel: its blocks may be scheduled as
  // the main kernel's last ones drain, and wait for it to complete before they read the accumulator.
  if (status.ok() && accumulated && ws.dq_tile_rows == 0) {
    const unsigned row_blocks = unsigned((p.seqlen_q + kPostprocessRows - 1) / kPostprocessRows);
    status = cuda_status(launch_kernel(&bwd_postprocess_kernel<Element>, dim3(row_blocks, p.heads_q, p.batch),
                                       dim3(kPostprocessThreads), 0, stream, dependent, bp, ws),
                         (where + "bwd_postprocess_kernel").c_str());
  } else if (status.ok() && accumulated) {
    const unsigned row_blocks = unsigned((p.seqlen_q + ws.dq_tile_rows - 1) / ws.dq_tile_rows);
    const size_t smem = size_t(ws.dq_tile_rows) * kDqTilePitch * 4;
    status = cuda_status(launch_kernel(&bwd_postprocess_tiles_kernel<Element>, dim3(row_blocks, p.heads_q, p.batch),
                                       dim3(kPostprocessThreads), smem, stream, dependent, bp, ws),
                         (where + "bwd_postprocess_tiles_kernel").c_str());
  }
  const cudaError_t freed = cudaFreeAsync(base, stream);
  if (status.ok()) status = cuda_status(freed, (where + "freeing the workspace").c_str());
  return status;
}

}  // namespace flashcore::backward
