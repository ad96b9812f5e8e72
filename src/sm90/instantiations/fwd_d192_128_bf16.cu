// sm90 forward, Dqk = 192, Dv = 128, bf16.
#include "sm90/kernel.cuh"

FLASHCORE_SM90_INSTANTIATE(192, 128, __nv_bfloat16)
