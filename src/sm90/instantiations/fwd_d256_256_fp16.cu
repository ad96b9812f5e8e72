// sm90 forward, Dqk = Dv = 256, fp16.
#include "sm90/kernel.cuh"

FLASHCORE_SM90_INSTANTIATE(256, 256, __half)
