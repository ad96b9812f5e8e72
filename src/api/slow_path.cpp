// The slow-path policy (flashcore.hpp, "No silent slow path"): process-wide, lock-free to read; the
// set of messages already warned about is guarded by a mutex (warnings are rare by design).
#include "api/slow_path.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string>

namespace flashcore {

namespace {

constexpr int kPolicyUnread = -1;  // FLASHCORE_STRICT not read yet
std::atomic<int> g_policy{kPolicyUnread};
std::atomic<SlowPathHandler> g_handler{nullptr};

SlowPathPolicy policy_from_environment() {
  const char* strict = std::getenv("FLASHCORE_STRICT");
  const bool on = strict != nullptr && strict[0] != '\0' && std::strcmp(strict, "0") != 0;
  return on ? SlowPathPolicy::kError : SlowPathPolicy::kWarn;
}

// True the first time `reasons` is seen in this process.
bool first_time(const std::string& reasons) {
  static std::mutex mutex;
  static std::set<std::string>* seen = new std::set<std::string>();  // never destroyed: calls may outlive statics
  std::lock_guard<std::mutex> lock(mutex);
  return seen->insert(reasons).second;
}

}  // namespace

void set_slow_path_policy(SlowPathPolicy policy) { g_policy.store(static_cast<int>(policy)); }

SlowPathPolicy slow_path_policy() {
  int policy = g_policy.load();
  if (policy == kPolicyUnread) {
    int expected = kPolicyUnread;
    g_policy.compare_exchange_strong(expected, static_cast<int>(policy_from_environment()));
    policy = g_policy.load();
  }
  return static_cast<SlowPathPolicy>(policy);
}

void set_slow_path_handler(SlowPathHandler handler) { g_handler.store(handler); }

namespace detail {

Status slow_path_notice(const char* operation, const std::string& reasons) {
  const SlowPathPolicy policy = slow_path_policy();
  if (policy == SlowPathPolicy::kAllow) return Status::Ok();
  const std::string message =
      std::string(operation) +
      ": this call runs on the naive reference kernel, tens to hundreds of times slower than the fused "
      "kernels, because no fused path takes it:" +
      reasons +
      "\nFix the reason of the path your GPU runs (fused kernels take fp16/bf16 with head dims that are "
      "multiples of 8 up to 256, and 16-byte aligned tensors), or ask for path=naive to run it knowingly. "
      "Strict mode makes this an error: FLASHCORE_STRICT=1, flashcore::set_slow_path_policy(kError), "
      "flashcore.set_strict(True).";
  if (policy == SlowPathPolicy::kError) {
    return Status::Unsupported("strict mode: " + message + " (nothing was computed)");
  }
  if (!first_time(reasons)) return Status::Ok();
  if (SlowPathHandler handler = g_handler.load()) {
    handler(message.c_str());
  } else {
    std::fprintf(stderr, "flashcore warning: %s\n", message.c_str());
  }
  return Status::Ok();
}

}  // namespace detail

}  // namespace flashcore
