// Fused scaled dot-product attention (ABI 1.1) and its backward through
// attention_functors.h, with the f32 accumulators in the device's scratch.
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backends/gpu/attention_functors.h"
#include "backends/gpu/gpu_ops.h"
#include "mixrt/status_macros.h"
#include "plugins/sdk/call_decoders.h"

namespace mixrt::gpu {
namespace {

AttentionProblem Problem(const sdk::AttentionCall& a) {
  AttentionProblem p;
  p.q = Tensor(*a.q);
  p.k = Tensor(*a.k);
  p.v = Tensor(*a.v);
  if (a.mask != nullptr) p.mask = Tensor(*a.mask);
  p.groups = a.groups;
  p.queries = a.queries;
  p.keys = a.keys;
  p.head_dim = a.head_dim;
  p.value_dim = a.value_dim;
  p.scale = static_cast<float>(a.attrs->scale);
  p.is_causal = a.attrs->is_causal != 0;
  p.mask_kind = a.attrs->mask_kind;
  p.dropout_p = a.attrs->dropout_p;
  p.seed = a.attrs->seed;
  p.offset = a.attrs->offset;
  return p;
}

}  // namespace

absl::Status RunAttention(GpuDevice& device, const sdk::KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(const sdk::AttentionCall a,
                         sdk::DecodeAttention(call));
  if (a.groups == 0 || a.queries == 0) return absl::OkStatus();
  if (a.keys == 0) {
    return absl::InvalidArgumentError(
        "scaled_dot_product_attention: no keys (S = 0)");
  }
  const AttentionProblem p = Problem(a);
  const int64_t rows = a.groups * a.queries, key_rows = a.groups * a.keys;
  std::lock_guard<std::mutex> lock(device.scratch_mutex);
  if (!a.backward) {
    MIXRT_ASSIGN_OR_RETURN(void* scratch,
                           device.Scratch(rows * a.value_dim * sizeof(float)));
    const AttentionForwardRows f{p, Tensor(*a.out),
                                 static_cast<float*>(a.lse->data()),
                                 static_cast<float*>(scratch)};
    return Launched(LaunchElementwise(device.ctx, f, rows),
                    "scaled_dot_product_attention");
  }
  // Scratch: D [rows], the dQ accumulators [rows, E], then dK and dV
  // [key_rows, E + Ev].
  const int64_t floats =
      rows + rows * a.head_dim + key_rows * (a.head_dim + a.value_dim);
  MIXRT_ASSIGN_OR_RETURN(void* scratch, device.Scratch(floats * sizeof(float)));
  float* d = static_cast<float*>(scratch);
  float* dq = d + rows;
  float* dkv = dq + rows * a.head_dim;
  const float* lse = static_cast<const float*>(a.lse->data());
  const DeviceTensor grad_out = Tensor(*a.grad_out);
  MIXRT_RETURN_IF_ERROR(Launched(
      LaunchElementwise(
          device.ctx,
          AttentionRowDots{grad_out, Tensor(*a.out), a.value_dim, d}, rows),
      "scaled_dot_product_attention_backward (D)"));
  MIXRT_RETURN_IF_ERROR(Launched(
      LaunchElementwise(
          device.ctx,
          AttentionGradQRows{p, grad_out, lse, d, Tensor(*a.grad_q), dq}, rows),
      "scaled_dot_product_attention_backward (dQ)"));
  return Launched(LaunchElementwise(device.ctx,
                                    AttentionGradKVRows{p, grad_out, lse, d,
                                                        Tensor(*a.grad_k),
                                                        Tensor(*a.grad_v), dkv},
                                    key_rows),
                  "scaled_dot_product_attention_backward (dK, dV)");
}

}  // namespace mixrt::gpu
