// Tensor factories: filled, ranged, random and host-initialized tensors.
#ifndef MIXRT_CORE_TENSOR_FACTORIES_H_
#define MIXRT_CORE_TENSOR_FACTORIES_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/tensor/generator.h"
#include "core/tensor/tensor.h"

namespace mixrt {

absl::StatusOr<Tensor> full(absl::Span<const int64_t> shape, double value,
                            DType dtype, const Device& device);
absl::StatusOr<Tensor> zeros(absl::Span<const int64_t> shape, DType dtype,
                             const Device& device);
absl::StatusOr<Tensor> ones(absl::Span<const int64_t> shape, DType dtype,
                            const Device& device);
// start, start + step, ... while < end (> end for a negative step).
absl::StatusOr<Tensor> arange(double start, double end, double step,
                              DType dtype, const Device& device);
// U[low, high) and N(mean, std^2); `generator` defaults to DefaultGenerator().
absl::StatusOr<Tensor> rand(absl::Span<const int64_t> shape, DType dtype,
                            const Device& device, double low = 0.0,
                            double high = 1.0, Generator* generator = nullptr);
absl::StatusOr<Tensor> randn(absl::Span<const int64_t> shape, DType dtype,
                             const Device& device, double mean = 0.0,
                             double std = 1.0, Generator* generator = nullptr);
// U[0, 1) at Philox position (seed, offset) without drawing from any
// generator: numbers an earlier draw reserved, read again (the composed
// dropout's mask).
absl::StatusOr<Tensor> rand_at(absl::Span<const int64_t> shape, DType dtype,
                               const Device& device, uint64_t seed,
                               uint64_t offset);
// Values converted to `dtype` on the host (round to nearest even), then
// copied. values.size() must equal the shape's element count.
absl::StatusOr<Tensor> from_floats(absl::Span<const float> values,
                                   absl::Span<const int64_t> shape, DType dtype,
                                   const Device& device);
absl::StatusOr<Tensor> from_ints(absl::Span<const int64_t> values,
                                 absl::Span<const int64_t> shape, DType dtype,
                                 const Device& device);
// Raw bytes already in `dtype`'s encoding.
absl::StatusOr<Tensor> from_bytes(absl::Span<const uint8_t> bytes,
                                  absl::Span<const int64_t> shape, DType dtype,
                                  const Device& device);

}  // namespace mixrt

#endif  // MIXRT_CORE_TENSOR_FACTORIES_H_
