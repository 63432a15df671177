#include "backends/cpu/onednn/companion_check.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/cpu/onednn3/companion_product.h"
#include "mixrt/float_convert.h"

namespace mixrt::cpu {
namespace {

constexpr double kRelative = 0.05;
constexpr double kOfLargest = 1e-3;

double Element(MixrtDtype dtype, const void* base, int64_t index) {
  switch (dtype) {
    case MIXRT_DTYPE_F16:
      return sdk::F16BitsToF32(static_cast<const uint16_t*>(base)[index]);
    case MIXRT_DTYPE_BF16:
      return sdk::BF16BitsToF32(static_cast<const uint16_t*>(base)[index]);
    default:
      return static_cast<const float*>(base)[index];
  }
}

// Calls `visit(offset)` for each element of `c` (in elements from its
// first), in row-major order of its dims.
template <typename Visit>
void ForEachElement(const MatmulOperand& c, Visit&& visit) {
  const size_t rank = c.dims.size();
  for (int64_t d : c.dims) {
    if (d <= 0) return;
  }
  std::vector<int64_t> at(rank, 0);
  while (true) {
    int64_t offset = 0;
    for (size_t i = 0; i < rank; ++i) offset += at[i] * c.strides[i];
    visit(offset);
    size_t i = rank;
    while (i > 0 && ++at[i - 1] == c.dims[i - 1]) at[--i] = 0;
    if (i == 0) return;
  }
}

}  // namespace

std::string ProductDisagreement(const MatmulOperand& c, const void* reference,
                                const void* theirs) {
  double largest = 0;
  ForEachElement(c, [&](int64_t at) {
    const double want = Element(c.dtype, reference, at);
    if (std::isfinite(want)) largest = std::max(largest, std::fabs(want));
  });
  std::string first;
  ForEachElement(c, [&](int64_t at) {
    if (!first.empty()) return;
    const double want = Element(c.dtype, reference, at);
    const double got = Element(c.dtype, theirs, at);
    const bool agree =
        std::isnan(want) ? std::isnan(got)
                         : !std::isnan(got) && std::fabs(got - want) <=
                                                   kRelative * std::fabs(want) +
                                                       kOfLargest * largest;
    if (!agree) {
      first = absl::StrCat("element ", at, " is ", got, " where ", want,
                           " was expected");
    }
  });
  return first;
}

std::string KnownProductsDisagreement(MixrtOneDnn3RunFn* run) {
  constexpr int64_t n = 64;
  for (MixrtDtype dtype :
       {MIXRT_DTYPE_F32, MIXRT_DTYPE_F16, MIXRT_DTYPE_BF16}) {
    MatmulShape shape;
    shape.a = {dtype, {n, n}, {n, 1}};
    shape.b = shape.a;
    shape.c = {MIXRT_DTYPE_F32, {n, n}, {n, 1}};
    MixrtOneDnn3Product product;
    if (!ToCompanionProduct(shape, &product)) continue;
    // Small integers and halves: exact in every input dtype, so the
    // reference sees the very values the companion does.
    std::vector<float> a(n * n), b(n * n);
    for (int64_t i = 0; i < n * n; ++i) {
      a[i] = static_cast<float>((i * 7 % 13) - 6) * 0.5f;
      b[i] = static_cast<float>((i * 5 % 11) - 5) * 0.5f;
    }
    std::vector<uint16_t> a16(n * n), b16(n * n);
    for (int64_t i = 0; i < n * n; ++i) {
      a16[i] = dtype == MIXRT_DTYPE_F16 ? sdk::F32ToF16Bits(a[i])
                                        : sdk::F32ToBF16Bits(a[i]);
      b16[i] = dtype == MIXRT_DTYPE_F16 ? sdk::F32ToF16Bits(b[i])
                                        : sdk::F32ToBF16Bits(b[i]);
    }
    const void* a_data = dtype == MIXRT_DTYPE_F32
                             ? static_cast<const void*>(a.data())
                             : static_cast<const void*>(a16.data());
    const void* b_data = dtype == MIXRT_DTYPE_F32
                             ? static_cast<const void*>(b.data())
                             : static_cast<const void*>(b16.data());
    std::vector<float> want(n * n, 0.0f);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t k = 0; k < n; ++k)
          sum += double{a[i * n + k]} * b[k * n + j];
        want[i * n + j] = static_cast<float>(sum);
      }
    }
    // What a companion that writes nothing leaves: NaN.
    std::vector<float> got(n * n, std::nanf(""));
    char message[256];
    if (run(&product, a_data, b_data, got.data(), nullptr, message,
            sizeof(message)) != 0) {
      continue;  // It cannot build this one: nothing claimed.
    }
    const std::string wrong =
        ProductDisagreement(shape.c, want.data(), got.data());
    if (!wrong.empty()) {
      return absl::StrCat("its ", n, "x", n, "x", n, " product of ",
                          dtype == MIXRT_DTYPE_F32   ? "f32"
                          : dtype == MIXRT_DTYPE_F16 ? "f16"
                                                     : "bf16",
                          " inputs is wrong: ", wrong);
    }
  }
  return "";
}

}  // namespace mixrt::cpu
