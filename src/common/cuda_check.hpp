// Turning CUDA runtime errors into Status values (the library never throws across its API).
#pragma once

#include <string>

#include <cuda_runtime_api.h>

#include "flashcore/flashcore.hpp"

namespace flashcore {

inline Status cuda_status(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::Ok();
  return Status::CudaError(std::string(what) + ": " + cudaGetErrorName(err) + " (" +
                           cudaGetErrorString(err) + ")");
}

}  // namespace flashcore

// Returns the Status from the enclosing function when a CUDA call fails.
#define FC_CUDA_RETURN(call)                                                    \
  do {                                                                          \
    const cudaError_t fc_err_ = (call);                                         \
    if (fc_err_ != cudaSuccess) return ::flashcore::cuda_status(fc_err_, #call); \
  } while (0)

// After a kernel launch: launch-configuration errors surface through cudaGetLastError.
#define FC_CHECK_LAUNCH(kernel_name)                                                   \
  do {                                                                                 \
    const cudaError_t fc_err_ = cudaGetLastError();                                    \
    if (fc_err_ != cudaSuccess) return ::flashcore::cuda_status(fc_err_, kernel_name); \
  } while (0)

#define FC_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::flashcore::Status fc_st_ = (expr);     \
    if (!fc_st_.ok()) return fc_st_;         \
  } while (0)
