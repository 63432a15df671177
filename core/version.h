// The version of the mixrt runtime (the C++ API of libmixrt, mixrt/mixrt.h).
// Before 1.0 a minor release may change that API, so the shared library's
// SONAME carries major and minor (libmixrt.so.0.1; core/BUILD) and the CMake
// package accepts only the same major.minor. The plugin ABI has its own
// version (MIXRT_PLUGIN_API_MAJOR/MINOR in mixrt/plugin_api.h).
#ifndef MIXRT_CORE_VERSION_H_
#define MIXRT_CORE_VERSION_H_

#define MIXRT_VERSION_MAJOR 0
#define MIXRT_VERSION_MINOR 1
#define MIXRT_VERSION_PATCH 0

namespace mixrt {

// "0.1.0": the version of the mixrt core this program runs (the library's,
// which may be newer than the headers it was built with).
const char* RuntimeVersion();

}  // namespace mixrt

#endif  // MIXRT_CORE_VERSION_H_
