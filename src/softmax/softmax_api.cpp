// softmax_forward: validate every argument, find where the data lives, resolve the variant, run.
// Nothing is written before every check has passed.
#include <cstdint>
#include <limits>
#include <string>

#include "api/guard.hpp"
#include "common/cuda_check.hpp"
#include "softmax/launch.hpp"

namespace flashcore {

const char* softmax_variant_name(SoftmaxVariant variant) {
  switch (variant) {
    case SoftmaxVariant::kAuto: return "auto";
    case SoftmaxVariant::kSharedMemReduction: return "shared_mem_reduction";
    case SoftmaxVariant::kWarpShuffle: return "warp_shuffle";
    case SoftmaxVariant::kVectorized: return "vectorized";
    case SoftmaxVariant::kOnline: return "online";
    case SoftmaxVariant::kRowPerWarp: return "row_per_warp";
    case SoftmaxVariant::kRowPerBlock: return "row_per_block";
    case SoftmaxVariant::kMultiBlock: return "multi_block";
    case SoftmaxVariant::kRowInSharedMem: return "row_in_smem";
  }
  return "unknown";
}

namespace {

using softmax::SoftmaxProblem;

// kAuto: fewer rows than SMs cannot fill the GPU with a block per row; rows at least this long are
// then split across blocks (kMultiBlock) instead.
constexpr int64_t kMultiBlockMinCols = 16384;
// kAuto: 16-bit rows longer than this go to kRowInSharedMem. Above 8192 columns step 6 holds fewer
// than four rows per SM (its 32 elements per thread cap the block count); measured: step 6 wins at
// 4096 columns, step 8 at 32000 (docs/softmax.md).
constexpr int64_t kSharedMemMinCols16Bit = 8192;

bool is_known_dtype(DType dtype) {
  return dtype == DType::kFloat16 || dtype == DType::kBFloat16 || dtype == DType::kFloat32;
}

bool is_known_variant(SoftmaxVariant variant) {
  const int value = static_cast<int>(variant);
  return value >= 0 && value < kSoftmaxVariantCount;
}

// True for device (or managed) memory; host memory, and any pointer when no CUDA device is usable,
// runs the CPU path.
bool is_device_pointer(const void* ptr) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    cudaGetLastError();  // no device / unknown pointer: clear the error so later calls are unaffected
    return false;
  }
  return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
}

bool byte_ranges_overlap(const void* a, int64_t a_bytes, const void* b, int64_t b_bytes) {
  const auto a_begin = reinterpret_cast<uintptr_t>(a);
  const auto b_begin = reinterpret_cast<uintptr_t>(b);
  return a_begin < b_begin + uint64_t(b_bytes) && b_begin < a_begin + uint64_t(a_bytes);
}

const char* memory_name(bool on_device) { return on_device ? "device" : "host"; }

// Every rule that does not depend on the variant. `*nothing_to_do` is set for rows == 0.
Status validate_arguments(const void* x, const void* y, const float* lse, int64_t rows, int64_t cols,
                          DType dtype, SoftmaxVariant variant, bool* nothing_to_do, bool* on_device) {
  *nothing_to_do = false;
  *on_device = false;
  if (!is_known_variant(variant)) {
    return Status::InvalidArgument("variant: unknown SoftmaxVariant value " + std::to_string(static_cast<int>(variant)));
  }
  if (!is_known_dtype(dtype)) {
    return Status::InvalidArgument("dtype: unknown DType value " + std::to_string(static_cast<int>(dtype)) +
                                   " (float16, bfloat16 or float32)");
  }
  if (rows < 0) return Status::InvalidArgument("rows: must be >= 0 (got " + std::to_string(rows) + ")");
  if (cols < 0) return Status::InvalidArgument("cols: must be >= 1 (got " + std::to_string(cols) + ")");
  if (rows == 0) {
    *nothing_to_do = true;
    return Status::Ok();
  }
  if (cols == 0) return Status::InvalidArgument("cols: must be >= 1 when rows > 0 (got 0; softmax of an empty row is undefined)");
  if (x == nullptr) return Status::InvalidArgument("x: must not be null");
  if (y == nullptr) return Status::InvalidArgument("y: must not be null");
  const int64_t elem_bytes = dtype_size(dtype);
  if (cols > std::numeric_limits<int64_t>::max() / elem_bytes / rows) {
    return Status::InvalidArgument("rows * cols: " + std::to_string(rows) + " x " + std::to_string(cols) +
                                   " elements overflow a 64-bit byte count");
  }
  const int64_t tensor_bytes = rows * cols * elem_bytes;
  if (x != y && byte_ranges_overlap(x, tensor_bytes, y, tensor_bytes)) {
    return Status::InvalidArgument("y: overlaps x without being x (in place needs y == x exactly)");
  }
  if (lse != nullptr && (byte_ranges_overlap(lse, rows * int64_t(sizeof(float)), x, tensor_bytes) ||
                         byte_ranges_overlap(lse, rows * int64_t(sizeof(float)), y, tensor_bytes))) {
    return Status::InvalidArgument("lse: overlaps x or y");
  }
  const bool x_on_device = is_device_pointer(x);
  if (is_device_pointer(y) != x_on_device) {
    return Status::InvalidArgument(std::string("y: must live in the same memory as x (") + memory_name(x_on_device) + ")");
  }
  if (lse != nullptr && is_device_pointer(lse) != x_on_device) {
    return Status::InvalidArgument(std::string("lse: must live in the same memory as x (") + memory_name(x_on_device) + ")");
  }
  *on_device = x_on_device;
  return Status::Ok();
}

bool row_fits_shared_mem(const SoftmaxProblem& p) {
  return p.cols * dtype_size(p.dtype) <= softmax::row_in_shared_mem_max_bytes(p);
}

SoftmaxVariant auto_variant(const SoftmaxProblem& p) {
  if (p.cols <= kSoftmaxRowPerWarpMaxCols) return SoftmaxVariant::kRowPerWarp;
  if (p.rows < p.sm_count && p.cols >= kMultiBlockMinCols) return SoftmaxVariant::kMultiBlock;
  // Long 16-bit rows: step 6 holds them in registers only with few big blocks per SM (one at 32000
  // columns), step 8 keeps several rows per SM in shared memory (measured on the H200: 97% of copy
  // vs 77% at 8192x32000; at 4096 columns step 6 is 1-3% faster, so shorter rows stay there).
  // fp32 rows reach copy bandwidth in registers (step 6 equal or ahead at 4096 and 32000 columns).
  if (p.dtype != DType::kFloat32 && p.cols > kSharedMemMinCols16Bit && row_fits_shared_mem(p)) {
    return SoftmaxVariant::kRowInSharedMem;
  }
  if (p.cols <= kSoftmaxRowPerBlockMaxCols) return SoftmaxVariant::kRowPerBlock;
  return SoftmaxVariant::kOnline;
}

// The variant to run on the device, or why the requested one cannot run this call.
Status resolve_device_variant(const SoftmaxProblem& p, SoftmaxVariant requested, SoftmaxVariant* chosen) {
  switch (requested) {
    case SoftmaxVariant::kAuto:
      *chosen = auto_variant(p);
      return Status::Ok();
    case SoftmaxVariant::kVectorized:
      if (!softmax::rows_are_vector_aligned(p)) {
        const int vec = softmax::kVectorBytes / dtype_size(p.dtype);
        return Status::Unsupported(
            "x, y, cols: variant vectorized needs 16-byte aligned rows: x and y on 16-byte boundaries and cols a "
            "multiple of " + std::to_string(vec) + " for " + dtype_name(p.dtype) + " (got x % 16 = " +
            std::to_string(reinterpret_cast<uintptr_t>(p.x) % 16) + ", y % 16 = " +
            std::to_string(reinterpret_cast<uintptr_t>(p.y) % 16) + ", cols = " + std::to_string(p.cols) +
            "); auto, online, row_per_warp, row_per_block, multi_block and row_in_smem take any alignment");
      }
      break;
    case SoftmaxVariant::kRowPerWarp:
      if (p.cols > kSoftmaxRowPerWarpMaxCols) {
        return Status::Unsupported("cols: variant row_per_warp holds a row in one warp's registers and needs cols <= " +
                                   std::to_string(kSoftmaxRowPerWarpMaxCols) + " (got " + std::to_string(p.cols) + ")");
      }
      break;
    case SoftmaxVariant::kRowPerBlock:
      if (p.cols > kSoftmaxRowPerBlockMaxCols) {
        return Status::Unsupported("cols: variant row_per_block holds a row in one block's registers and needs cols <= " +
                                   std::to_string(kSoftmaxRowPerBlockMaxCols) + " (got " + std::to_string(p.cols) + ")");
      }
      break;
    case SoftmaxVariant::kRowInSharedMem:
      if (!row_fits_shared_mem(p)) {
        return Status::Unsupported("cols: variant row_in_smem stages a row in shared memory and needs cols * " +
                                   std::to_string(dtype_size(p.dtype)) + " bytes <= " +
                                   std::to_string(softmax::row_in_shared_mem_max_bytes(p)) + " (got cols = " +
                                   std::to_string(p.cols) + ", " + dtype_name(p.dtype) + ")");
      }
      break;
    default:
      break;
  }
  *chosen = requested;
  return Status::Ok();
}

Status launch_variant(const SoftmaxProblem& p, SoftmaxVariant variant) {
  switch (variant) {
    case SoftmaxVariant::kSharedMemReduction: return softmax::launch_shared_mem_reduction(p);
    case SoftmaxVariant::kWarpShuffle: return softmax::launch_warp_shuffle(p);
    case SoftmaxVariant::kVectorized: return softmax::launch_vectorized(p);
    case SoftmaxVariant::kOnline: return softmax::launch_online(p);
    case SoftmaxVariant::kRowPerWarp: return softmax::launch_row_per_warp(p);
    case SoftmaxVariant::kRowPerBlock: return softmax::launch_row_per_block(p);
    case SoftmaxVariant::kMultiBlock: return softmax::launch_multi_block(p);
    case SoftmaxVariant::kRowInSharedMem: return softmax::launch_row_in_shared_mem(p);
    case SoftmaxVariant::kAuto: break;
  }
  return Status::Internal("softmax: no launcher for variant " + std::string(softmax_variant_name(variant)));
}

Status make_device_problem(const void* x, void* y, float* lse, int64_t rows, int64_t cols, DType dtype,
                           cudaStream_t stream, SoftmaxProblem* problem) {
  int device = 0;
  FC_CUDA_RETURN(cudaGetDevice(&device));
  int sm_count = 0;
  FC_CUDA_RETURN(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device));
  int max_shared_bytes = 0;
  FC_CUDA_RETURN(cudaDeviceGetAttribute(&max_shared_bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  int cc_major = 0;
  FC_CUDA_RETURN(cudaDeviceGetAttribute(&cc_major, cudaDevAttrComputeCapabilityMajor, device));
  *problem = SoftmaxProblem{x, y, lse, rows, cols, dtype, stream, sm_count, max_shared_bytes, cc_major >= 9};
  return Status::Ok();
}

}  // namespace

Status softmax_select_variant(const void* x, const void* y, int64_t rows, int64_t cols, DType dtype,
                              SoftmaxVariant requested, SoftmaxVariant* chosen) {
  return detail::status_guard("softmax_select_variant", [&]() -> Status {
    if (chosen == nullptr) return Status::InvalidArgument("chosen: must not be null");
    bool nothing_to_do = false, on_device = false;
    FC_RETURN_IF_ERROR(validate_arguments(x, y, nullptr, rows, cols, dtype, requested, &nothing_to_do, &on_device));
    if (nothing_to_do || !on_device) {
      *chosen = SoftmaxVariant::kAuto;
      return Status::Ok();
    }
    SoftmaxProblem problem;
    FC_RETURN_IF_ERROR(make_device_problem(x, const_cast<void*>(y), nullptr, rows, cols, dtype, nullptr, &problem));
    return resolve_device_variant(problem, requested, chosen);
  });
}

Status softmax_forward(const void* x, void* y, float* lse, int64_t rows, int64_t cols, DType dtype,
                       SoftmaxVariant variant, cudaStream_t stream) {
  return detail::status_guard("softmax_forward", [&]() -> Status {
    bool nothing_to_do = false, on_device = false;
    FC_RETURN_IF_ERROR(validate_arguments(x, y, lse, rows, cols, dtype, variant, &nothing_to_do, &on_device));
    if (nothing_to_do) return Status::Ok();
    if (!on_device) {
      softmax::softmax_cpu(x, y, lse, rows, cols, dtype);
      return Status::Ok();
    }
    SoftmaxProblem problem;
    FC_RETURN_IF_ERROR(make_device_problem(x, y, lse, rows, cols, dtype, stream, &problem));
    SoftmaxVariant chosen = SoftmaxVariant::kAuto;
    FC_RETURN_IF_ERROR(resolve_device_variant(problem, variant, &chosen));
    return launch_variant(problem, chosen);
  });
}

}  // namespace flashcore
