#include "core/tensor/kernel_launch.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/tensor/capture_hooks.h"
#include "core/tensor/factories.h"
#include "core/tensor/op_fallback.h"
#include "core/tensor/op_profile.h"
#include "mixrt/matrix_layout.h"
#include "mixrt/op_class.h"
#include "mixrt/op_names.h"
#include "mixrt/status_macros.h"

namespace mixrt {
namespace {

// Ops the kernels layer composes from others when a device lacks them
// (plugin_api.h): composing on the device beats copying to a fallback.
bool HostComposes(MixrtOp op) {
  return op == MIXRT_OP_MULTI_TENSOR_NORM ||
         op == MIXRT_OP_MULTI_TENSOR_SGD_STEP ||
         op == MIXRT_OP_SCALED_DOT_PRODUCT_ATTENTION ||
         op == MIXRT_OP_SCALED_DOT_PRODUCT_ATTENTION_BACKWARD ||
         op == MIXRT_OP_DROPOUT;
}

bool IsTransposedDenseMatrix(const Tensor& t) {
  return ::mixrt::IsTransposedDenseMatrix(static_cast<int>(t.ndim()),
                                          t.shape().data(), t.strides().data());
}

// The `variant` of MixrtDevice_GetOpSupport_Args.
uint32_t VariantOf(MixrtOp op, const void* attrs) {
  if (attrs == nullptr) return 0;
  switch (op) {
    case MIXRT_OP_BINARY:
    case MIXRT_OP_UNARY:
    case MIXRT_OP_UNARY_BACKWARD:
    case MIXRT_OP_COMPARE:
      return static_cast<const MixrtPointwiseAttrs*>(attrs)->kind;
    case MIXRT_OP_REDUCE:
      return static_cast<const MixrtReduceAttrs*>(attrs)->kind;
    case MIXRT_OP_POOL2D:
    case MIXRT_OP_POOL2D_BACKWARD:
      return static_cast<const MixrtPoolAttrs*>(attrs)->kind;
    case MIXRT_OP_MATMUL:
      return static_cast<const MixrtMatmulAttrs*>(attrs)->activation;
    case MIXRT_OP_CONV2D:
      return static_cast<const MixrtConvAttrs*>(attrs)->activation;
    default:
      return 0;
  }
}

OpSignature SignatureOf(MixrtOp op, absl::Span<const Tensor> inputs,
                        absl::Span<const Tensor> outputs, const void* attrs) {
  OpSignature sig;
  sig.op = op;
  sig.variant = VariantOf(op, attrs);
  sig.out_dtype = outputs[0].dtype();
  sig.dtype = inputs.empty() ? sig.out_dtype : inputs[0].dtype();
  return sig;
}

// Runs `op` on `device`, whose memory the tensors' data pointers address,
// honouring its MIXRT_DEVICE_FLAG_NEEDS_CONTIGUOUS (inputs made dense,
// outputs written through dense temporaries). `captured` reports the
// launch to this thread's capture hooks.
absl::Status RunOn(const Device& device, MixrtOp op,
                   absl::Span<const Tensor> inputs,
                   absl::Span<const Tensor> outputs, const void* attrs,
                   bool captured) {
  const bool dense_only = op != MIXRT_OP_COPY &&
                          device.has_flag(MIXRT_DEVICE_FLAG_NEEDS_CONTIGUOUS);
  // The caller's tensors as they are, unless the device needs them dense:
  // no copies (and no heap) on the common path, which every op takes.
  absl::Span<const Tensor> ins = inputs;
  absl::Span<const Tensor> outs = outputs;
  std::vector<Tensor> dense_ins, dense_outs;
  if (dense_only) {
    const bool transposed_ok =
        op == MIXRT_OP_MATMUL &&
        device.has_flag(MIXRT_DEVICE_FLAG_MATMUL_TRANSPOSED_OPERANDS);
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Tensor& t = inputs[i];
      if (transposed_ok && i < 2 && IsTransposedDenseMatrix(t)) {
        dense_ins.push_back(t);  // The plugin reads it as op T.
        continue;
      }
      MIXRT_ASSIGN_OR_RETURN(Tensor dense, t.contiguous());
      dense_ins.push_back(std::move(dense));
    }
    // Outputs may also be read (in-place ops), so the temporaries start as
    // copies.
    for (const Tensor& t : outputs) {
      MIXRT_ASSIGN_OR_RETURN(Tensor dense, t.contiguous());
      dense_outs.push_back(std::move(dense));
    }
    ins = dense_ins;
    outs = dense_outs;
  }
  absl::InlinedVector<MixrtTensorDesc, 4> in_descs;
  absl::InlinedVector<MixrtTensorDesc, 2> out_descs;
  for (const Tensor& t : ins) in_descs.push_back(t.desc());
  for (const Tensor& t : outs) out_descs.push_back(t.desc());
  if (OpProfileEnabled()) {
    const auto start = std::chrono::steady_clock::now();
    MIXRT_RETURN_IF_ERROR(device.backend()->Launch(device.index(), op, in_descs,
                                                   out_descs, attrs));
    MIXRT_RETURN_IF_ERROR(device.backend()->Synchronize(device.index()));
    RecordOpTime(
        absl::StrCat(MixrtOpName(op), " ",
                     ins.empty() ? "-" : DTypeName(ins[0].dtype()), " -> ",
                     DTypeName(outs[0].dtype())),
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count());
  } else {
    MIXRT_RETURN_IF_ERROR(device.backend()->Launch(device.index(), op, in_descs,
                                                   out_descs, attrs));
  }
  for (const Tensor& t : outputs) t.storage()->BumpVersion();
  if (CaptureHooks* hooks = captured ? ActiveCaptureHooks() : nullptr) {
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

// The bytes of a storage that some views of it address, [lo, hi).
struct Span {
  uint64_t lo = ~uint64_t{0};
  uint64_t hi = 0;
  std::shared_ptr<Storage> there;  // The copy on the fallback device.
  bool written = false;            // An output views it: copy it back.
};

void Cover(const Tensor& t, Span* span) {
  if (t.numel() == 0) return;
  int64_t last = t.offset();
  for (int d = 0; d < t.ndim(); ++d) {
    last += (t.shape()[d] - 1) * t.strides()[d];
  }
  const uint64_t size = DTypeSize(t.dtype());
  // Aligned to 8 bytes, a multiple of every element size, so a view's
  // offset stays whole in its own dtype.
  span->lo = std::min<uint64_t>(span->lo, t.offset() * size / 8 * 8);
  span->hi = std::max<uint64_t>(span->hi, (last + 1) * size);
}

absl::Status Transfer(const Device& from, const void* src, const Device& to,
                      void* dst, uint64_t bytes) {
  std::vector<uint8_t> host(bytes);
  MIXRT_RETURN_IF_ERROR(from.backend()->Copy(
      from.index(), MIXRT_COPY_DEVICE_TO_HOST, host.data(), src, bytes));
  MIXRT_RETURN_IF_ERROR(to.backend()->Copy(
      to.index(), MIXRT_COPY_HOST_TO_DEVICE, dst, host.data(), bytes));
  // The ABI lets a copy to a device finish later; `host` dies here.
  return to.backend()->Synchronize(to.index());
}

// Runs `op` on `target` with every operand copied there and the outputs
// copied back; returns the bytes moved and counts the transfers.
absl::StatusOr<int64_t> RunCopiedTo(const Device& target, MixrtOp op,
                                    absl::Span<const Tensor> inputs,
                                    absl::Span<const Tensor> outputs,
                                    const void* attrs, int64_t* copies) {
  absl::flat_hash_map<const Storage*, Span> spans;
  for (const Tensor& t : inputs) Cover(t, &spans[t.storage().get()]);
  for (const Tensor& t : outputs) {
    Span& span = spans[t.storage().get()];
    Cover(t, &span);
    span.written = true;
  }
  int64_t bytes = 0;
  auto moved = [&](const Tensor& t) -> absl::StatusOr<Tensor> {
    Span& span = spans[t.storage().get()];
    if (t.numel() == 0) return empty(t.shape(), t.dtype(), target);
    if (span.there == nullptr) {
      MIXRT_ASSIGN_OR_RETURN(span.there,
                             Storage::Allocate(target, span.hi - span.lo));
      MIXRT_RETURN_IF_ERROR(Transfer(
          t.device(), static_cast<uint8_t*>(t.storage()->data()) + span.lo,
          target, span.there->data(), span.hi - span.lo));
      bytes += span.hi - span.lo;
      ++*copies;
    }
    return Tensor(span.there, t.dtype(), t.shape(), t.strides(),
                  t.offset() - span.lo / DTypeSize(t.dtype()));
  };
  std::vector<Tensor> ins, outs;
  for (const Tensor& t : inputs) {
    MIXRT_ASSIGN_OR_RETURN(Tensor m, moved(t));
    ins.push_back(std::move(m));
  }
  for (const Tensor& t : outputs) {
    MIXRT_ASSIGN_OR_RETURN(Tensor m, moved(t));
    outs.push_back(std::move(m));
  }
  MIXRT_RETURN_IF_ERROR(RunOn(target, op, ins, outs, attrs, false));
  for (const Tensor& t : outputs) {
    Span& span = spans[t.storage().get()];
    if (!span.written) continue;
    span.written = false;  // Once per storage.
    MIXRT_RETURN_IF_ERROR(
        Transfer(target, span.there->data(), t.device(),
                 static_cast<uint8_t*>(t.storage()->data()) + span.lo,
                 span.hi - span.lo));
    bytes += span.hi - span.lo;
    ++*copies;
  }
  return bytes;
}

// Runs an op its device does not run on the fallback device (op_fallback.h);
// `why` says why the device did not run it.
absl::Status LaunchOnFallback(const Device& device, const OpSignature& sig,
                              absl::Span<const Tensor> inputs,
                              absl::Span<const Tensor> outputs,
                              const void* attrs, const std::string& why) {
  absl::StatusOr<Device> target = FallbackDeviceFor(device, sig);
  if (!target.ok()) {
    return DeclaredUnsupportedError(
        device, sig, absl::StrCat(why, "; ", target.status().message()));
  }
  // A graph replays every launch on its one device.
  ReportUntraceable(
      "an op its device does not run (it ran on a fallback "
      "backend)");
  int64_t copies = 0;
  int64_t bytes = 0;
  // Views of host memory are valid on every host device: nothing to copy.
  if (device.has_flag(MIXRT_DEVICE_FLAG_HOST_MEMORY) &&
      target->has_flag(MIXRT_DEVICE_FLAG_HOST_MEMORY)) {
    // Two devices' queues over one memory: what the device has queued is
    // finished before the target reads, and the target's writes before the
    // device's next launch.
    MIXRT_RETURN_IF_ERROR(device.backend()->Synchronize(device.index()));
    MIXRT_RETURN_IF_ERROR(RunOn(*target, sig.op, inputs, outputs, attrs,
                                /*captured=*/false));
    MIXRT_RETURN_IF_ERROR(target->backend()->Synchronize(target->index()));
  } else {
    MIXRT_ASSIGN_OR_RETURN(
        bytes, RunCopiedTo(*target, sig.op, inputs, outputs, attrs, &copies));
    for (const Tensor& t : outputs) t.storage()->BumpVersion();
  }
  NoteFallback(
      absl::StrCat(device.backend()->name(), ": ", OpSignatureName(sig),
                   " ran on ", target->ToString(), " (", why, ")"),
      copies, bytes);
  return absl::OkStatus();
}

std::string WhyUnsupported(const Device& device, const OpSignature& sig) {
  const OpSupport support =
      device.backend()->QueryOpSupport(device.index(), sig);
  const std::string reason =
      support.reason.empty() ? "no reason given" : support.reason;
  if (!support.from_class_matrix) {
    return absl::StrCat("declared unsupported: ", reason);
  }
  return absl::StrCat("its class matrix says ",
                      OpClassName(MixrtOpClassOf(sig.op)), "/",
                      DTypeName(sig.dtype), " unsupported: ", reason);
}

}  // namespace

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
  const OpSignature sig = SignatureOf(op, inputs, outputs, attrs);
  if (!device.backend()->RunsOp(device.index(), sig)) {
    const std::string why = WhyUnsupported(device, sig);
    // The caller composes these from ops the device runs.
    if (HostComposes(op)) return DeclaredUnsupportedError(device, sig, why);
    return LaunchOnFallback(device, sig, inputs, outputs, attrs, why);
  }
  absl::Status status = RunOn(device, op, inputs, outputs, attrs, true);
  // A plugin that claimed the op and then refused it (a 1.0 plugin's class
  // matrix is coarse) gets the same fallback; with fallback off the refusal
  // stands, so conformance still fails a plugin for it.
  if (absl::IsUnimplemented(status) && !HostComposes(op) &&
      FallbackPolicy() != "off") {
    absl::Status fell_back = LaunchOnFallback(
        device, sig, inputs, outputs, attrs,
        absl::StrCat("it answered unimplemented: ", status.message()));
    if (fell_back.ok()) return fell_back;
  }
  return status;
}

}  // namespace mixrt
