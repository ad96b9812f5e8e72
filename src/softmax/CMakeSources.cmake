# Standalone softmax ladder (included by flashcore_add_kernel_paths; `target` is the library target).
# Every kernel file is built for all FLASHCORE_CUDA_ARCHS: the kernels need sm_80+ (max.NaN.f32).
file(GLOB flashcore_softmax_cu CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/softmax/*.cu)
target_sources(${target} PRIVATE
  ${flashcore_softmax_cu}
  ${PROJECT_SOURCE_DIR}/src/softmax/softmax_api.cpp
  ${PROJECT_SOURCE_DIR}/src/softmax/softmax_cpu.cpp
  ${PROJECT_SOURCE_DIR}/src/softmax/softmax_c_api.cpp)
flashcore_set_cuda_arch_flags(${flashcore_softmax_cu} ${FLASHCORE_CUDA_ARCHS})
