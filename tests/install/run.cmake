# Installs the build tree into a scratch prefix, then configures, builds and runs the consumer.
# Variables: BUILD_DIR, SOURCE_DIR, SCRATCH.
file(REMOVE_RECURSE ${SCRATCH})
foreach(step
    "${CMAKE_COMMAND};--install;${BUILD_DIR};--prefix;${SCRATCH}/prefix"
    "${CMAKE_COMMAND};-S;${SOURCE_DIR};-B;${SCRATCH}/build;-DCMAKE_PREFIX_PATH=${SCRATCH}/prefix"
    "${CMAKE_COMMAND};--build;${SCRATCH}/build"
    "${SCRATCH}/build/consumer"
    "${SCRATCH}/build/consumer_static")
  execute_process(COMMAND ${step} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "step failed (${rc}): ${step}")
  endif()
endforeach()
