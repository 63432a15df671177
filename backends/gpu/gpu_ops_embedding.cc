// Embedding lookup and gradient.
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backends/gpu/embedding_functors.h"
#include "backends/gpu/gpu_ops.h"
#include "mixrt/status_macros.h"

namespace mixrt::gpu {
namespace {

constexpr const char* kOutOfRange =
    "embedding: an index is outside [0, num_embeddings)";

// The accumulated f32 gradient into grad_weight, zeroed rows included.
absl::Status Backward(GpuDevice& device, const sdk::KernelCall& call,
                      int64_t vocabulary, int64_t dim) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtEmbeddingAttrs>());
  const DeviceTensor table = Tensor(call.outputs[0]);
  // An f32 contiguous grad_weight is its own accumulator.
  const bool in_place = table.dtype == MIXRT_DTYPE_F32 && table.contiguous;
  const uint64_t bytes = static_cast<uint64_t>(table.numel) * sizeof(float);
  void* accumulator = table.data;
  if (!in_place) {
    MIXRT_RETURN_IF_ERROR(RuntimeStatus(rt::Malloc(&accumulator, bytes),
                                        "Malloc (embedding gradient)"));
  }
  absl::Status status = RuntimeStatus(
      rt::MemsetAsync(accumulator, 0, bytes, device.stream), "MemsetAsync");
  if (status.ok()) {
    EmbeddingBackwardFunctor f{static_cast<float*>(accumulator),
                               Tensor(call.inputs[0]),
                               Tensor(call.inputs[1]),
                               vocabulary,
                               dim,
                               attrs->padding_idx,
                               nullptr};
    status = LaunchCheckingInput(
        device, "embedding_backward", kOutOfRange, [&](int32_t* flag) {
          f.bad_input = flag;
          return LaunchElementwise(device.ctx, f, f.grad_out.numel);
        });
  }
  if (status.ok() && !in_place) {
    DeviceTensor source = table;
    source.data = accumulator;
    source.dtype = MIXRT_DTYPE_F32;
    source.contiguous = true;
    status = Launched(
        LaunchElementwise(device.ctx, CopyFunctor{table, source}, table.numel),
        "embedding_backward (cast)");
  }
  // Freeing synchronizes with the copy that reads it.
  if (!in_place) (void)rt::Free(accumulator);
  return status;
}

}  // namespace

absl::Status RunEmbedding(GpuDevice& device, const sdk::KernelCall& call) {
  MIXRT_RETURN_IF_ERROR(ExpectArity(call, 2, 2, 1));
  const bool backward = call.op == MIXRT_OP_EMBEDDING_BACKWARD;
  const sdk::TensorRef& indices = call.inputs[1];
  const sdk::TensorRef& rows = backward ? call.inputs[0] : call.outputs[0];
  const sdk::TensorRef& table = backward ? call.outputs[0] : call.inputs[0];
  bool shapes_ok = table.ndim() == 2 && indices.dtype() == MIXRT_DTYPE_I64 &&
                   rows.ndim() == indices.ndim() + 1 &&
                   rows.dim(rows.ndim() - 1) == table.dim(1) &&
                   IsFloating(table.dtype()) && IsFloating(rows.dtype());
  for (int d = 0; shapes_ok && d < indices.ndim(); ++d) {
    shapes_ok = rows.dim(d) == indices.dim(d);
  }
  if (!shapes_ok) {
    return absl::InvalidArgumentError(
        "embedding takes weight [V, D], i64 indices and rows [..., D]");
  }
  const int64_t vocabulary = table.dim(0), dim = table.dim(1);
  if (backward) return Backward(device, call, vocabulary, dim);
  EmbeddingFunctor f{Tensor(rows), Tensor(table), Tensor(indices),
                     vocabulary,   dim,           nullptr};
  return LaunchCheckingInput(
      device, "embedding", kOutOfRange, [&](int32_t* flag) {
        f.bad_input = flag;
        return LaunchElementwise(device.ctx, f, f.out.numel);
      });
}

}  // namespace mixrt::gpu
