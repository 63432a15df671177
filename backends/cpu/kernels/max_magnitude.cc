#include "backends/cpu/kernels/max_magnitude.h"

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "backends/cpu/kernels/parallel.h"

namespace mixrt::cpu {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The largest magnitude's bits over `n` dense elements of Bits (uint32_t
// for f32, uint16_t for bf16); the sign bit is masked off, so NaN and inf
// compare above every finite value.
template <typename Bits>
Bits MaxMagnitudeBits(const Bits* p, int64_t n) {
  constexpr Bits kMagnitude = std::numeric_limits<Bits>::max() >> 1;
  std::atomic<Bits> best{0};
  ParallelFor(n, int64_t{1} << 16, [&](int64_t begin, int64_t end) {
    Bits m = 0;
    for (int64_t i = begin; i < end; ++i) {
      const Bits v = static_cast<Bits>(p[i] & kMagnitude);
      m = v > m ? v : m;
    }
    Bits seen = best.load();
    while (m > seen && !best.compare_exchange_weak(seen, m)) {
    }
  });
  return best.load();
}

}  // namespace

double MaxMagnitude(const sdk::TensorRef& t) {
  // The dims that address distinct elements, and whether they are dense.
  std::vector<int64_t> sizes, strides;
  for (int d = 0; d < t.ndim(); ++d) {
    if (t.dim(d) == 0) return 0;
    if (t.dim(d) > 1 && t.stride(d) != 0) {
      sizes.push_back(t.dim(d));
      strides.push_back(t.stride(d));
    }
  }
  int64_t count = 1;
  bool dense = true;
  for (size_t i = sizes.size(); i-- > 0;) {
    dense = dense && strides[i] == count;
    count *= sizes[i];
  }
  if (dense && t.dtype() == MIXRT_DTYPE_F32) {
    const uint32_t bits =
        MaxMagnitudeBits(static_cast<const uint32_t*>(t.data()), count);
    if (bits >= 0x7f800000u) return kInf;
    float v;
    std::memcpy(&v, &bits, sizeof(v));
    return v;
  }
  if (dense && t.dtype() == MIXRT_DTYPE_BF16) {
    const uint16_t bits =
        MaxMagnitudeBits(static_cast<const uint16_t*>(t.data()), count);
    if (bits >= 0x7f80u) return kInf;
    const uint32_t wide = static_cast<uint32_t>(bits) << 16;
    float v;
    std::memcpy(&v, &wide, sizeof(v));
    return v;
  }
  double m = 0;
  std::vector<int64_t> index(sizes.size(), 0);
  for (int64_t n = 0; n < count; ++n) {
    int64_t offset = 0;
    for (size_t i = 0; i < sizes.size(); ++i) offset += index[i] * strides[i];
    const double v = std::fabs(static_cast<double>(t.LoadFloat(offset)));
    if (!std::isfinite(v)) return kInf;
    m = v > m ? v : m;
    for (size_t i = sizes.size(); i-- > 0;) {
      if (++index[i] < sizes[i]) break;
      index[i] = 0;
    }
  }
  return m;
}

}  // namespace mixrt::cpu
