// MaxMagnitude (backends/cpu/kernels/max_magnitude.h), which decides whether a
// fused conv may use oneDNN's NaN-dropping relu: the largest |v| against a
// scalar scan in double, for f32 and bf16 (compared as bits), dense and
// broadcast (stride-0) layouts, and +inf whenever any element is NaN or
// infinite, wherever it sits (the parallel ranges' edges included).
#include "backends/cpu/kernels/max_magnitude.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "mixrt/float_convert.h"
#include "plugins/sdk/tensor_ref.h"

namespace mixrt::cpu {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Buffer {
  std::vector<float> f32;
  std::vector<uint16_t> bf16;
  std::vector<int64_t> shape, strides;
  MixrtTensorDesc desc{};
  Buffer(const std::vector<float>& values, MixrtDtype dtype,
         std::vector<int64_t> shape_in, std::vector<int64_t> strides_in)
      : shape(std::move(shape_in)), strides(std::move(strides_in)) {
    for (float v : values) bf16.push_back(sdk::F32ToBF16Bits(v));
    f32 = values;
    desc = {
        sizeof(MixrtTensorDesc),
        nullptr,
        dtype == MIXRT_DTYPE_F32 ? static_cast<void*>(f32.data()) : bf16.data(),
        dtype,
        static_cast<int32_t>(shape.size()),
        shape.data(),
        strides.data()};
  }
  double Max() const { return MaxMagnitude(sdk::TensorRef(desc)); }
};

// Values spread over magnitudes 2^-30 .. 2^30, of both signs.
std::vector<float> Spread(int64_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    v[i] = std::ldexp((seed >> 8) / 16777216.0f,
                      static_cast<int>(seed % 61) - 30) *
           ((seed & 0x100) ? -1.0f : 1.0f);
  }
  return v;
}

TEST(MaxMagnitude, DenseF32AndBf16MatchAScan) {
  for (int64_t n : {int64_t{1}, int64_t{17}, int64_t{300001}}) {
    const std::vector<float> v = Spread(n, static_cast<uint32_t>(n));
    for (MixrtDtype dtype : {MIXRT_DTYPE_F32, MIXRT_DTYPE_BF16}) {
      const Buffer b(v, dtype, {n}, {1});
      double want = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double x =
            dtype == MIXRT_DTYPE_F32 ? v[i] : sdk::BF16BitsToF32(b.bf16[i]);
        want = std::max(want, std::fabs(x));
      }
      EXPECT_EQ(b.Max(), want) << "n " << n << " dtype " << dtype;
    }
  }
}

TEST(MaxMagnitude, AnyNaNOrInfinityAnywhereGivesInfinity) {
  const int64_t n = 300001;
  for (float special :
       {std::nanf(""), -std::nanf(""), std::numeric_limits<float>::infinity(),
        -std::numeric_limits<float>::infinity()}) {
    for (int64_t at : {int64_t{0}, n / 2 - 1, n / 2, n - 1}) {
      std::vector<float> v = Spread(n, 3);
      v[at] = special;
      for (MixrtDtype dtype : {MIXRT_DTYPE_F32, MIXRT_DTYPE_BF16}) {
        EXPECT_EQ(Buffer(v, dtype, {n}, {1}).Max(), kInf)
            << special << " at " << at << " dtype " << dtype;
      }
    }
  }
}

TEST(MaxMagnitude, BroadcastAndStridedLayoutsReadTheirElements) {
  // A per-channel operand as the fusion sees it: [2, 3, 4, 5] with strides
  // (0, 1, 0, 0) over 3 values; the largest is the negative one.
  const Buffer per_channel({0.5f, -7.25f, 2.0f}, MIXRT_DTYPE_F32, {2, 3, 4, 5},
                           {0, 1, 0, 0});
  EXPECT_EQ(per_channel.Max(), 7.25);
  // Every other element of 8 (the skipped ones hold a NaN and a larger value).
  const Buffer strided(
      {1.0f, std::nanf(""), -3.0f, 100.0f, 2.0f, 100.0f, 0.0f, 100.0f},
      MIXRT_DTYPE_BF16, {4}, {2});
  EXPECT_EQ(strided.Max(), 3.0);
  const Buffer strided_nan({1.0f, 0.0f, std::nanf(""), 0.0f}, MIXRT_DTYPE_F32,
                           {2}, {2});
  EXPECT_EQ(strided_nan.Max(), kInf);
  const Buffer empty({}, MIXRT_DTYPE_F32, {0, 3}, {3, 1});
  EXPECT_EQ(empty.Max(), 0.0);
}

}  // namespace
}  // namespace mixrt::cpu
