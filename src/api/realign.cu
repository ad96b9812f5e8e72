// run_realigned (realign.hpp): the copies are one element per thread, strided on the caller's side
// and contiguous on the buffer's; they cost a few passes over the operands, against the naive
// kernel's tens-to-hundreds-fold slowdown (docs/design/head-dims.md).
#include "api/realign.hpp"

#include <algorithm>
#include <cstdint>

#include "attention/mask.hpp"
#include "common/cuda_check.hpp"
#include "common/host_device.hpp"
#include "common/host_device.hpp"

namespace flashcore::detail {

namespace {

constexpr int kRowMultiple = 8;  // elements: whole 16-byte chunks of a 16-bit type
// Below this many FLOPs (2 (Dqk + Dv) per query row and key, masks ignored) the naive kernel is the
// faster way to run a misaligned call (run_realigned).
constexpr double kMinRealignedFlops = 2e8;

int round_up(int x, int m) { return (x + m - 1) / m * m; }
bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// One operand as the kernels see it: rows of `dim` elements at (batch, token, head) strides.
// Varlen: `seqlen` is the packed token count and `batch` 1 (the batch stride is unused).
struct Operand {
  void* base = nullptr;
  int batch = 0, seqlen = 0, heads = 0, dim = 0;
  int64_t batch_stride = 0, seq_stride = 0, head_stride = 0;
  FC_HOST_DEVICE int64_t rows() const { return int64_t(batch) * seqlen * heads; }
};

// The layout rules of the fused paths for one operand: 16-byte base and strides (of the dimensions
// that have more than one entry), and a head dim the kernels' 16-byte chunks tile exactly.
bool needs_copy(const Operand& t, int elem_bytes) {
  if (t.rows() == 0) return false;
  if (!aligned16(t.base) || t.dim % kRowMultiple != 0) return true;
  auto bad = [&](int64_t stride, int extent) { return extent > 1 && (stride * elem_bytes) % 16 != 0; };
  return bad(t.batch_stride, t.batch) || bad(t.seq_stride, t.seqlen) || bad(t.head_stride, t.heads);
}

// One warp per row of the operand, its lanes along the columns (coalesced on both sides; the row's
// (batch, token, head) is worked out once per row, not per element). The buffer holds contiguous
// rows of padded_dim elements.
constexpr int kCopyThreads = 256;
constexpr int kRowsPerBlock = kCopyThreads / 32;

FC_DEVICE int64_t row_offset(const Operand& t, int64_t row) {
  const int64_t head = row % t.heads, token = (row / t.heads) % t.seqlen, b = row / t.heads / t.seqlen;
  return b * t.batch_stride + token * t.seq_stride + head * t.head_stride;
}

template <typename Word>
__global__ void __launch_bounds__(kCopyThreads) gather_rows(Operand t, int padded_dim, Word* buffer) {
  const int lane = threadIdx.x % 32;
  for (int64_t row = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / 32; row < t.rows();
       row += int64_t(gridDim.x) * kRowsPerBlock) {
    const Word* src = static_cast<const Word*>(t.base) + row_offset(t, row);
    Word* dst = buffer + row * padded_dim;
    for (int col = lane; col < padded_dim; col += 32) dst[col] = col < t.dim ? src[col] : Word(0);
  }
}

template <typename Word>
__global__ void __launch_bounds__(kCopyThreads) scatter_rows(const Word* buffer, int padded_dim, Operand t) {
  const int lane = threadIdx.x % 32;
  for (int64_t row = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / 32; row < t.rows();
       row += int64_t(gridDim.x) * kRowsPerBlock) {
    Word* dst = static_cast<Word*>(t.base) + row_offset(t, row);
    const Word* src = buffer + row * padded_dim;
    for (int col = lane; col < t.dim; col += 32) dst[col] = src[col];
  }
}

int copy_blocks(int64_t rows) {
  constexpr int64_t kMaxBlocks = 8192;
  return int(std::min<int64_t>(kMaxBlocks, (rows + kRowsPerBlock - 1) / kRowsPerBlock));
}

template <typename Word>
Status copy(bool to_buffer, const Operand& t, int padded_dim, void* buffer, cudaStream_t stream) {
  if (t.rows() == 0) return Status::Ok();
  if (to_buffer) {
    gather_rows<Word><<<copy_blocks(t.rows()), kCopyThreads, 0, stream>>>(t, padded_dim, static_cast<Word*>(buffer));
  } else {
    scatter_rows<Word><<<copy_blocks(t.rows()), kCopyThreads, 0, stream>>>(static_cast<const Word*>(buffer), padded_dim, t);
  }
  return cuda_status(cudaGetLastError(), to_buffer ? "realign: gather_rows" : "realign: scatter_rows");
}

Status copy_operand(bool to_buffer, const Operand& t, int padded_dim, int elem_bytes, void* buffer, cudaStream_t stream) {
  return elem_bytes == 2 ? copy<uint16_t>(to_buffer, t, padded_dim, buffer, stream)
                         : copy<uint32_t>(to_buffer, t, padded_dim, buffer, stream);
}

// The operand's view in the buffer: contiguous rows of padded_dim elements.
void point_at_buffer(Operand* t, void* buffer, int padded_dim) {
  t->base = buffer;
  t->dim = padded_dim;
  t->head_stride = padded_dim;
  t->seq_stride = int64_t(t->heads) * padded_dim;
  t->batch_stride = int64_t(t->seqlen) * t->seq_stride;
}

}  // namespace

Status run_realigned(const AttentionParams& p, const DeviceInfo& info, cudaStream_t stream, Realigned* outcome) {
  *outcome = Realigned::kNotApplicable;
  if (p.path != KernelPath::kAuto || info.pointers_on_host || !info.has_device || attn::uses_kv_cache_layout(p)) {
    return Status::Ok();
  }
  const bool varlen = p.is_varlen();
  const int elem_bytes = int(dtype_size(p.dtype));
  const int batch = varlen ? 1 : p.batch;
  const int rows_q = varlen ? int(p.total_q) : p.seqlen_q;
  const int rows_k = varlen ? int(p.total_k) : p.seqlen_k;
  const bool has_keys = p.k != nullptr && p.v != nullptr;
  Operand ops[4] = {
      {const_cast<void*>(p.q), batch, rows_q, p.heads_q, p.head_dim_qk, p.q_batch_stride, p.q_seq_stride, p.q_head_stride},
      {const_cast<void*>(p.k), batch, has_keys ? rows_k : 0, p.heads_kv, p.head_dim_qk, p.k_batch_stride, p.k_seq_stride, p.k_head_stride},
      {const_cast<void*>(p.v), batch, has_keys ? rows_k : 0, p.heads_kv, p.head_dim_v, p.v_batch_stride, p.v_seq_stride, p.v_head_stride},
      {p.o, batch, rows_q, p.heads_q, p.head_dim_v, p.o_batch_stride, p.o_seq_stride, p.o_head_stride},
  };
  const int dqk = round_up(p.head_dim_qk, kRowMultiple), dv = round_up(p.head_dim_v, kRowMultiple);
  const int padded[4] = {dqk, dqk, dv, dv};
  bool copied[4];
  // Q and K share the padded head dim, V and O theirs: padding one pads its partner.
  const bool pad_qk = dqk != p.head_dim_qk, pad_v = dv != p.head_dim_v;
  size_t offsets[4], bytes = 0;
  for (int i = 0; i < 4; ++i) {
    copied[i] = (i < 2 ? pad_qk : pad_v) || needs_copy(ops[i], elem_bytes);
    if (ops[i].rows() == 0) copied[i] = false;
    offsets[i] = bytes;
    if (copied[i]) bytes += (size_t(ops[i].rows()) * padded[i] * elem_bytes + 255) / 256 * 256;
  }
  if (bytes == 0) return Status::Ok();  // nothing to realign: the layout is not what keeps it slow

  // The aligned call, first with stand-in (aligned) addresses: would a fused path take it?
  AttentionParams aligned = p;
  aligned.softmax_scale = p.effective_scale();  // the call's own head dim, not the padded one
  aligned.head_dim_qk = dqk;
  aligned.head_dim_v = dv;
  Operand views[4];
  for (int i = 0; i < 4; ++i) {
    views[i] = ops[i];
    if (copied[i]) point_at_buffer(&views[i], reinterpret_cast<void*>(uintptr_t(1) << 20), padded[i]);
  }
  auto apply = [&](const Operand (&v)[4]) {
    aligned.q = v[0].base, aligned.k = v[1].base, aligned.v = v[2].base, aligned.o = v[3].base;
    aligned.q_batch_stride = v[0].batch_stride, aligned.q_seq_stride = v[0].seq_stride, aligned.q_head_stride = v[0].head_stride;
    aligned.k_batch_stride = v[1].batch_stride, aligned.k_seq_stride = v[1].seq_stride, aligned.k_head_stride = v[1].head_stride;
    aligned.v_batch_stride = v[2].batch_stride, aligned.v_seq_stride = v[2].seq_stride, aligned.v_head_stride = v[2].head_stride;
    aligned.o_batch_stride = v[3].batch_stride, aligned.o_seq_stride = v[3].seq_stride, aligned.o_head_stride = v[3].head_stride;
    if (!has_keys) aligned.k = p.k, aligned.v = p.v;
  };
  apply(views);
  PathOps fused{};
  if (!select_path(aligned, info, &fused).ok() || fused.path == KernelPath::kNaiveGpu ||
      fused.path == KernelPath::kCpuReference) {
    return Status::Ok();
  }
  // Small calls: the naive kernel finishes before the copies' launches and allocation would (an H200
  // measured 0.029 ms naive against 0.044 ms realigned for 64 rows x 64 keys x 8 heads at d128).
  const double rows_total = double(varlen ? p.total_q : int64_t(p.batch) * p.seqlen_q) * p.heads_q;
  const double keys = double(varlen ? std::max<int64_t>(1, p.total_k / std::max(1, p.batch)) : p.seqlen_k);
  if (rows_total * keys * (p.head_dim_qk + p.head_dim_v) * 2 < kMinRealignedFlops) {
    *outcome = Realigned::kNaiveIsFaster;
    return Status::Ok();
  }

  void* buffer = nullptr;
  FC_CUDA_RETURN(cudaMallocAsync(&buffer, bytes, stream));
  Status status = Status::Ok();
  for (int i = 0; i < 4; ++i) {
    if (!copied[i]) continue;
    views[i].base = static_cast<char*>(buffer) + offsets[i];
    if (i < 3 && status.ok()) status = copy_operand(true, ops[i], padded[i], elem_bytes, views[i].base, stream);
  }
  apply(views);
  if (status.ok()) status = fused.run(aligned, info, stream);
  if (status.ok() && copied[3]) status = copy_operand(false, ops[3], padded[3], elem_bytes, views[3].base, stream);
  const cudaError_t freed = cudaFreeAsync(buffer, stream);
  if (status.ok()) status = cuda_status(freed, "realign: freeing the aligned copies");
  if (status.ok()) *outcome = Realigned::kRan;
  return status;
}

}  // namespace flashcore::detail
