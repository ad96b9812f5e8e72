// sm80 forward, Dqk=128, Dv=64, fp16: one instantiation per unit so builds parallelize.
#include "sm80/kernel.cuh"

template flashcore::Status flashcore::sm80::launch_fwd<128, 64, __half>(const flashcore::AttentionParams&,
                                                                      cudaStream_t);
