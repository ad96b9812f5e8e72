// The fp64 CPU reference: the attention function of docs/semantics.md computed in double on the
// host, built on the shared functors of attention/mask.hpp. Every kernel path is tested against it.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "flashcore/flashcore.hpp"

namespace flashcore::reference {

// Computes attention for a validated call whose pointers (tensors, cu_seqlens, seqused_k, ALiBi
// slopes) are all host memory. Writes o (rounded once from fp64 to the dtype) and lse (if set);
// rows with no visible key get o = 0 and lse = -inf. Multithreaded, returns when done.
Status cpu_reference_forward(const AttentionParams& params);

// The same computation, unrounded, for tests. Output order is dense and independent of the
// strides of params:
//   out [rows, Hq, Dv]  and  lse [rows, Hq]   (natural log, -inf for a row with no visible key)
// where rows = B * Sq with row = b * Sq + i (dense), or rows = total_q with row = cu_seqlens_q[b] + i
// (varlen). Varlen rows outside every sequence (cu_seqlens_q[B] <= row < total_q) hold 0 / -inf.
// Either pointer may be null.
void cpu_reference_forward_f64(const AttentionParams& params, std::vector<double>* out,
                               std::vector<double>* lse);

// The backward of a validated call whose pointers are all host memory (BackwardParams): writes dq,
// dk, dv, each rounded once from fp64 to the dtype. Rows with no visible key get dq = 0; keys no row
// sees (and keys past seqused_k) get dk = dv = 0. Multithreaded over (batch entry, KV head).
Status cpu_reference_backward(const BackwardParams& params);

// Rows of the dense [rows, Hq, ...] order above.
inline int64_t reference_rows(const AttentionParams& p) {
  return p.is_varlen() ? p.total_q : int64_t(p.batch) * p.seqlen_q;
}

// The most workers parallel_for uses: one per hardware thread.
inline int max_parallel_workers() { return std::max(1, int(std::thread::hardware_concurrency())); }

// Runs fn(item, worker) for item in [0, count) on up to max_parallel_workers() threads; `worker` in
// [0, max_parallel_workers()) names the thread, so callers can keep per-thread scratch. Items are
// taken in order from a shared counter, so neighbouring items usually land on one thread.
// Blocks until all are done. An exception thrown by fn on any thread (std::bad_alloc from a scratch
// buffer, ...) stops the handout and is rethrown here, on the calling thread, once every thread has
// finished (never std::terminate); threads that cannot be started leave their share to the others.
template <typename Fn>
void parallel_for(int64_t count, Fn&& fn) {
  const int64_t workers = std::min<int64_t>(max_parallel_workers(), count);
  if (workers <= 1) {
    for (int64_t item = 0; item < count; ++item) fn(item, 0);
    return;
  }
  std::atomic<int64_t> next{0};
  std::mutex failure_mutex;
  std::exception_ptr failure;
  auto work = [&](int worker) noexcept {
    try {
      for (int64_t item = next.fetch_add(1); item < count; item = next.fetch_add(1)) fn(item, worker);
    } catch (...) {
      next.store(count);  // no further items for anyone
      const std::lock_guard<std::mutex> lock(failure_mutex);
      if (!failure) failure = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  try {
    threads.reserve(size_t(workers - 1));
    for (int t = 1; t < int(workers); ++t) threads.emplace_back(work, t);
  } catch (...) {  // std::system_error (no more threads) or bad_alloc: run with the threads there are
  }
  work(0);
  for (auto& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace flashcore::reference
