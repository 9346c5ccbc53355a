# Findhiredis.cmake -- locates hiredis as shipped by Debian's libhiredis-dev
# (0.14), which installs no CMake config.
#
# Provides the imported target hiredis::hiredis (the name of the config file
# of later upstream releases) and sets hiredis_FOUND, hiredis_VERSION and
# hiredis_INCLUDE_DIR. Sluice links it privately; its installed
# sluiceConfig.cmake uses this module too, since a static library's private
# dependencies must still be linked by whoever links the library.

find_path(hiredis_INCLUDE_DIR NAMES hiredis/hiredis.h)
find_library(hiredis_LIBRARY NAMES hiredis)

if(hiredis_INCLUDE_DIR AND EXISTS "${hiredis_INCLUDE_DIR}/hiredis/hiredis.h")
  file(STRINGS "${hiredis_INCLUDE_DIR}/hiredis/hiredis.h" _hiredis_version_lines
       REGEX "^#define HIREDIS_(MAJOR|MINOR|PATCH) [0-9]+")
  foreach(_part MAJOR MINOR PATCH)
    string(REGEX MATCH "HIREDIS_${_part} ([0-9]+)" _ "${_hiredis_version_lines}")
    set(_hiredis_${_part} "${CMAKE_MATCH_1}")
  endforeach()
  set(hiredis_VERSION "${_hiredis_MAJOR}.${_hiredis_MINOR}.${_hiredis_PATCH}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(hiredis
  REQUIRED_VARS hiredis_INCLUDE_DIR hiredis_LIBRARY
  VERSION_VAR hiredis_VERSION)

if(hiredis_FOUND AND NOT TARGET hiredis::hiredis)
  add_library(hiredis::hiredis UNKNOWN IMPORTED)
  set_target_properties(hiredis::hiredis PROPERTIES
    IMPORTED_LOCATION "${hiredis_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${hiredis_INCLUDE_DIR}")
endif()

mark_as_advanced(hiredis_INCLUDE_DIR hiredis_LIBRARY)
