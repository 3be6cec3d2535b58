# cmake -P script behind the `docs.configuration` test: docs/configuration.md must be exactly what
# `shoal-info --env --markdown` prints from the configuration table, so the docs cannot drift from the code.
# Inputs (-D): SHOAL_INFO, DOC.
cmake_minimum_required(VERSION 3.25)
execute_process(COMMAND ${SHOAL_INFO} --env --markdown RESULT_VARIABLE rc OUTPUT_VARIABLE generated ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "shoal-info --env --markdown failed (${rc}): ${err}")
endif()
file(READ ${DOC} committed)
if(NOT generated STREQUAL committed)
  file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/configuration.md.generated "${generated}")
  message(FATAL_ERROR "${DOC} is out of date with src/base/config_table.def. Regenerate it:\n"
    "  <build>/bin/shoal-info --env --markdown > docs/configuration.md\n"
    "(what it should hold was written to ${CMAKE_CURRENT_BINARY_DIR}/configuration.md.generated)")
endif()
