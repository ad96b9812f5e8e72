// sm90 forward, Dqk = Dv = 64, fp16.
#include "sm90/kernel.cuh"

FLASHCORE_SM90_INSTANTIATE(64, 64, __half)
