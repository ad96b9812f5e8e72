// sm90 forward, Dqk = Dv = 96, fp16.
#include "sm90/kernel.cuh"

FLASHCORE_SM90_INSTANTIATE(96, 96, __half)
