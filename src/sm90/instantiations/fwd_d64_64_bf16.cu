// sm90 forward, Dqk = Dv = 64, bf16.
#include "sm90/kernel.cuh"

FLASHCORE_SM90_INSTANTIATE(64, 64, __nv_bfloat16)
