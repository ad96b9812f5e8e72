/* flashcore standalone row softmax, C ABI. See flashcore/softmax.hpp for the semantics.
 * No exception crosses this boundary: functions return a status code and leave a thread-local
 * message for fc_softmax_last_error(). */
#ifndef FLASHCORE_SOFTMAX_H_
#define FLASHCORE_SOFTMAX_H_

#include <stdint.h>

#include "flashcore/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes: the values of flashcore::StatusCode. */
#define FC_SOFTMAX_OK 0
#define FC_SOFTMAX_INVALID_ARGUMENT 1
#define FC_SOFTMAX_UNSUPPORTED 2
#define FC_SOFTMAX_CUDA_ERROR 3
#define FC_SOFTMAX_INTERNAL 4

/* dtype: the values of flashcore::DType. */
#define FC_SOFTMAX_DTYPE_FLOAT16 0
#define FC_SOFTMAX_DTYPE_BFLOAT16 1
#define FC_SOFTMAX_DTYPE_FLOAT32 2

/* variant: the values of flashcore::SoftmaxVariant. */
#define FC_SOFTMAX_VARIANT_AUTO 0
#define FC_SOFTMAX_VARIANT_SHARED_MEM_REDUCTION 1
#define FC_SOFTMAX_VARIANT_WARP_SHUFFLE 2
#define FC_SOFTMAX_VARIANT_VECTORIZED 3
#define FC_SOFTMAX_VARIANT_ONLINE 4
#define FC_SOFTMAX_VARIANT_ROW_PER_WARP 5
#define FC_SOFTMAX_VARIANT_ROW_PER_BLOCK 6
#define FC_SOFTMAX_VARIANT_MULTI_BLOCK 7
#define FC_SOFTMAX_VARIANT_ROW_IN_SHARED_MEM 8

/* y[r, :] = softmax(x[r, :]), lse[r] = log(sum(exp(x[r, :]))) (lse may be NULL).
 * stream: a cudaStream_t, or NULL for the default stream. Returns FC_SOFTMAX_OK or an error code. */
FLASHCORE_API int fc_softmax_forward(const void* x, void* y, float* lse, int64_t rows, int64_t cols, int dtype,
                       int variant, void* stream);

/* The message of this thread's last failed fc_softmax_* call ("" after a success). */
FLASHCORE_API const char* fc_softmax_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* FLASHCORE_SOFTMAX_H_ */
