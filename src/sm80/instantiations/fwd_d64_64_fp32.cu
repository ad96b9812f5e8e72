// sm80 forward, Dqk=64, Dv=64, fp32 (3xTF32): one instantiation per unit so builds parallelize.
#include "sm80/kernel.cuh"

template flashcore::Status flashcore::sm80::launch_fwd<64, 64, float>(const flashcore::AttentionParams&,
                                                                      cudaStream_t);
