// No failure inside the library ends the process: an exception thrown on a CPU reference worker
// thread reaches the calling thread (parallel_for), and every C++ entry point turns exceptions into
// an error status naming itself (detail::status_guard).
#include <atomic>
#include <new>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "api/guard.hpp"
#include "reference/cpu_reference.hpp"

namespace flashcore {
namespace {

TEST(NoAbort, ParallelForRethrowsAWorkerExceptionOnTheCallingThread) {
  for (int64_t count : {1, 5, 1000}) {
    std::atomic<int64_t> ran{0};
    bool caught = false;
    try {
      reference::parallel_for(count, [&](int64_t item, int) {
        ran.fetch_add(1);
        if (item == count / 2) throw std::bad_alloc();
      });
    } catch (const std::bad_alloc&) {
      caught = true;
    }
    EXPECT_TRUE(caught) << "count " << count;
    EXPECT_GE(ran.load(), count / 2 + 1);
  }
}

TEST(NoAbort, ParallelForRunsEveryItemWhenNothingThrows) {
  std::atomic<int64_t> sum{0};
  reference::parallel_for(1000, [&](int64_t item, int) { sum.fetch_add(item); });
  EXPECT_EQ(sum.load(), 999 * 1000 / 2);
}

TEST(NoAbort, StatusGuardTurnsExceptionsIntoInternalErrors) {
  const Status oom = detail::status_guard("attention_forward", []() -> Status { throw std::bad_alloc(); });
  EXPECT_EQ(oom.code, StatusCode::kInternal);
  EXPECT_EQ(oom.message, "attention_forward: out of host memory");
  const Status other = detail::status_guard("validate", []() -> Status { throw std::runtime_error("boom"); });
  EXPECT_EQ(other.code, StatusCode::kInternal);
  EXPECT_EQ(other.message, "validate: unexpected exception: boom");
  const Status odd = detail::status_guard("merge_attention_states", []() -> Status { throw 7; });
  EXPECT_EQ(odd.code, StatusCode::kInternal);
  EXPECT_NE(odd.message.find("non-standard"), std::string::npos);
  const Status fine = detail::status_guard("x", []() -> Status { return Status::InvalidArgument("q: rule"); });
  EXPECT_EQ(fine.code, StatusCode::kInvalidArgument);
  EXPECT_EQ(fine.message, "q: rule");
}

}  // namespace
}  // namespace flashcore
