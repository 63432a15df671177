// Tensor methods that copy: contiguous, casts, device moves, host access.
#include <cstring>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/tensor/capture_hooks.h"
#include "core/tensor/kernel_launch.h"
#include "core/tensor/tensor.h"
#include "mixrt/float_convert.h"
#include "mixrt/status_macros.h"

namespace mixrt {
namespace {

// Element i of raw host bytes in `dtype`, exactly as a double.
double HostElement(const uint8_t* bytes, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::kF32: {
      float v;
      std::memcpy(&v, bytes + 4 * i, 4);
      return v;
    }
    case DType::kF16:
    case DType::kBF16: {
      uint16_t h;
      std::memcpy(&h, bytes + 2 * i, 2);
      return dtype == DType::kF16 ? sdk::F16BitsToF32(h)
                                  : sdk::BF16BitsToF32(h);
    }
    case DType::kI32: {
      int32_t v;
      std::memcpy(&v, bytes + 4 * i, 4);
      return v;
    }
    case DType::kI64: {
      int64_t v;
      std::memcpy(&v, bytes + 8 * i, 8);
      return static_cast<double>(v);
    }
    case DType::kBool:
      return bytes[i] != 0 ? 1.0 : 0.0;
  }
  return 0.0;
}

}  // namespace

absl::StatusOr<Tensor> Tensor::contiguous() const {
  MIXRT_RETURN_IF_ERROR(CheckDefined(*this, "contiguous"));
  if (is_contiguous()) return *this;
  return clone();
}

absl::StatusOr<Tensor> Tensor::clone() const {
  MIXRT_RETURN_IF_ERROR(CheckDefined(*this, "clone"));
  MIXRT_ASSIGN_OR_RETURN(Tensor out, empty(shape(), dtype(), device()));
  const Tensor in[] = {*this};
  const Tensor outs[] = {out};
  MIXRT_RETURN_IF_ERROR(LaunchKernel(MIXRT_OP_COPY, in, outs));
  return out;
}

absl::StatusOr<Tensor> Tensor::to(DType dtype) const {
  MIXRT_RETURN_IF_ERROR(CheckDefined(*this, "to(dtype)"));
  if (dtype == this->dtype()) return *this;
  MIXRT_ASSIGN_OR_RETURN(Tensor out, empty(shape(), dtype, device()));
  const Tensor in[] = {*this};
  const Tensor outs[] = {out};
  MIXRT_RETURN_IF_ERROR(LaunchKernel(MIXRT_OP_COPY, in, outs));
  return out;
}

absl::StatusOr<Tensor> Tensor::to(const Device& target) const {
  MIXRT_RETURN_IF_ERROR(CheckDefined(*this, "to(device)"));
  if (!target.valid()) {
    return absl::InvalidArgumentError("to(device): no target device given");
  }
  if (target == device()) return *this;
  MIXRT_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, to_bytes());
  MIXRT_ASSIGN_OR_RETURN(Tensor out, empty(shape(), dtype(), target));
  MIXRT_RETURN_IF_ERROR(
      target.backend()->Copy(target.index(), MIXRT_COPY_HOST_TO_DEVICE,
                             out.data_ptr(), bytes.data(), bytes.size()));
  if (CaptureHooks* hooks = ActiveCaptureHooks()) {
    hooks->OnHostWrite(out, bytes.data(), bytes.size());
  }
  return out;
}

absl::StatusOr<std::vector<uint8_t>> Tensor::to_bytes() const {
  MIXRT_RETURN_IF_ERROR(CheckDefined(*this, "to_bytes"));
  MIXRT_ASSIGN_OR_RETURN(Tensor dense, contiguous());
  std::vector<uint8_t> bytes(numel() * DTypeSize(dtype()));
  MIXRT_RETURN_IF_ERROR(dense.device().backend()->Copy(
      dense.device().index(), MIXRT_COPY_DEVICE_TO_HOST, bytes.data(),
      dense.const_data_ptr(), bytes.size()));
  if (CaptureHooks* hooks = ActiveCaptureHooks()) {
    hooks->OnHostRead(dense, bytes.data(), bytes.size());
  }
  return bytes;
}

absl::StatusOr<double> Tensor::item() const {
  MIXRT_RETURN_IF_ERROR(CheckDefined(*this, "item"));
  if (numel() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("item: a tensor with ", numel(), " elements (shape ",
                     ShapeToString(shape()),
                     ") cannot be converted to a scalar; expected 1 element"));
  }
  MIXRT_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, to_bytes());
  return HostElement(bytes.data(), dtype(), 0);
}

absl::StatusOr<std::vector<double>> Tensor::to_double_vector() const {
  MIXRT_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, to_bytes());
  std::vector<double> out(numel());
  for (int64_t i = 0; i < numel(); ++i) {
    out[i] = HostElement(bytes.data(), dtype(), i);
  }
  return out;
}

absl::StatusOr<std::vector<float>> Tensor::to_float_vector() const {
  MIXRT_ASSIGN_OR_RETURN(std::vector<double> values, to_double_vector());
  return std::vector<float>(values.begin(), values.end());
}

absl::StatusOr<std::vector<int64_t>> Tensor::to_int_vector() const {
  if (IsFloating(dtype())) {
    return absl::InvalidArgumentError(
        absl::StrCat("to_int_vector: the tensor is ", DTypeName(dtype()),
                     "; convert it with to(DType::kI64) first"));
  }
  MIXRT_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, to_bytes());
  std::vector<int64_t> out(numel());
  for (int64_t i = 0; i < numel(); ++i) {
    if (dtype() == DType::kI64) {
      std::memcpy(&out[i], bytes.data() + 8 * i, 8);
    } else {
      out[i] = static_cast<int64_t>(HostElement(bytes.data(), dtype(), i));
    }
  }
  return out;
}

}  // namespace mixrt
