// Qualifiers so the attention math compiles in both g++ (CPU reference) and nvcc (kernels).
#pragma once

#if defined(__CUDACC__)
#define FC_HOST_DEVICE __host__ __device__ __forceinline__
#define FC_DEVICE __device__ __forceinline__
#else
#define FC_HOST_DEVICE inline
#define FC_DEVICE inline
#endif
