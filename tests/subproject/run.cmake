# Configures, builds and runs tests/subproject in both subproject modes, each in its own scratch
# directory. Variables: SOURCE_DIR (the repository), SCRATCH.
include(${CMAKE_CURRENT_LIST_DIR}/../run_steps.cmake)
file(REMOVE_RECURSE ${SCRATCH})
# add_subdirectory names flashcore's architectures; fetchcontent leaves them to the parent's
# CMAKE_CUDA_ARCHITECTURES (86-real -> FLASHCORE_CUDA_ARCHS 86, checked below).
foreach(mode add_subdirectory fetchcontent)
  set(build ${SCRATCH}/${mode})
  if(mode STREQUAL "fetchcontent")
    set(archs -DCMAKE_CUDA_ARCHITECTURES=86-real)
  else()
    set(archs -DFLASHCORE_CUDA_ARCHS=80)
  endif()
  flashcore_run_steps(${mode}
    ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/subproject -B ${build} -G Ninja -DMODE=${mode}
      -DFLASHCORE_SOURCE=${SOURCE_DIR} ${archs} -DFLASHCORE_HEAD_DIMS=64 -DFLASHCORE_DTYPES=bf16
      -DFLASHCORE_BUILD_SM80=OFF -DFLASHCORE_BUILD_SM90=OFF ---
    ${CMAKE_COMMAND} --build ${build} --target consumer ---
    ${build}/consumer)
  if(mode STREQUAL "fetchcontent")
    file(STRINGS ${build}/CMakeCache.txt line REGEX "^FLASHCORE_CUDA_ARCHS:")
    if(NOT line STREQUAL "FLASHCORE_CUDA_ARCHS:STRING=86")
      message(FATAL_ERROR "CMAKE_CUDA_ARCHITECTURES=86-real should give FLASHCORE_CUDA_ARCHS 86, got '${line}'")
    endif()
  endif()
endforeach()
