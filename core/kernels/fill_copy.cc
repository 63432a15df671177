#include "core/kernels/fill_copy.h"

#include "absl/strings/str_cat.h"
#include "core/tensor/kernel_launch.h"

namespace mixrt::kernels {

absl::Status fill_(const Tensor& dst, double value) {
  if (!dst.defined()) {
    return absl::InvalidArgumentError("fill_: the destination is undefined");
  }
  MixrtScalarAttrs attrs{};
  attrs.struct_size = sizeof(attrs);
  attrs.value = value;
  const Tensor outs[] = {dst};
  return LaunchKernel(MIXRT_OP_FILL, {}, outs, &attrs);
}

absl::Status copy_(const Tensor& dst, const Tensor& src) {
  if (!dst.defined() || !src.defined()) {
    return absl::InvalidArgumentError(
        "copy_: the destination and the source must be defined tensors");
  }
  if (dst.shape() != src.shape()) {
    return absl::InvalidArgumentError(
        absl::StrCat("copy_: the source has shape ", ShapeToString(src.shape()),
                     "; the destination needs ", ShapeToString(dst.shape())));
  }
  const Tensor in[] = {src};
  const Tensor outs[] = {dst};
  return LaunchKernel(MIXRT_OP_COPY, in, outs);
}

}  // namespace mixrt::kernels
