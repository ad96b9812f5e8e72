# Kernel-path sources, architecture flags, and the kernels of cmake/KernelList.cmake.
#
# Each kernel path lives in src/<path>/ (common/ and one folder per operation). The kernel list
# declares each (path, operation, head dims, dtype); for every declared kernel that
# FLASHCORE_HEAD_DIMS and FLASHCORE_DTYPES keep, this file generates one translation unit
# (<binary dir>/generated/kernels/<path>_<op>_d<QK>_<V>_<dtype>.cu), and for each (path, operation)
# a list <binary dir>/generated/kernels/<path>_<op>_kernels.inc of every declared kernel as
#   FLASHCORE_KERNEL(<head dim QK>, <head dim V>, <DType enumerator>, <element type>, <built: 0/1>)
# that the path's launch.cu turns into its built-kernel table, its supports() messages and its
# shared-memory estimate (src/api/built_kernels.hpp).

# The virtual architecture whose PTX is embedded next to the SASS (FLASHCORE_EMBED_PTX): the lowest
# listed arch that is not architecture-specific (no "a" suffix), so GPUs newer than every listed
# arch still run the kernels built from that PTX (the driver compiles it on first use). Empty
# when every listed arch is architecture-specific (90a PTX runs only on 9.0).
function(flashcore_ptx_arch out)
  set(best "")
  if(FLASHCORE_EMBED_PTX)
    foreach(arch ${ARGN})
      if(arch MATCHES "^[0-9]+$" AND (best STREQUAL "" OR arch LESS best))
        set(best ${arch})
      endif()
    endforeach()
  endif()
  set(${out} "${best}" PARENT_SCOPE)
endfunction()

# Sets -gencode flags on CUDA source files for the listed archs (80, 86, 89, 90a, ...), plus the
# PTX of flashcore_ptx_arch.
function(flashcore_set_cuda_arch_flags)
  set(archs)
  set(srcs)
  foreach(item ${ARGV})
    if(item MATCHES "^[0-9]+a?$")
      list(APPEND archs ${item})
    else()
      list(APPEND srcs ${item})
    endif()
  endforeach()
  set(flags)
  foreach(arch ${archs})
    list(APPEND flags "-gencode=arch=compute_${arch},code=sm_${arch}")
  endforeach()
  flashcore_ptx_arch(ptx_arch ${archs})
  if(ptx_arch)
    list(APPEND flags "-gencode=arch=compute_${ptx_arch},code=compute_${ptx_arch}")
  endif()
  if(FLASHCORE_PTXAS_VERBOSE)
    list(APPEND flags "-Xptxas=-v")
  endif()
  # Source properties are per directory: set them where the calling target lives.
  set_source_files_properties(${srcs} DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR} PROPERTIES COMPILE_OPTIONS "${flags}")
endfunction()

# cmake/KernelList.cmake's entries: flashcore_kernel(<path> <operation> <dqk> <dv> <dtype>...).
set_property(GLOBAL PROPERTY FLASHCORE_KERNEL_LIST "")
function(flashcore_kernel path op dqk dv)
  if(NOT ARGN)
    message(FATAL_ERROR "flashcore_kernel(${path} ${op} ${dqk} ${dv}): no dtype")
  endif()
  foreach(dt ${ARGN})
    if(NOT dt MATCHES "^(fp16|bf16|fp32)$")
      message(FATAL_ERROR "flashcore_kernel(${path} ${op} ${dqk} ${dv}): unknown dtype ${dt}")
    endif()
    set_property(GLOBAL APPEND PROPERTY FLASHCORE_KERNEL_LIST "${path}:${op}:${dqk}:${dv}:${dt}")
  endforeach()
endfunction()
include(${CMAKE_CURRENT_LIST_DIR}/KernelList.cmake)

# Generates the units and the list of one (path, operation); returns the units to compile.
# path_built: false when the path is pruned (its list is still generated: every kernel unbuilt).
function(flashcore_generate_kernels path op include_header instantiate_macro path_built out_units)
  get_property(entries GLOBAL PROPERTY FLASHCORE_KERNEL_LIST)
  set(gen_dir ${PROJECT_BINARY_DIR}/generated/kernels)
  set(list_text "// Generated from cmake/KernelList.cmake by cmake/FlashcoreKernels.cmake: do not edit.\n")
  string(APPEND list_text "// FLASHCORE_KERNEL(head dim QK, head dim V, DType enumerator, element type, built: 0/1)\n")
  set(units)
  foreach(entry ${entries})
    string(REPLACE ":" ";" fields ${entry})
    list(GET fields 0 e_path)
    list(GET fields 1 e_op)
    if(NOT e_path STREQUAL path OR NOT e_op STREQUAL op)
      continue()
    endif()
    list(GET fields 2 dqk)
    list(GET fields 3 dv)
    list(GET fields 4 dt)
    if(dt STREQUAL "fp16")
      set(enumerator kFloat16)
      set(element __half)
    elseif(dt STREQUAL "bf16")
      set(enumerator kBFloat16)
      set(element __nv_bfloat16)
    else()
      set(enumerator kFloat32)
      set(element float)
    endif()
    set(built 0)
    if(path_built AND dqk IN_LIST FLASHCORE_HEAD_DIMS AND dv IN_LIST FLASHCORE_HEAD_DIMS AND dt IN_LIST FLASHCORE_DTYPES)
      set(built 1)
      set(unit ${gen_dir}/${path}_${op}_d${dqk}_${dv}_${dt}.cu)
      file(CONFIGURE OUTPUT ${unit} CONTENT
"// Generated from cmake/KernelList.cmake: ${path} ${op}, head dims ${dqk}/${dv}, ${dt}.
#include \"${include_header}\"

${instantiate_macro}(${dqk}, ${dv}, ${element})
")
      list(APPEND units ${unit})
    endif()
    string(APPEND list_text "FLASHCORE_KERNEL(${dqk}, ${dv}, ${enumerator}, ${element}, ${built})\n")
  endforeach()
  file(CONFIGURE OUTPUT ${gen_dir}/${path}_${op}_kernels.inc CONTENT "${list_text}")
  list(LENGTH units n)
  message(STATUS "flashcore: ${path} ${op}: ${n} kernel units")
  set(${out_units} ${units} PARENT_SCOPE)
endfunction()

# Adds each kernel path (or its "not built" stub) to the target.
function(flashcore_add_kernel_paths target)
  set(src ${PROJECT_SOURCE_DIR}/src)
  target_include_directories(${target} PRIVATE ${PROJECT_BINARY_DIR}/generated)
  if(FLASHCORE_BUILD_TUNING_KERNELS)
    target_compile_definitions(${target} PRIVATE FLASHCORE_TUNING_KERNELS=1)
  endif()

  # ---- sm80: mma.sync path; runs on every arch >= 80, so it is built for all of them ------------
  set(sm80_built ${FLASHCORE_BUILD_SM80})
  flashcore_generate_kernels(sm80 fwd "sm80/fwd/kernel.cuh" FLASHCORE_SM80_FWD_INSTANTIATE ${sm80_built} sm80_units)
  flashcore_generate_kernels(sm80 bwd "sm80/bwd/kernel.cuh" FLASHCORE_SM80_BWD_INSTANTIATE ${sm80_built} sm80_bwd_units)
  flashcore_generate_kernels(sm80 decode "sm80/decode/kernel.cuh" FLASHCORE_SM80_DECODE_INSTANTIATE ${sm80_built}
                             sm80_decode_units)
  if(sm80_built)
    set(sm80_sources ${src}/sm80/fwd/launch.cu ${src}/sm80/bwd/launch.cu ${src}/sm80/decode/launch.cu)
    set(sm80_all_units ${sm80_units} ${sm80_bwd_units} ${sm80_decode_units})
    target_sources(${target} PRIVATE ${sm80_sources} ${sm80_all_units})
    flashcore_set_cuda_arch_flags(${sm80_sources} ${sm80_all_units} ${FLASHCORE_CUDA_ARCHS})
    target_compile_definitions(${target} PRIVATE FLASHCORE_HAS_SM80=1)
  else()
    target_sources(${target} PRIVATE ${src}/api/stubs/sm80_stub.cpp)
    message(STATUS "flashcore: sm80 path not built")
  endif()

  # ---- sm90: wgmma/TMA path; only meaningful for sm_90a ------------------------------------------
  # The forward plan (host-only, pure) is always built: the CPU tests check it in every build.
  target_sources(${target} PRIVATE ${src}/sm90/fwd/plan.cpp)
  set(sm90_built OFF)
  if(FLASHCORE_BUILD_SM90 AND "90a" IN_LIST FLASHCORE_CUDA_ARCHS)
    set(sm90_built ON)
  endif()
  flashcore_generate_kernels(sm90 fwd "sm90/fwd/launch_kernel.cuh" FLASHCORE_SM90_FWD_INSTANTIATE ${sm90_built} sm90_fwd_units)
  flashcore_generate_kernels(sm90 bwd "sm90/bwd/kernel.cuh" FLASHCORE_SM90_BWD_INSTANTIATE ${sm90_built} sm90_bwd_units)
  set(sm90_wide_built OFF)
  if(sm90_built AND FLASHCORE_BUILD_SM90_WIDE)
    set(sm90_wide_built ON)
  endif()
  flashcore_generate_kernels(sm90 wide "sm90/wide/kernel.cuh" FLASHCORE_SM90_WIDE_INSTANTIATE ${sm90_wide_built}
                             sm90_wide_units)
  set(sm90_units ${sm90_fwd_units} ${sm90_bwd_units} ${sm90_wide_units})
  if(sm90_built)
    set(sm90_sources ${src}/sm90/common/tensor_map.cu ${src}/sm90/fwd/launch.cu ${src}/sm90/bwd/launch.cu)
    # Head dims above 256 (docs/design/large-head-dims.md).
    if(FLASHCORE_BUILD_SM90_WIDE)
      list(APPEND sm90_sources ${src}/sm90/wide/launch.cu)
      # Only the sm90 path's entry dispatches to it: no other unit is rebuilt when the option flips.
      set_property(SOURCE ${src}/sm90/fwd/launch.cu APPEND PROPERTY COMPILE_DEFINITIONS FLASHCORE_HAS_SM90_WIDE=1)
      message(STATUS "flashcore: sm90 wide kernels (head dims above 256) built")
    endif()
    target_sources(${target} PRIVATE ${sm90_sources} ${sm90_units})
    flashcore_set_cuda_arch_flags(${sm90_sources} ${sm90_units} 90a)
    target_compile_definitions(${target} PRIVATE FLASHCORE_HAS_SM90=1)
  else()
    target_sources(${target} PRIVATE ${src}/api/stubs/sm90_stub.cpp)
    message(STATUS "flashcore: sm90 path not built")
  endif()

  # ---- standalone softmax ladder -------------------------------------------------------------------
  include(${src}/softmax/CMakeSources.cmake)

  string(REPLACE ";" "," archs_csv "${FLASHCORE_CUDA_ARCHS}")
  string(REPLACE ";" "," dims_csv "${FLASHCORE_HEAD_DIMS}")
  string(REPLACE ";" "," dtypes_csv "${FLASHCORE_DTYPES}")
  flashcore_ptx_arch(ptx_arch ${FLASHCORE_CUDA_ARCHS})
  target_compile_definitions(${target} PRIVATE
    FLASHCORE_PTX_ARCH="${ptx_arch}"
    FLASHCORE_VERSION="${PROJECT_VERSION}"
    FLASHCORE_ARCHS="${archs_csv}" FLASHCORE_HEAD_DIMS_STR="${dims_csv}" FLASHCORE_DTYPES_STR="${dtypes_csv}")
endfunction()
