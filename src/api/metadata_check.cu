// The device check of varlen metadata (metadata_check.hpp) and check_errors().
#include "api/metadata_check.hpp"

#include <cstdint>
#include <mutex>
#include <sstream>
#include <string>

#include "api/guard.hpp"
#include "api/memory.hpp"
#include "common/cuda_check.hpp"

namespace flashcore {

namespace detail {

namespace {

// What the check found first (code 0: nothing). Lives in mapped, portable pinned host memory: the
// kernel writes it over the bus, the host reads it without synchronizing.
enum Problem : int {
  kNone = 0,
  kFirstNotZero = 1,   // cu[0] != 0: value = cu[0]
  kDecreasing = 2,     // cu[index] < cu[index - 1]: value = cu[index], other = cu[index - 1]
  kTooLong = 3,        // sequence index - 1 longer than max_seqlen: value = its length, other = max
  kPastTotal = 4,      // cu[batch] > total: value = cu[batch], other = total (clamped to int)
  kSequsedRange = 5,   // seqused_k[index] outside [0, keys]: value = seqused_k[index], other = keys
};
struct DeferredError {
  int code;
  int array;  // 0 cu_seqlens_q, 1 cu_seqlens_k, 2 seqused_k
  int index;
  int value;
  int other;
};

DeferredError* g_word = nullptr;  // host address (== device address under UVA)
std::once_flag g_word_once;
cudaError_t g_word_error = cudaSuccess;

DeferredError* error_word() {
  std::call_once(g_word_once, [] {
    // Allowed while some stream captures a graph: the allocation is not stream work.
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    cudaThreadExchangeStreamCaptureMode(&mode);
    void* p = nullptr;
    g_word_error = cudaHostAlloc(&p, sizeof(DeferredError), cudaHostAllocMapped | cudaHostAllocPortable);
    cudaThreadExchangeStreamCaptureMode(&mode);
    if (g_word_error == cudaSuccess) {
      g_word = static_cast<DeferredError*>(p);
      *g_word = DeferredError{};
    }
  });
  return g_word;
}

// One block: thread t checks entries t, t + blockDim.x, ... of each array. The block keeps the first
// problem a thread claims in shared memory (no atomics on host memory, which the bus may not
// support); thread 0 then publishes it, unless an earlier problem is still unreported.
__global__ void check_varlen_metadata(const int32_t* cu_q, const int32_t* cu_k, const int32_t* seqused_k, int batch,
                                      int max_q, int max_k, int64_t total_q, int64_t total_k, DeferredError* word) {
  __shared__ int claimed;
  __shared__ DeferredError found;
  if (threadIdx.x == 0) claimed = 0;
  __syncthreads();
  auto record = [&](int code, int array, int index, int value, int other) {
    if (atomicCAS(&claimed, 0, 1) == 0) found = DeferredError{code, array, index, value, other};
  };
  const int32_t* cus[2] = {cu_q, cu_k};
  const int maxes[2] = {max_q, max_k};
  const int64_t totals[2] = {total_q, total_k};
  for (int a = 0; a < 2; ++a) {
    const int32_t* cu = cus[a];
    if (cu == nullptr) continue;
    for (int i = threadIdx.x; i <= batch; i += blockDim.x) {
      if (i == 0) {
        if (cu[0] != 0) record(kFirstNotZero, a, 0, cu[0], 0);
        continue;
      }
      if (cu[i] < cu[i - 1]) {
        record(kDecreasing, a, i, cu[i], cu[i - 1]);
      } else if (int64_t(cu[i]) - cu[i - 1] > maxes[a]) {
        record(kTooLong, a, i, cu[i] - cu[i - 1], maxes[a]);
      }
      if (i == batch && cu[i] > totals[a]) record(kPastTotal, a, i, cu[i], int(totals[a] > INT32_MAX ? INT32_MAX : totals[a]));
    }
  }
  if (seqused_k != nullptr) {
    for (int b = threadIdx.x; b < batch; b += blockDim.x) {
      const int keys = cu_k != nullptr ? cu_k[b + 1] - cu_k[b] : max_k;
      if (seqused_k[b] < 0 || seqused_k[b] > keys) record(kSequsedRange, 2, b, seqused_k[b], keys);
    }
  }
  __syncthreads();
  if (threadIdx.x == 0 && claimed != 0) {
    volatile DeferredError* out = word;
    if (out->code == kNone) {
      out->array = found.array, out->index = found.index, out->value = found.value, out->other = found.other;
      __threadfence_system();  // the fields before the code that announces them
      out->code = found.code;
    }
  }
}

const char* array_name(int array) { return array == 0 ? "cu_seqlens_q" : array == 1 ? "cu_seqlens_k" : "seqused_k"; }

std::string describe(const DeferredError& e) {
  std::ostringstream os;
  const char* name = array_name(e.array);
  switch (e.code) {
    case kFirstNotZero: os << name << "[0]: must be 0 (got " << e.value << ")"; break;
    case kDecreasing:
      os << name << "[" << e.index << "]: must be >= " << name << "[" << e.index - 1 << "] (got " << e.value << " < "
         << e.other << ")";
      break;
    case kTooLong:
      os << name << "[" << e.index << "]: sequence " << e.index - 1 << " has " << e.value << " tokens, more than "
         << (e.array == 0 ? "max_seqlen_q" : "max_seqlen_k") << " = " << e.other;
      break;
    case kPastTotal:
      os << name << "[" << e.index << "]: must be <= " << (e.array == 0 ? "total_q" : "total_k") << " (got " << e.value
         << " > " << e.other << ")";
      break;
    case kSequsedRange:
      os << "seqused_k[" << e.index << "]: must be in [0, " << e.other << "] (the keys of sequence " << e.index
         << ") (got " << e.value << ")";
      break;
    default: os << "unknown problem code " << e.code;
  }
  return os.str();
}

}  // namespace

Status check_metadata_on_device(const AttentionParams& p, cudaStream_t stream) {
  const bool varlen = p.is_varlen();
  if (!varlen && p.seqused_k == nullptr) return Status::Ok();
  const int32_t* arrays[] = {p.cu_seqlens_q, p.cu_seqlens_k, p.seqused_k};
  bool any_on_device = false;
  for (const int32_t* a : arrays) any_on_device = any_on_device || (a != nullptr && !is_host(memory_of(a)));
  if (!any_on_device) return Status::Ok();  // host arrays: validate() read them
  if (p.check_device_metadata) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    FC_CUDA_RETURN(cudaStreamIsCapturing(stream, &capture));
    if (capture == cudaStreamCaptureStatusNone) return Status::Ok();  // validate() read them after a sync
  }
  DeferredError* word = error_word();
  if (word == nullptr) return cuda_status(g_word_error, "cudaHostAlloc (the varlen metadata check's error word)");
  // Paged keys live in the page pool: cu_seqlens_k only give lengths there, no total bounds them.
  const int64_t total_k = p.is_paged() ? INT64_MAX : p.total_k;
  check_varlen_metadata<<<1, 256, 0, stream>>>(varlen ? p.cu_seqlens_q : nullptr, varlen ? p.cu_seqlens_k : nullptr,
                                               p.seqused_k, p.batch, p.seqlen_q, p.seqlen_k, p.total_q, total_k, word);
  return cuda_status(cudaGetLastError(), "check_varlen_metadata");
}

bool device_check_ever_ran() { return g_word != nullptr; }

Status take_deferred_error() {
  if (g_word == nullptr) return Status::Ok();  // no device check ever ran
  volatile DeferredError* word = g_word;
  if (word->code == kNone) return Status::Ok();
  const DeferredError seen{word->code, word->array, word->index, word->value, word->other};
  word->code = 0;
  return Status::InvalidArgument(
      "an earlier call's varlen metadata was malformed (found by the device check of a call made without a host "
      "sync): " + describe(seen) +
      ". That call's results are wrong (its kernels clamped the lengths into the tensors and read or wrote nothing "
      "outside them); this call ran nothing. flashcore.set_check_device_metadata(True) / "
      "AttentionParams::check_device_metadata checks each call before it runs, at one stream sync per call.");
}

}  // namespace detail

Status check_errors(cudaStream_t stream) {
  return detail::status_guard("check_errors", [&]() -> Status {
    if (!detail::device_check_ever_ran()) return Status::Ok();  // nothing can be pending (and no device needed)
    FC_CUDA_RETURN(cudaStreamSynchronize(stream));
    return detail::take_deferred_error();
  });
}

}  // namespace flashcore
