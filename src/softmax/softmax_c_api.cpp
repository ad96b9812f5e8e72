// C ABI of the standalone softmax: status codes plus a thread-local message; no exception escapes.
#include <exception>
#include <string>

#include "flashcore/softmax.h"
#include "flashcore/softmax.hpp"

namespace {

// The C header spells the enum's values; keep them in step.
using flashcore::SoftmaxVariant;
static_assert(FC_SOFTMAX_VARIANT_AUTO == int(SoftmaxVariant::kAuto));
static_assert(FC_SOFTMAX_VARIANT_MULTI_BLOCK == int(SoftmaxVariant::kMultiBlock));
static_assert(FC_SOFTMAX_VARIANT_ROW_IN_SHARED_MEM == int(SoftmaxVariant::kRowInSharedMem));
static_assert(FC_SOFTMAX_VARIANT_ROW_IN_SHARED_MEM + 1 == flashcore::kSoftmaxVariantCount);

thread_local std::string g_last_error;

int record(const flashcore::Status& status) {
  g_last_error = status.ok() ? std::string() : status.message;
  return static_cast<int>(status.code);
}

}  // namespace

extern "C" int fc_softmax_forward(const void* x, void* y, float* lse, int64_t rows, int64_t cols, int dtype,
                                  int variant, void* stream) {
  try {
    // Unknown dtype / variant values are reported by softmax_forward's validation.
    return record(flashcore::softmax_forward(x, y, lse, rows, cols, static_cast<flashcore::DType>(dtype),
                                             static_cast<flashcore::SoftmaxVariant>(variant),
                                             static_cast<cudaStream_t>(stream)));
  } catch (const std::exception& e) {
    return record(flashcore::Status::Internal(std::string("fc_softmax_forward: ") + e.what()));
  } catch (...) {
    return record(flashcore::Status::Internal("fc_softmax_forward: unknown exception"));
  }
}

extern "C" const char* fc_softmax_last_error(void) { return g_last_error.c_str(); }
