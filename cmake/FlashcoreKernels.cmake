# Kernel-path sources, architecture flags and instantiation pruning.
#
# Each kernel path lives in src/<path>/ with its shared code (*.cu, *.cpp) and one translation unit
# per (head dims, dtype) under src/<path>/instantiations/, named  <anything>_d<QK>_<V>_<dtype>.cu
# (for example fwd_d128_128_bf16.cu). Only the units whose QK and V head dims are both in
# FLASHCORE_HEAD_DIMS and whose dtype is in FLASHCORE_DTYPES are compiled; each compiled unit also
# defines FLASHCORE_HAS_<PATH>_D<QK>_<V>_<DTYPE>=1 so dispatch knows exactly what this build holds.

# Sets -gencode flags on CUDA source files for the listed archs (80, 86, 89, 90a, ...).
function(flashcore_set_cuda_arch_flags)
  set(files ${ARGV})
  set(archs)
  set(srcs)
  foreach(item ${files})
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
  if(FLASHCORE_PTXAS_VERBOSE)
    list(APPEND flags "-Xptxas=-v")
  endif()
  # Source properties are per directory: set them where the calling target lives.
  set_source_files_properties(${srcs} DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR} PROPERTIES COMPILE_OPTIONS "${flags}")
endfunction()

# Collects the selected instantiation units of one path and the definitions that announce them.
function(flashcore_select_instantiations path out_sources out_defs)
  file(GLOB units CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/${path}/instantiations/*.cu)
  string(TOUPPER ${path} PATH_UPPER)
  set(selected)
  set(defs)
  foreach(unit ${units})
    get_filename_component(name ${unit} NAME_WE)
    if(NOT name MATCHES "_d([0-9]+)_([0-9]+)_(fp16|bf16|fp32)$")
      message(FATAL_ERROR "instantiation unit ${unit} does not follow <name>_d<QK>_<V>_<dtype>.cu")
    endif()
    set(dqk ${CMAKE_MATCH_1})
    set(dv ${CMAKE_MATCH_2})
    set(dt ${CMAKE_MATCH_3})
    if(dqk IN_LIST FLASHCORE_HEAD_DIMS AND dv IN_LIST FLASHCORE_HEAD_DIMS AND dt IN_LIST FLASHCORE_DTYPES)
      list(APPEND selected ${unit})
      string(TOUPPER ${dt} DT_UPPER)
      list(APPEND defs FLASHCORE_HAS_${PATH_UPPER}_D${dqk}_${dv}_${DT_UPPER}=1)
    endif()
  endforeach()
  list(REMOVE_DUPLICATES defs)
  set(${out_sources} ${selected} PARENT_SCOPE)
  set(${out_defs} ${defs} PARENT_SCOPE)
endfunction()

# Adds each kernel path (or its "not built" stub) to the target.
function(flashcore_add_kernel_paths target)
  set(generic_archs)
  foreach(arch ${FLASHCORE_CUDA_ARCHS})
    list(APPEND generic_archs ${arch})
  endforeach()

  # ---- sm80: mma.sync path; runs on every arch >= 80, so it is built for all of them ------------
  if(FLASHCORE_BUILD_SM80 AND EXISTS ${CMAKE_SOURCE_DIR}/src/sm80/launch.cu)
    file(GLOB sm80_common CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/sm80/*.cu ${CMAKE_SOURCE_DIR}/src/sm80/*.cpp)
    flashcore_select_instantiations(sm80 sm80_units sm80_defs)
    target_sources(${target} PRIVATE ${sm80_common} ${sm80_units})
    flashcore_set_cuda_arch_flags(${sm80_common} ${sm80_units} ${generic_archs})
    target_compile_definitions(${target} PRIVATE FLASHCORE_HAS_SM80=1 ${sm80_defs})
    message(STATUS "flashcore: sm80 path with ${sm80_defs}")
  else()
    target_sources(${target} PRIVATE ${CMAKE_SOURCE_DIR}/src/api/stubs/sm80_stub.cpp)
    message(STATUS "flashcore: sm80 path not built")
  endif()

  # ---- sm90: wgmma/TMA path; only meaningful for sm_90a ------------------------------------------
  if(FLASHCORE_BUILD_SM90 AND "90a" IN_LIST FLASHCORE_CUDA_ARCHS AND EXISTS ${CMAKE_SOURCE_DIR}/src/sm90/launch.cu)
    file(GLOB sm90_common CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/sm90/*.cu ${CMAKE_SOURCE_DIR}/src/sm90/*.cpp)
    flashcore_select_instantiations(sm90 sm90_units sm90_defs)
    target_sources(${target} PRIVATE ${sm90_common} ${sm90_units})
    flashcore_set_cuda_arch_flags(${sm90_common} ${sm90_units} 90a)
    target_compile_definitions(${target} PRIVATE FLASHCORE_HAS_SM90=1 ${sm90_defs})
    message(STATUS "flashcore: sm90 path with ${sm90_defs}")
  else()
    target_sources(${target} PRIVATE ${CMAKE_SOURCE_DIR}/src/api/stubs/sm90_stub.cpp)
    message(STATUS "flashcore: sm90 path not built")
  endif()

  # ---- standalone softmax ladder -------------------------------------------------------------------
  if(EXISTS ${CMAKE_SOURCE_DIR}/src/softmax/CMakeSources.cmake)
    include(${CMAKE_SOURCE_DIR}/src/softmax/CMakeSources.cmake)
  endif()

  string(REPLACE ";" "," archs_csv "${FLASHCORE_CUDA_ARCHS}")
  string(REPLACE ";" "," dims_csv "${FLASHCORE_HEAD_DIMS}")
  string(REPLACE ";" "," dtypes_csv "${FLASHCORE_DTYPES}")
  target_compile_definitions(${target} PRIVATE
    FLASHCORE_VERSION="${PROJECT_VERSION}"
    FLASHCORE_ARCHS="${archs_csv}" FLASHCORE_HEAD_DIMS_STR="${dims_csv}" FLASHCORE_DTYPES_STR="${dtypes_csv}")
endfunction()
