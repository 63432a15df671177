#include "core/tensor/factories.h"

#include <cmath>
#include <cstring>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/tensor/capture_hooks.h"
#include "core/tensor/kernel_launch.h"
#include "mixrt/float_convert.h"
#include "mixrt/status_macros.h"

namespace mixrt {

Generator& DefaultGenerator() {
  static Generator* generator = new Generator(0);
  return *generator;
}

namespace {

absl::StatusOr<Tensor> Generate(MixrtOp op, absl::Span<const int64_t> shape,
                                DType dtype, const Device& device,
                                const void* attrs) {
  MIXRT_ASSIGN_OR_RETURN(Tensor out, empty(shape, dtype, device));
  if (out.numel() == 0) return out;
  const Tensor outs[] = {out};
  MIXRT_RETURN_IF_ERROR(LaunchKernel(op, {}, outs, attrs));
  return out;
}

absl::Status CheckFloatingDtype(DType dtype, absl::string_view name) {
  if (IsFloating(dtype)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      name, ": expected a floating dtype, got ", DTypeName(dtype)));
}

absl::StatusOr<Tensor> Random(MixrtOp op, absl::Span<const int64_t> shape,
                              DType dtype, const Device& device, double a,
                              double b, Generator* generator,
                              absl::string_view name) {
  MIXRT_RETURN_IF_ERROR(CheckFloatingDtype(dtype, name));
  MIXRT_ASSIGN_OR_RETURN(const int64_t n, CheckedNumElements(shape));
  Generator& gen = generator != nullptr ? *generator : DefaultGenerator();
  const Draw draw = ReserveBlocks(gen.state(), PhiloxBlocks(n));
  MixrtRandomAttrs attrs{};
  attrs.struct_size = sizeof(attrs);
  attrs.seed = draw.seed;
  attrs.offset = draw.offset;
  attrs.a = a;
  attrs.b = b;
  return Generate(op, shape, dtype, device, &attrs);
}

}  // namespace

absl::StatusOr<Tensor> rand_at(absl::Span<const int64_t> shape, DType dtype,
                               const Device& device, uint64_t seed,
                               uint64_t offset) {
  MIXRT_RETURN_IF_ERROR(CheckFloatingDtype(dtype, "rand_at"));
  MixrtRandomAttrs attrs{};
  attrs.struct_size = sizeof(attrs);
  attrs.seed = seed;
  attrs.offset = offset;
  attrs.a = 0;
  attrs.b = 1;
  return Generate(MIXRT_OP_RANDOM_UNIFORM, shape, dtype, device, &attrs);
}

absl::StatusOr<Tensor> full(absl::Span<const int64_t> shape, double value,
                            DType dtype, const Device& device) {
  MixrtScalarAttrs attrs{};
  attrs.struct_size = sizeof(attrs);
  attrs.value = value;
  return Generate(MIXRT_OP_FILL, shape, dtype, device, &attrs);
}

absl::StatusOr<Tensor> zeros(absl::Span<const int64_t> shape, DType dtype,
                             const Device& device) {
  return full(shape, 0.0, dtype, device);
}

absl::StatusOr<Tensor> ones(absl::Span<const int64_t> shape, DType dtype,
                            const Device& device) {
  return full(shape, 1.0, dtype, device);
}

absl::StatusOr<Tensor> arange(double start, double end, double step,
                              DType dtype, const Device& device) {
  if (step == 0 || !std::isfinite(step) || !std::isfinite(start) ||
      !std::isfinite(end)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "arange: need finite start, end and a non-zero step; got (", start,
        ", ", end, ", ", step, ")"));
  }
  const double count = std::ceil((end - start) / step);
  if (count > 9.0e15) {
    return absl::InvalidArgumentError(
        absl::StrCat("arange: ", count, " elements is too many"));
  }
  const int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;
  MixrtArangeAttrs attrs{};
  attrs.struct_size = sizeof(attrs);
  attrs.start = start;
  attrs.step = step;
  const int64_t shape[] = {n};
  return Generate(MIXRT_OP_ARANGE, shape, dtype, device, &attrs);
}

absl::StatusOr<Tensor> rand(absl::Span<const int64_t> shape, DType dtype,
                            const Device& device, double low, double high,
                            Generator* generator) {
  return Random(MIXRT_OP_RANDOM_UNIFORM, shape, dtype, device, low, high,
                generator, "rand");
}

absl::StatusOr<Tensor> randn(absl::Span<const int64_t> shape, DType dtype,
                             const Device& device, double mean, double std,
                             Generator* generator) {
  return Random(MIXRT_OP_RANDOM_NORMAL, shape, dtype, device, mean, std,
                generator, "randn");
}

absl::StatusOr<Tensor> from_bytes(absl::Span<const uint8_t> bytes,
                                  absl::Span<const int64_t> shape, DType dtype,
                                  const Device& device) {
  MIXRT_ASSIGN_OR_RETURN(Tensor out, empty(shape, dtype, device));
  const uint64_t expected = out.numel() * DTypeSize(dtype);
  if (bytes.size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        "from_bytes: got ", bytes.size(), " bytes but shape ",
        ShapeToString(shape), " of ", DTypeName(dtype), " needs ", expected));
  }
  MIXRT_RETURN_IF_ERROR(
      device.backend()->Copy(device.index(), MIXRT_COPY_HOST_TO_DEVICE,
                             out.data_ptr(), bytes.data(), bytes.size()));
  if (CaptureHooks* hooks = ActiveCaptureHooks()) {
    hooks->OnHostWrite(out, bytes.data(), bytes.size());
  }
  return out;
}

namespace {

template <typename T>
void Put(std::vector<uint8_t>& bytes, size_t i, T value) {
  std::memcpy(bytes.data() + i * sizeof(T), &value, sizeof(T));
}

template <typename Value>
absl::StatusOr<std::vector<uint8_t>> Encode(absl::Span<const Value> values,
                                            absl::Span<const int64_t> shape,
                                            DType dtype,
                                            absl::string_view name) {
  MIXRT_ASSIGN_OR_RETURN(const int64_t n, CheckedNumElements(shape));
  if (static_cast<int64_t>(values.size()) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": got ", values.size(), " values for shape ",
                     ShapeToString(shape), " (", n, " elements)"));
  }
  std::vector<uint8_t> bytes(n * DTypeSize(dtype));
  for (int64_t i = 0; i < n; ++i) {
    const Value v = values[i];
    switch (dtype) {
      case DType::kF32:
        Put(bytes, i, static_cast<float>(v));
        break;
      case DType::kF16:
        Put(bytes, i, sdk::F32ToF16Bits(static_cast<float>(v)));
        break;
      case DType::kBF16:
        Put(bytes, i, sdk::F32ToBF16Bits(static_cast<float>(v)));
        break;
      case DType::kI32:
        Put(bytes, i, static_cast<int32_t>(v));
        break;
      case DType::kI64:
        Put(bytes, i, static_cast<int64_t>(v));
        break;
      case DType::kBool:
        Put(bytes, i, static_cast<uint8_t>(v != 0 ? 1 : 0));
        break;
    }
  }
  return bytes;
}

}  // namespace

absl::StatusOr<Tensor> from_floats(absl::Span<const float> values,
                                   absl::Span<const int64_t> shape, DType dtype,
                                   const Device& device) {
  if (!IsFloating(dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat("from_floats: expected a floating dtype, got ",
                     DTypeName(dtype), "; use from_ints"));
  }
  MIXRT_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes,
                         Encode(values, shape, dtype, "from_floats"));
  return from_bytes(bytes, shape, dtype, device);
}

absl::StatusOr<Tensor> from_ints(absl::Span<const int64_t> values,
                                 absl::Span<const int64_t> shape, DType dtype,
                                 const Device& device) {
  MIXRT_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes,
                         Encode(values, shape, dtype, "from_ints"));
  return from_bytes(bytes, shape, dtype, device);
}

}  // namespace mixrt
