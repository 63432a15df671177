// libmixrt_cpu_onednn3.so: the plugin's products on oneDNN 3.x
// (companion_abi.h says why it is a library of its own). The same
// prepared-matmul code as the plugin's, compiled against oneDNN 3.x.
#include <algorithm>
#include <cstring>
#include <string>

#include "backends/cpu/onednn/prepared_matmul.h"
#include "backends/cpu/onednn3/companion_abi.h"
#include "backends/cpu/onednn3/companion_product.h"
#include "oneapi/dnnl/dnnl.h"

namespace {

void CopyOut(const std::string& text, char* out, size_t size) {
  if (out == nullptr || size == 0) return;
  const size_t n = std::min(text.size(), size - 1);
  std::memcpy(out, text.data(), n);
  out[n] = '\0';
}

}  // namespace

#define MIXRT_ONEDNN3_EXPORT extern "C" __attribute__((visibility("default")))

MIXRT_ONEDNN3_EXPORT int32_t mixrt_cpu_onednn3_abi_version(void) {
  return MIXRT_CPU_ONEDNN3_ABI_VERSION;
}

MIXRT_ONEDNN3_EXPORT int32_t mixrt_cpu_onednn3_version(void) {
  const dnnl_version_t* v = dnnl_version();
  return v->major * 10000 + v->minor * 100 + v->patch;
}

MIXRT_ONEDNN3_EXPORT int32_t mixrt_cpu_onednn3_run(
    const MixrtOneDnn3Product* product, const void* a, const void* b, void* c,
    const void* bias, char* message, size_t message_size) {
  mixrt::cpu::MatmulShape shape;
  if (product == nullptr ||
      !mixrt::cpu::FromCompanionProduct(*product, &shape)) {
    CopyOut("the product's form is malformed (rank or activation)", message,
            message_size);
    return 1;
  }
  // No exception may cross into the plugin: another library's runtime
  // would have to catch it.
  try {
    mixrt::cpu::RunPreparedMatmul(shape, a, b, c, bias);
    return 0;
  } catch (const dnnl::error& e) {
    CopyOut(std::string("oneDNN 3.x: ") + e.what(), message, message_size);
  } catch (const std::exception& e) {
    CopyOut(e.what(), message, message_size);
  }
  return 1;
}

MIXRT_ONEDNN3_EXPORT void mixrt_cpu_onednn3_implementation(
    const MixrtOneDnn3Product* product, char* out, size_t out_size) {
  mixrt::cpu::MatmulShape shape;
  std::string implementation;
  if (product != nullptr &&
      mixrt::cpu::FromCompanionProduct(*product, &shape)) {
    try {
      implementation = mixrt::cpu::PreparedMatmulImplementation(shape);
    } catch (const std::exception&) {
      implementation.clear();
    }
  }
  CopyOut(implementation, out, out_size);
}
