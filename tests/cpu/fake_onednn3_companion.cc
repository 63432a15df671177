// A stand-in for libmixrt_cpu_onednn3.so (backends/cpu/onednn3/
// companion_abi.h) for the plugin's tests on any CPU: plain loops in double,
// for every float dtype, where the real companion's oneDNN 3.x has f16
// kernels only on avx512_fp16 CPUs. It claims oneDNN 3.2.0 and names its
// implementation "fake:loops". Ranks 2 and 3 (one batch dim, broadcast when
// 1), a bias, a sum, and relu; anything else is refused as oneDNN would
// refuse what it cannot build.
#include <cstdint>
#include <cstring>
#include <string>

#include "backends/cpu/onednn3/companion_abi.h"
#include "mixrt/float_convert.h"
#include "mixrt/plugin_api.h"

namespace {

double Load(const void* base, int32_t dtype, int64_t at) {
  switch (dtype) {
    case MIXRT_DTYPE_F32:
      return static_cast<const float*>(base)[at];
    case MIXRT_DTYPE_F16:
      return mixrt::sdk::F16BitsToF32(static_cast<const uint16_t*>(base)[at]);
    default:
      return mixrt::sdk::BF16BitsToF32(static_cast<const uint16_t*>(base)[at]);
  }
}

void Store(void* base, int32_t dtype, int64_t at, double v) {
  const float f = static_cast<float>(v);
  switch (dtype) {
    case MIXRT_DTYPE_F32:
      static_cast<float*>(base)[at] = f;
      break;
    case MIXRT_DTYPE_F16:
      static_cast<uint16_t*>(base)[at] = mixrt::sdk::F32ToF16Bits(f);
      break;
    default:
      static_cast<uint16_t*>(base)[at] = mixrt::sdk::F32ToBF16Bits(f);
  }
}

bool Takes(const MixrtOneDnn3Product& p) {
  const int rank = p.c.rank;
  if ((rank != 2 && rank != 3) || p.a.rank != rank || p.b.rank != rank)
    return false;
  if (p.bias.rank != 0 && p.bias.rank != rank) return false;
  for (int i = 0; i < p.num_eltwise; ++i) {
    if (p.eltwise[i].activation != MIXRT_ONEDNN3_RELU) return false;
  }
  return p.num_eltwise <= 1;
}

// Element (batch s, row i, col j) of an operand; a batch dim of 1
// broadcasts.
int64_t At(const MixrtOneDnn3Operand& o, int64_t s, int64_t i, int64_t j) {
  const int r = o.rank;
  int64_t at = i * o.strides[r - 2] + j * o.strides[r - 1];
  if (r == 3 && o.dims[0] != 1) at += s * o.strides[0];
  return at;
}

void CopyOut(const char* text, char* out, size_t size) {
  if (out == nullptr || size == 0) return;
  std::strncpy(out, text, size - 1);
  out[size - 1] = '\0';
}

}  // namespace

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

FAKE_EXPORT int32_t mixrt_cpu_onednn3_abi_version(void) {
  return MIXRT_CPU_ONEDNN3_ABI_VERSION;
}

FAKE_EXPORT int32_t mixrt_cpu_onednn3_version(void) { return 30200; }

FAKE_EXPORT void mixrt_cpu_onednn3_implementation(
    const MixrtOneDnn3Product* product, char* out, size_t out_size) {
  CopyOut(product != nullptr && Takes(*product) ? "fake:loops" : "", out,
          out_size);
}

FAKE_EXPORT int32_t mixrt_cpu_onednn3_run(const MixrtOneDnn3Product* product,
                                          const void* a, const void* b, void* c,
                                          const void* bias, char* message,
                                          size_t message_size) {
  if (product == nullptr || !Takes(*product)) {
    CopyOut("fake companion: only ranks 2-3, bias, sum and relu", message,
            message_size);
    return 1;
  }
  const MixrtOneDnn3Product& p = *product;
  const int r = p.c.rank;
  const int64_t batch = r == 3 ? p.c.dims[0] : 1;
  const int64_t m = p.c.dims[r - 2], n = p.c.dims[r - 1];
#if defined(FAKE_COMPANION_LIES_ABOVE)
  // A lying build: products of more elements than this "succeed" without
  // writing anything.
  if (batch * m * n > FAKE_COMPANION_LIES_ABOVE) return 0;
#endif
  const int64_t k = p.a.dims[r - 1];
  for (int64_t s = 0; s < batch; ++s) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t l = 0; l < k; ++l) {
          sum += Load(a, p.a.dtype, At(p.a, s, i, l)) *
                 Load(b, p.b.dtype, At(p.b, s, l, j));
        }
        if (p.bias.rank != 0)
          sum += Load(bias, p.bias.dtype, At(p.bias, s, 0, j));
        const int64_t at = At(p.c, s, i, j);
        if (p.sum_beta != 0) sum += p.sum_beta * Load(c, p.c.dtype, at);
        if (p.num_eltwise == 1 && sum < 0) sum *= p.eltwise[0].alpha;
        Store(c, p.c.dtype, at, sum);
      }
    }
  }
  return 0;
}
