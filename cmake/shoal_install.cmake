# Install tree + CMake package config, so a consumer does find_package(shoal) and links shoal::shoal.
include(CMakePackageConfigHelpers)
install(TARGETS shoal shoal_device EXPORT shoal-targets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/shoal DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT shoal-targets NAMESPACE shoal:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/shoal)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/shoal-config.cmake.in
  ${PROJECT_BINARY_DIR}/shoal-config.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/shoal)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/shoal-config-version.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/shoal-config.cmake ${PROJECT_BINARY_DIR}/shoal-config-version.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/shoal)
