// sm80 forward, Dqk=192, Dv=192, bf16: one instantiation per unit so builds parallelize.
#include "sm80/kernel.cuh"

template flashcore::Status flashcore::sm80::launch_fwd<192, 192, __nv_bfloat16>(const flashcore::AttentionParams&,
                                                                      cudaStream_t);
