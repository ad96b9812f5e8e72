// The fp64 CPU path of softmax_forward: the reference every GPU variant is tested against, and what
// runs for host pointers (or on a machine without a GPU). Same special-value rules as the kernels
// (docs/softmax.md), written out in the plainest form.
#include <cmath>
#include <limits>
#include <vector>

#include "common/dtype.hpp"
#include "softmax/launch.hpp"

namespace flashcore::softmax {
namespace {

// max that keeps a NaN, like torch's max reduction (std::fmax would drop it).
double max_nan(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  return a > b ? a : b;
}

}  // namespace

void softmax_cpu(const void* x, void* y, float* lse, int64_t rows, int64_t cols, DType dtype) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<double> row_values(static_cast<size_t>(cols));
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t base = row * cols;
    double row_max = -kInf;
    for (int64_t col = 0; col < cols; ++col) {
      row_values[size_t(col)] = load_as_float(x, base + col, dtype);
      row_max = max_nan(row_max, row_values[size_t(col)]);
    }
    double row_sum = 0.0;
    for (int64_t col = 0; col < cols; ++col) {
      const double value = row_values[size_t(col)];
      if (value != -kInf) row_sum += std::exp(value - row_max);  // -inf entries add exactly 0
    }
    // Written only after the whole row was read, so x == y (in place) works.
    for (int64_t col = 0; col < cols; ++col) {
      // An all -inf row: exp(-inf - -inf) = NaN, 0 sum: NaN, as torch.softmax gives.
      const double probability = std::exp(row_values[size_t(col)] - row_max) / row_sum;
      store_from_float(y, base + col, float(probability), dtype);
    }
    if (lse != nullptr) {
      double row_lse;
      if (row_max == -kInf) {
        row_lse = -kInf;
      } else if (row_max == kInf) {
        row_lse = kInf;
      } else {
        row_lse = row_max + std::log(row_sum);
      }
      lse[row] = float(row_lse);
    }
  }
}

}  // namespace flashcore::softmax
