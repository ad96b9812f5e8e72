// sm80 forward, Dqk=256, Dv=128, bf16: one instantiation per unit so builds parallelize.
#include "sm80/kernel.cuh"

template flashcore::Status flashcore::sm80::launch_fwd<256, 128, __nv_bfloat16>(const flashcore::AttentionParams&,
                                                                      cudaStream_t);
