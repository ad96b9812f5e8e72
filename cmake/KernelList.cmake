# THE kernel list: every compiled kernel instantiation is declared here, once, as
#   flashcore_kernel(<path> <operation> <head dim QK> <head dim V> <dtype>...)
# From it the build generates one translation unit per (path, operation, head dims, dtype) and the
# tables each path's dispatch reads (FlashcoreKernels.cmake): what this build holds, and what the
# path could hold (its supports() message and shared-memory estimate). A declared pair must have an
# entry in the path's tuning table (src/sm90/fwd/tile_config.hpp, src/sm80/fwd/tile_config.hpp);
# the build fails otherwise. FLASHCORE_HEAD_DIMS and FLASHCORE_DTYPES prune what is compiled.

# sm80 forward (mma.sync): fp16/bf16 on m16n8k16, fp32 on 3xTF32 m16n8k8. A call no pair covers runs
# as launches over parts of Dv on a pair with Dqk >= its own (src/sm80/fwd/launch.cu): fp32 d192 /
# d256 on 192/96 and 256/128, head dims above 256 on 512/256, 576/256 and 1024/256.
flashcore_kernel(sm80 fwd 32 32 fp16 bf16 fp32)
flashcore_kernel(sm80 fwd 64 64 fp16 bf16 fp32)
flashcore_kernel(sm80 fwd 96 96 fp16 bf16 fp32)
flashcore_kernel(sm80 fwd 128 128 fp16 bf16 fp32)
flashcore_kernel(sm80 fwd 192 192 fp16 bf16)
flashcore_kernel(sm80 fwd 256 256 fp16 bf16)
flashcore_kernel(sm80 fwd 192 128 fp16 bf16)
flashcore_kernel(sm80 fwd 128 64 fp16 bf16)
flashcore_kernel(sm80 fwd 64 128 fp16 bf16)
flashcore_kernel(sm80 fwd 256 128 fp16 bf16 fp32)
flashcore_kernel(sm80 fwd 192 96 fp32)
flashcore_kernel(sm80 fwd 512 256 fp16 bf16)
flashcore_kernel(sm80 fwd 576 256 fp16 bf16)
flashcore_kernel(sm80 fwd 1024 256 fp16 bf16)

# sm80 backward (mma.sync m16n8k16), 16-bit only (fp32 runs on the naive GPU backward). A CTA keeps
# dK and dV of its keys in registers: whole rows up to d128, column halves (64 keys per CTA) for
# d192 / d256 (src/sm80/bwd/tile_config.hpp).
flashcore_kernel(sm80 bwd 32 32 fp16 bf16)
flashcore_kernel(sm80 bwd 64 64 fp16 bf16)
flashcore_kernel(sm80 bwd 96 96 fp16 bf16)
flashcore_kernel(sm80 bwd 128 128 fp16 bf16)
flashcore_kernel(sm80 bwd 192 192 fp16 bf16)
flashcore_kernel(sm80 bwd 256 256 fp16 bf16)

# decode / split-KV forward (mma.sync m16n8k16; runs on every arch >= 80, part of the sm80 build):
# query heads of one KV head packed into a tile, K/V dense, varlen, paged, batch-indexed or left-padded
# (src/sm80/decode/tile_config.hpp).
flashcore_kernel(sm80 decode 64 64 fp16 bf16)
flashcore_kernel(sm80 decode 96 96 fp16 bf16)
flashcore_kernel(sm80 decode 128 128 fp16 bf16)
flashcore_kernel(sm80 decode 256 256 fp16 bf16)

# sm90 backward (wgmma, TMA, warp specialization), 16-bit only; dK and dV of a CTA's keys live in
# registers: whole rows up to 128, column halves at 256 (src/sm90/bwd/tile_config.hpp). Calls it does
# not take run on the sm80 backward.
flashcore_kernel(sm90 bwd 64 64 fp16 bf16)
flashcore_kernel(sm90 bwd 96 96 fp16 bf16)
flashcore_kernel(sm90 bwd 128 128 fp16 bf16)
flashcore_kernel(sm90 bwd 256 256 fp16 bf16)

# sm90 forward (wgmma, TMA, warp specialization), 16-bit only.
flashcore_kernel(sm90 fwd 64 64 fp16 bf16)
flashcore_kernel(sm90 fwd 96 96 fp16 bf16)
flashcore_kernel(sm90 fwd 128 128 fp16 bf16)
flashcore_kernel(sm90 fwd 192 128 fp16 bf16)
# Head dims without a pair of their own run padded to the covering pair with the least padding
# (src/api/built_kernels.hpp); d80 and d160 get their own (padding them costs 20% / 60% more work).
flashcore_kernel(sm90 fwd 80 80 fp16 bf16)
flashcore_kernel(sm90 fwd 160 160 fp16 bf16)
flashcore_kernel(sm90 fwd 256 256 fp16 bf16)

# sm90 wide forward (head dims above 256; src/sm90/wide, FLASHCORE_BUILD_SM90_WIDE): (Q/K tile, O
# columns per CTA). A call runs on a tile with Dqk >= its own and Dv in parts of the tile's (each part
# computes S again), the least work per query block (src/sm90/wide/launch.cu): 320/320 -> 384/384,
# 576/512 (MLA) on its own tile, 768/768 -> 1024 with two parts of 512, 1024/1024 the same.
flashcore_kernel(sm90 wide 384 384 fp16 bf16)
flashcore_kernel(sm90 wide 512 512 fp16 bf16)
flashcore_kernel(sm90 wide 576 512 fp16 bf16)
flashcore_kernel(sm90 wide 1024 512 fp16 bf16)
