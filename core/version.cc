#include "core/version.h"

#define MIXRT_STRINGIFY_(x) #x
#define MIXRT_STRINGIFY(x) MIXRT_STRINGIFY_(x)

namespace mixrt {

const char* RuntimeVersion() {
  return MIXRT_STRINGIFY(MIXRT_VERSION_MAJOR) "." MIXRT_STRINGIFY(
      MIXRT_VERSION_MINOR) "." MIXRT_STRINGIFY(MIXRT_VERSION_PATCH);
}

}  // namespace mixrt
