// sm80 forward, Dqk=32, Dv=32, bf16: one instantiation per unit so builds parallelize.
#include "sm80/kernel.cuh"

template flashcore::Status flashcore::sm80::launch_fwd<32, 32, __nv_bfloat16>(const flashcore::AttentionParams&,
                                                                      cudaStream_t);
