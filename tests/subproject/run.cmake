# Configures, builds and runs tests/subproject in both subproject modes, each in its own scratch
# directory. Variables: SOURCE_DIR (the repository), SCRATCH.
include(${CMAKE_CURRENT_LIST_DIR}/../run_steps.cmake)
file(REMOVE_RECURSE ${SCRATCH})
foreach(mode add_subdirectory fetchcontent)
  set(build ${SCRATCH}/${mode})
  flashcore_run_steps(${mode}
    ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/subproject -B ${build} -G Ninja -DMODE=${mode}
      -DFLASHCORE_SOURCE=${SOURCE_DIR} -DFLASHCORE_CUDA_ARCHS=80 -DFLASHCORE_HEAD_DIMS=64 -DFLASHCORE_DTYPES=bf16
      -DFLASHCORE_BUILD_SM80=OFF -DFLASHCORE_BUILD_SM90=OFF ---
    ${CMAKE_COMMAND} --build ${build} --target consumer ---
    ${build}/consumer)
endforeach()
