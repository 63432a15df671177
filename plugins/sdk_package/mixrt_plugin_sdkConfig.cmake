# The mixrt plugin SDK as a CMake package, installed by
#   bazel run //plugins:install -- --prefix=DIR
# Use it with
#   find_package(mixrt_plugin_sdk REQUIRED)   # -DCMAKE_PREFIX_PATH=DIR
#   mixrt_add_plugin(mine SOURCES mine.cc)    # builds libmixrt_mine.so
# It defines mixrt::plugin_sdk (headers, the static SDK, C++17; the SDK
# needs nothing beyond the C++ standard library, so a plugin built with it
# carries no Abseil in its DT_NEEDED and loads on any distribution),
# MIXRT_CLI and MIXRT_CONFORMANCE (the installed binaries, which find the
# reference plugin beside themselves) and mixrt_add_plugin().
get_filename_component(_mixrt_sdk_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.."
                       ABSOLUTE)

if(NOT TARGET mixrt::plugin_sdk)
  add_library(mixrt::plugin_sdk STATIC IMPORTED)
  set_target_properties(mixrt::plugin_sdk PROPERTIES
    IMPORTED_LOCATION "${_mixrt_sdk_prefix}/lib/libmixrt_plugin_sdk.a"
    INTERFACE_INCLUDE_DIRECTORIES "${_mixrt_sdk_prefix}/include"
    INTERFACE_COMPILE_FEATURES cxx_std_17)
endif()

set(MIXRT_PLUGIN_EXPORTS_SCRIPT
    "${_mixrt_sdk_prefix}/share/mixrt/plugin_exports.lds")
set(MIXRT_CLI "${_mixrt_sdk_prefix}/bin/mixrt")
set(MIXRT_CONFORMANCE "${_mixrt_sdk_prefix}/bin/conformance")

# mixrt_add_plugin(<name> SOURCES <files...> [LIBRARIES <libs...>])
# Builds libmixrt_<name>.so: hidden visibility, position-independent,
# C++17, exporting only the ABI's two entry symbols (a version script:
# -fvisibility=hidden alone leaks ~150 std:: symbols that can clash between
# plugins), every symbol resolved at link time.
function(mixrt_add_plugin name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBRARIES" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "mixrt_add_plugin(${name}): SOURCES is required")
  endif()
  if(NOT name MATCHES "^[A-Za-z0-9_-]+$")
    message(FATAL_ERROR "mixrt_add_plugin(${name}): a plugin name uses only "
                        "[A-Za-z0-9_-] (it is what MIXRT_BACKEND selects)")
  endif()
  add_library(mixrt_${name} MODULE ${ARG_SOURCES})
  set_target_properties(mixrt_${name} PROPERTIES
    OUTPUT_NAME "mixrt_${name}"
    PREFIX "lib"
    SUFFIX ".so"
    CXX_STANDARD 17
    CXX_STANDARD_REQUIRED ON
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    POSITION_INDEPENDENT_CODE ON
    LINK_DEPENDS "${MIXRT_PLUGIN_EXPORTS_SCRIPT}")
  target_link_libraries(mixrt_${name} PRIVATE mixrt::plugin_sdk ${ARG_LIBRARIES})
  target_link_options(mixrt_${name} PRIVATE
    "-Wl,--version-script=${MIXRT_PLUGIN_EXPORTS_SCRIPT}"
    "-Wl,--no-undefined")
endfunction()
