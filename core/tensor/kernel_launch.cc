#include "core/tensor/kernel_launch.h"

#include <chrono>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/tensor/capture_hooks.h"
#include "core/tensor/op_profile.h"
#include "mixrt/op_names.h"
#include "mixrt/status_macros.h"

namespace mixrt {

absl::Status LaunchKernel(MixrtOp op, absl::Span<const Tensor> inputs,
                          absl::Span<const Tensor> outputs, const void* attrs) {
  if (outputs.empty() || !outputs[0].defined()) {
    return absl::InvalidArgumentError(
        absl::StrCat(MixrtOpName(op), ": launched without an output tensor"));
  }
  const Device& device = outputs[0].device();
  for (const Tensor& t : inputs) {
    if (!t.defined()) {
      return absl::InvalidArgumentError(
          absl::StrCat(MixrtOpName(op), ": an input tensor is undefined"));
    }
    if (t.device() != device) {
      return absl::InvalidArgumentError(
          absl::StrCat(MixrtOpName(op), ": expected all tensors on ",
                       device.ToString(), " but an input is on ",
                       t.device().ToString(), " (move it with .to(device))"));
    }
  }
  const bool dense_only = op != MIXRT_OP_COPY &&
                          device.has_flag(MIXRT_DEVICE_FLAG_NEEDS_CONTIGUOUS);
  std::vector<Tensor> ins(inputs.begin(), inputs.end());
  std::vector<Tensor> outs(outputs.begin(), outputs.end());
  if (dense_only) {
    for (Tensor& t : ins) {
      MIXRT_ASSIGN_OR_RETURN(t, t.contiguous());
    }
    // Outputs may also be read (in-place ops), so the temporaries start as
    // copies.
    for (Tensor& t : outs) {
      MIXRT_ASSIGN_OR_RETURN(t, t.contiguous());
    }
  }
  std::vector<MixrtTensorDesc> in_descs;
  std::vector<MixrtTensorDesc> out_descs;
  for (const Tensor& t : ins) in_descs.push_back(t.desc());
  for (const Tensor& t : outs) out_descs.push_back(t.desc());
  if (OpProfileEnabled()) {
    const auto start = std::chrono::steady_clock::now();
    MIXRT_RETURN_IF_ERROR(device.backend()->Launch(device.index(), op,
                                                   in_descs, out_descs, attrs));
    MIXRT_RETURN_IF_ERROR(device.backend()->Synchronize(device.index()));
    RecordOpTime(
        absl::StrCat(MixrtOpName(op), " ",
                     ins.empty() ? "-" : DTypeName(ins[0].dtype()), " -> ",
                     DTypeName(outs[0].dtype())),
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count());
  } else {
    MIXRT_RETURN_IF_ERROR(device.backend()->Launch(device.index(), op,
                                                   in_descs, out_descs, attrs));
  }
  for (const Tensor& t : outputs) t.storage()->BumpVersion();
  if (CaptureHooks* hooks = ActiveCaptureHooks()) {
    hooks->OnLaunch(op, ins, outs, attrs);
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!outs[i].shares_storage_with(outputs[i])) {
      const Tensor src[] = {outs[i]};
      const Tensor dst[] = {outputs[i]};
      MIXRT_RETURN_IF_ERROR(LaunchKernel(MIXRT_OP_COPY, src, dst));
    }
  }
  return absl::OkStatus();
}

}  // namespace mixrt
