#include "core/kernels/fill_copy.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/kernels/memory_overlap.h"
#include "core/tensor/kernel_launch.h"
#include "mixrt/status_macros.h"

namespace mixrt::kernels {

absl::Status fill_(const Tensor& dst, double value) {
  MIXRT_RETURN_IF_ERROR(CheckDefined(dst, "fill_"));
  MixrtScalarAttrs attrs{};
  attrs.struct_size = sizeof(attrs);
  attrs.value = value;
  const Tensor outs[] = {dst};
  return LaunchKernel(MIXRT_OP_FILL, {}, outs, &attrs);
}

absl::Status copy_(const Tensor& dst, const Tensor& src) {
  MIXRT_RETURN_IF_ERROR(CheckDefined(dst, "copy_"));
  MIXRT_RETURN_IF_ERROR(CheckDefined(src, "copy_"));
  if (dst.shape() != src.shape()) {
    return absl::InvalidArgumentError(
        absl::StrCat("copy_: the source has shape ", ShapeToString(src.shape()),
                     "; the destination needs ", ShapeToString(dst.shape())));
  }
  // As PyTorch's copy_: the same elements in the same layout are already
  // there; a destination that repeats elements, or a dense source that
  // partly overlaps it, is refused; where the two cannot be compared that
  // way (gaps or repeats) and may meet, the source is read through a copy.
  if (OverlapOf(dst, src) == MemoryOverlap::kFull &&
      dst.dtype() == src.dtype()) {
    return absl::OkStatus();
  }
  MIXRT_RETURN_IF_ERROR(CheckNoInternalOverlap(dst));
  MIXRT_RETURN_IF_ERROR(CheckNoPartialOverlap(dst, src));
  Tensor from = src;
  if (MayShareElements(dst, src)) {
    MIXRT_ASSIGN_OR_RETURN(from, src.clone());
  }
  const Tensor in[] = {from};
  const Tensor outs[] = {dst};
  return LaunchKernel(MIXRT_OP_COPY, in, outs);
}

}  // namespace mixrt::kernels
