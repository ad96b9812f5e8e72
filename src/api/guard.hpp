// Every C++ entry point returns a Status and lets no exception out: status_guard runs its body and
// turns any exception (std::bad_alloc from a host buffer, one rethrown from a CPU reference worker
// thread, ...) into an error status naming the entry point. The C ABI and the Python binding build
// on the C++ API, so no failure inside the library ends the process.
#pragma once

#include <exception>
#include <new>
#include <string>

#include "flashcore/flashcore.hpp"

namespace flashcore::detail {

template <class Fn>
Status status_guard(const char* entry, Fn&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return Status::Internal(std::string(entry) + ": out of host memory");
  } catch (const std::exception& e) {
    return Status::Internal(std::string(entry) + ": unexpected exception: " + e.what());
  } catch (...) {
    return Status::Internal(std::string(entry) + ": unexpected non-standard exception");
  }
}

}  // namespace flashcore::detail
