// PLACEHOLDER — replaced by the validation work (every rule of docs/semantics.md).
#include "flashcore/flashcore.hpp"
namespace flashcore {
Status validate(const AttentionParams&, cudaStream_t) { return Status::Ok(); }
}  // namespace flashcore
