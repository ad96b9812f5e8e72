// encode_operand_map (tma.cuh): the driver's cuTensorMapEncodeTiled, looked up once through the
// runtime (no libcuda link), applied to one operand view.
#include <cuda.h>
#include <cudaTypedefs.h>

#include <mutex>
#include <string>

#include "common/cuda_check.hpp"
#include "sm90/common/tma.cuh"

namespace flashcore::sm90 {

namespace {

// ---- Driver entry point (no libcuda link) ------------------------------------------------------
PFN_cuTensorMapEncodeTiled_v12000 g_encode_tiled = nullptr;
PFN_cuCtxGetCurrent_v4000 g_ctx_get_current = nullptr;
cudaError_t g_encode_lookup_error = cudaSuccess;
std::once_flag g_encode_once;

// cuTensorMapEncodeTiled needs a current context (CUDA_ERROR_INVALID_CONTEXT otherwise), and a
// thread may not have one yet: the runtime binds its primary context on the first runtime call that
// needs one, and a thread that has only set its device (PyTorch's autograd threads) has made none.
// cudaFree(nullptr) is such a call; it is made only when no context is current, so a context the
// caller made current stays so.
Status ensure_current_context() {
  CUcontext current = nullptr;
  if (g_ctx_get_current != nullptr && g_ctx_get_current(&current) == CUDA_SUCCESS && current != nullptr) {
    return Status::Ok();
  }
  return cuda_status(cudaFree(nullptr), "sm90: binding the device's context to this thread (cudaFree(nullptr))");
}

Status get_encode_tiled(PFN_cuTensorMapEncodeTiled_v12000* fn) {
  std::call_once(g_encode_once, [] {
    cudaDriverEntryPointQueryResult query = cudaDriverEntryPointSymbolNotFound;
    void* ptr = nullptr;
    g_encode_lookup_error =
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &ptr, 12000, cudaEnableDefault, &query);
    if (g_encode_lookup_error == cudaSuccess && query == cudaDriverEntryPointSuccess) {
      g_encode_tiled = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(ptr);
    }
    void* get_current = nullptr;
    if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &get_current, 4000, cudaEnableDefault, &query) ==
            cudaSuccess &&
        query == cudaDriverEntryPointSuccess) {
      g_ctx_get_current = reinterpret_cast<PFN_cuCtxGetCurrent_v4000>(get_current);
    }
  });
  if (g_encode_tiled == nullptr) {
    if (g_encode_lookup_error != cudaSuccess) {
      return cuda_status(g_encode_lookup_error, "cudaGetDriverEntryPointByVersion(cuTensorMapEncodeTiled)");
    }
    return Status::CudaError("sm90: the driver has no cuTensorMapEncodeTiled (CUDA 12.0+ driver needed)");
  }
  FC_RETURN_IF_ERROR(ensure_current_context());
  *fn = g_encode_tiled;
  return Status::Ok();
}

// A legal stand-in stride for a dimension of extent 1 (its coordinate is always 0).
int64_t usable_stride(int64_t stride, int extent) { return extent > 1 ? stride : 8; }

// The fields every operand map shape shares.
struct OperandMapBasics {
  CUtensorMapDataType type;
  int seqlen;
  cuuint64_t seq_stride, head_stride, batch_stride;  // bytes
};
OperandMapBasics operand_map_basics(const OperandView& view, DType dtype) {
  constexpr int64_t kElem = 2;  // fp16 / bf16
  OperandMapBasics b;
  b.type = dtype == DType::kBFloat16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  b.seqlen = view.seqlen > 0 ? view.seqlen : 1;  // Sk = 0: never loaded, but dims must be >= 1
  b.seq_stride = usable_stride(view.seq_stride, b.seqlen) * kElem;
  b.head_stride = usable_stride(view.head_stride, view.heads) * kElem;
  b.batch_stride = usable_stride(view.batch_stride, view.batch) * kElem;
  return b;
}

Status encode_failed(CUresult res, const OperandView& view, int box_rows) {
  return Status::Internal("sm90: cuTensorMapEncodeTiled failed with CUresult " + std::to_string((int)res) +
                          " (head_dim " + std::to_string(view.head_dim) + ", seqlen " + std::to_string(view.seqlen) +
                          ", box rows " + std::to_string(box_rows) + ")");
}

// A map of `view` (16-bit elements of `type`) with the given rank, dims, byte strides and box, unit
// element strides and the 128-byte swizzle: the shape every operand map shares.
Status encode_swizzled(CUtensorMap* map, const OperandView& view, CUtensorMapDataType type, cuuint32_t rank,
                       const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box, int box_rows) {
  PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;
  FC_RETURN_IF_ERROR(get_encode_tiled(&encode));
  const cuuint32_t element_strides[5] = {1, 1, 1, 1, 1};
  const CUresult res = encode(map, type, rank, const_cast<void*>(view.base), dims, strides, box, element_strides,
                              CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                              CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return res == CUDA_SUCCESS ? Status::Ok() : encode_failed(res, view, box_rows);
}

// encode_row_group_map's views: rows evenly spaced across batches (pages), whole 64-column chunks,
// row-group coordinates within 32 bits.
bool row_group_map_fits(const OperandView& view) {
  const int64_t rows = int64_t(view.seqlen) * view.batch;
  return view.head_dim % 64 == 0 && view.seqlen % 8 == 0 &&
         (view.batch == 1 || view.batch_stride == int64_t(view.seqlen) * view.seq_stride) &&
         rows / 8 < (int64_t(1) << 31);
}

}  // namespace

Status encode_operand_map_per_chunk(CUtensorMap* map, const OperandView& view, DType dtype, int box_rows) {
  const OperandMapBasics b = operand_map_basics(view, dtype);
  const cuuint64_t dims[4] = {(cuuint64_t)view.head_dim, (cuuint64_t)b.seqlen, (cuuint64_t)view.heads,
                              (cuuint64_t)view.batch};
  const cuuint64_t strides[3] = {b.seq_stride, b.head_stride, b.batch_stride};
  const cuuint32_t box[4] = {64, (cuuint32_t)box_rows, 1, 1};
  return encode_swizzled(map, view, b.type, 4, dims, strides, box, box_rows);
}

Status encode_operand_map(CUtensorMap* map, const OperandView& view, DType dtype, int tile_head_dim, int box_rows,
                          int box_chunks) {
  if (view.head_dim > tile_head_dim) return Status::Internal("sm90: a tensor map wider than the kernel's head dim");
  if (per_chunk_map(view.head_dim, tile_head_dim)) return encode_operand_map_per_chunk(map, view, dtype, box_rows);
  const OperandMapBasics b = operand_map_basics(view, dtype);
  const cuuint64_t dims[5] = {64, (cuuint64_t)b.seqlen, (cuuint64_t)(view.head_dim / 64), (cuuint64_t)view.heads,
                              (cuuint64_t)view.batch};
  const cuuint64_t strides[4] = {b.seq_stride, 128, b.head_stride, b.batch_stride};
  const cuuint32_t chunks = box_chunks > 0 ? (cuuint32_t)box_chunks : (cuuint32_t)(view.head_dim / 64);
  const cuuint32_t box[5] = {64, (cuuint32_t)box_rows, chunks, 1, 1};
  return encode_swizzled(map, view, b.type, 5, dims, strides, box, box_rows);
}

Status encode_row_group_map(CUtensorMap* map, const OperandView& view, DType dtype, int box_rows) {
  if (!row_group_map_fits(view) || box_rows % 8 != 0) {
    return Status::Internal("sm90: a row-group map needs evenly spaced rows, head_dim % 64 == 0 and box_rows % 8 == 0");
  }
  const OperandMapBasics b = operand_map_basics(view, dtype);
  const cuuint64_t groups = cuuint64_t(view.seqlen) * view.batch / 8;
  const cuuint64_t dims[5] = {64, 8, (cuuint64_t)(view.head_dim / 64), groups, (cuuint64_t)view.heads};
  const cuuint64_t row_bytes = (cuuint64_t)view.seq_stride * 2;
  const cuuint64_t strides[4] = {row_bytes, 128, 8 * row_bytes, b.head_stride};
  const cuuint32_t box[5] = {64, 8, (cuuint32_t)(view.head_dim / 64), (cuuint32_t)(box_rows / 8), 1};
  return encode_swizzled(map, view, b.type, 5, dims, strides, box, box_rows);
}

std::string operand_view_problem(const char* name, const OperandView& view) {
  if (reinterpret_cast<uintptr_t>(view.base) % 16 != 0) return std::string(name) + ": base address must be 16-byte aligned";
  const char* rule = " must be a positive multiple of 8 elements (16 bytes) for TMA";
  auto bad = [](int64_t stride, int extent) { return extent > 1 && !(stride > 0 && stride % 8 == 0); };
  if (bad(view.seq_stride, view.seqlen)) return std::string(name) + "_seq_stride" + rule;
  if (bad(view.head_stride, view.heads)) return std::string(name) + "_head_stride" + rule;
  if (bad(view.batch_stride, view.batch)) return std::string(name) + "_batch_stride" + rule;
  return "";
}

Status encode_fp32_matrix_map(CUtensorMap* map, float* base, int cols, int64_t rows, int box_rows) {
  PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;
  FC_RETURN_IF_ERROR(get_encode_tiled(&encode));
  if (cols % 32 != 0 || rows <= 0 || rows > (int64_t(1) << 32)) {
    return Status::Internal("sm90: an fp32 matrix map needs a multiple of 32 columns and 1..2^32 rows");
  }
  const cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows};
  const cuuint64_t strides[1] = {(cuuint64_t)cols * 4};
  const cuuint32_t box[2] = {32, (cuuint32_t)box_rows};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult res = encode(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, base, dims, strides, box, element_strides,
                              CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (res != CUDA_SUCCESS) {
    return Status::Internal("sm90: cuTensorMapEncodeTiled (fp32 matrix) failed with CUresult " + std::to_string((int)res));
  }
  return Status::Ok();
}

Status encode_fp32_vector_map(CUtensorMap* map, const float* base, int64_t count, int box) {
  PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;
  FC_RETURN_IF_ERROR(get_encode_tiled(&encode));
  if (count <= 0 || count > (int64_t(1) << 32) || box <= 0 || box > 256 || box % 4 != 0) {
    return Status::Internal("sm90: an fp32 vector map needs 1..2^32 floats and a box of 4..256 floats, a multiple of 4");
  }
  const cuuint64_t dims[1] = {(cuuint64_t)count};
  const cuuint32_t box_dim[1] = {(cuuint32_t)box};
  const cuuint32_t element_strides[1] = {1};
  const cuuint64_t unused_strides[1] = {(cuuint64_t)count * 4};  // rank 1 has no strides; the driver wants an array
  const CUresult res = encode(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 1, const_cast<float*>(base), dims, unused_strides, box_dim,
                              element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                              CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (res != CUDA_SUCCESS) {
    return Status::Internal("sm90: cuTensorMapEncodeTiled (fp32 vector) failed with CUresult " + std::to_string((int)res));
  }
  return Status::Ok();
}

}  // namespace flashcore::sm90
