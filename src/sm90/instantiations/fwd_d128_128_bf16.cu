// sm90 forward, Dqk = Dv = 128, bf16.
#include "sm90/kernel.cuh"

FLASHCORE_SM90_INSTANTIATE(128, 128, __nv_bfloat16)
