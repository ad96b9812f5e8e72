# Installs the build tree into a scratch prefix, then configures, builds and runs the consumer.
# Variables: BUILD_DIR, SOURCE_DIR, SCRATCH.
include(${CMAKE_CURRENT_LIST_DIR}/../run_steps.cmake)
file(REMOVE_RECURSE ${SCRATCH})
flashcore_run_steps(install
  ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${SCRATCH}/prefix ---
  ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${SCRATCH}/build -DCMAKE_PREFIX_PATH=${SCRATCH}/prefix ---
  ${CMAKE_COMMAND} --build ${SCRATCH}/build ---
  ${SCRATCH}/build/consumer ---
  ${SCRATCH}/build/consumer_static)
