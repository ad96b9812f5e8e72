// sm80 forward, Dqk=192, Dv=96, fp32 (3xTF32): one instantiation per unit so builds parallelize.
#include "sm80/kernel.cuh"

template flashcore::Status flashcore::sm80::launch_fwd<192, 96, float>(const flashcore::AttentionParams&,
                                                                      cudaStream_t);
