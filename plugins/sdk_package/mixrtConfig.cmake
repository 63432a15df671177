# The mixrt runtime as a CMake package, installed by
#   bazel run //plugins:install -- --prefix=DIR
# Use it with
#   find_package(mixrt 0.1 REQUIRED)            # -DCMAKE_PREFIX_PATH=DIR
#   target_link_libraries(app PRIVATE mixrt::mixrt)
# mixrt::mixrt is libmixrt.so (the core: tensors, autocast, GradScaler, nn,
# optimizers, the compiler, checkpoints, the Trainer, the backend registry)
# with its headers (#include "mixrt/mixrt.h"), C++17 and the system's
# Abseil, which the headers use. The backends are plugins: libmixrt loads
# the ones beside itself in DIR/lib and those MIXRT_PLUGIN_PATH lists.
get_filename_component(_mixrt_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.."
                       ABSOLUTE)

include(CMakeFindDependencyMacro)
find_dependency(absl)

if(NOT TARGET mixrt::mixrt)
  add_library(mixrt::mixrt SHARED IMPORTED)
  set_target_properties(mixrt::mixrt PROPERTIES
    IMPORTED_LOCATION "${_mixrt_prefix}/lib/libmixrt.so.${mixrt_VERSION}"
    IMPORTED_SONAME "libmixrt.so.${mixrt_VERSION_MAJOR}.${mixrt_VERSION_MINOR}"
    INTERFACE_INCLUDE_DIRECTORIES "${_mixrt_prefix}/include"
    INTERFACE_COMPILE_FEATURES cxx_std_17
    INTERFACE_LINK_LIBRARIES
      "absl::status;absl::statusor;absl::strings;absl::str_format;absl::synchronization;absl::flat_hash_map;absl::node_hash_map;absl::time;absl::span")
endif()

set(MIXRT_PLUGIN_DIR "${_mixrt_prefix}/lib")
unset(_mixrt_prefix)
