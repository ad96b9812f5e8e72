// sm90 forward, Dqk = Dv = 128, fp16.
#include "sm90/kernel.cuh"

FLASHCORE_SM90_INSTANTIATE(128, 128, __half)
