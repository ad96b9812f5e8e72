// sm80 forward, Dqk=64, Dv=128, fp16: one instantiation per unit so builds parallelize.
#include "sm80/kernel.cuh"

template flashcore::Status flashcore::sm80::launch_fwd<64, 128, __half>(const flashcore::AttentionParams&,
                                                                      cudaStream_t);
