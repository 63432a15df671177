// dropout (ABI 1.1) in one pass: the Philox units, the keep test, the scale
// and the store per chunk of the flattened tensor, so neither a uniform
// tensor nor a mask ever reaches memory (the composed random, compare,
// where and mul took ~20% of a GPT train step).
#include "backends/cpu/kernels/cpu_dropout.h"

#include <algorithm>

#include "absl/status/status.h"
#include "backends/cpu/kernels/float_rows.h"
#include "backends/cpu/kernels/parallel.h"
#include "backends/cpu/kernels/philox_rows.h"
#include "mixrt/status_macros.h"
#include "plugins/sdk/call_decoders.h"
#include "plugins/sdk/tensor_ref.h"

namespace mixrt::cpu {
namespace {

constexpr int64_t kChunk = 1024;
constexpr int64_t kGrain = 1 << 14;

}  // namespace

absl::Status RunDropout(const sdk::KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(const sdk::DropoutCall d, sdk::DecodeDropout(call));
  const MixrtDropoutAttrs& a = d.attrs;
  const sdk::TensorRef& x = *d.x;
  const sdk::TensorRef& out = *d.out;
  // The unit is exact in f32, so comparing with p in f32 is DropoutKeeps.
  const float p = static_cast<float>(a.p);
  const float kept = static_cast<float>(1.0 / (1.0 - a.p));
  ParallelFor(out.numel(), kGrain, [&](int64_t begin, int64_t end) {
    float values[kChunk];
    float units[kChunk];
    for (int64_t b = begin; b < end; b += kChunk) {
      const int64_t n = std::min(kChunk, end - b);
      LoadRow(x.data(), x.dtype(), b, n, values);
      PhiloxUnitsRow(a.seed, a.offset, static_cast<uint64_t>(b), n, units);
      // A product even where dropped: inf and NaN become NaN, as x * 0 in
      // PyTorch, so the grad scaler still sees an overflow.
      KeepFactorsRow(units, n, p, kept);
      for (int64_t i = 0; i < n; ++i) values[i] *= units[i];
      StoreRow(values, n, out.data(), out.dtype(), b);
    }
  });
  return absl::OkStatus();
}

}  // namespace mixrt::cpu
