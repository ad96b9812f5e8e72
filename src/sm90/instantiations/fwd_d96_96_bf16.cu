// sm90 forward, Dqk = Dv = 96, bf16.
#include "sm90/kernel.cuh"

FLASHCORE_SM90_INSTANTIATE(96, 96, __nv_bfloat16)
