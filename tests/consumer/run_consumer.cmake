# cmake -P script behind the `consumer.find_package` test: install the current build into a prefix inside
# the build tree, then configure, build and run tests/consumer/project against that prefix alone.
# Inputs (-D): BUILD_DIR, SOURCE_DIR, WORK_DIR, GENERATOR, BUILD_TYPE, CXX_COMPILER, CUDA_COMPILER, CUDA_ARCHITECTURES.
cmake_minimum_required(VERSION 3.25)

function(step)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "NAME" "COMMAND")
  message(STATUS "consumer: ${arg_NAME}")
  execute_process(COMMAND ${arg_COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message("${out}")
    message(FATAL_ERROR "consumer: ${arg_NAME} failed (${rc}): ${arg_COMMAND}")
  endif()
  message("${out}")
endfunction()

set(prefix ${WORK_DIR}/prefix)
set(consumer_build ${WORK_DIR}/build)
file(REMOVE_RECURSE ${prefix} ${consumer_build})

step(NAME "install into ${prefix}" COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
foreach(file lib/cmake/shoal/shoal-config.cmake include/shoal/error.hpp include/shoal/version.hpp)
  if(NOT EXISTS ${prefix}/${file})
    message(FATAL_ERROR "consumer: the install tree lacks ${file}")
  endif()
endforeach()

# Only the install prefix is searched for shoal (not the package registry or the build tree).
step(NAME "configure" COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/consumer/project -B ${consumer_build}
  -G ${GENERATOR}
  -DCMAKE_BUILD_TYPE=${BUILD_TYPE}
  -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
  -DCMAKE_CUDA_COMPILER=${CUDA_COMPILER}
  "-DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHITECTURES}"
  -DCMAKE_PREFIX_PATH=${prefix}
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
  -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF)
step(NAME "build" COMMAND ${CMAKE_COMMAND} --build ${consumer_build})
step(NAME "run" COMMAND ${consumer_build}/shoal_consumer)
