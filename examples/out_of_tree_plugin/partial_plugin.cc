// A third-party backend built outside mixrt's tree, against the installed
// SDK (see CMakeLists.txt and README.md here), fusing add/mul/relu chains
// and matmul epilogues (chain_fusion.cc). It runs six ops in f32 —
// fill, copy, add, mul, relu and matmul — registered in one sdk::OpTable
// with the dtypes and variants each kernel runs. The SDK answers the host's
// per-op query from that table, so the host runs everything else on a
// fallback backend and the conformance suite grades those ops "not
// implemented" instead of failing them. It runs relu but not relu's
// gradient, as partial backends often do: training runs that gradient on
// the fallback backend, eager or compiled.
#include <cstring>
#include <memory>
#include <vector>

#include "chain_fusion.h"
#include "mixrt/op_names.h"
#include "mixrt/sdk/op_table.h"
#include "mixrt/sdk/plugin.h"
#include "mixrt/sdk/strings.h"
#include "mixrt/status_macros.h"

namespace partial {

using mixrt::sdk::Capability;
using mixrt::sdk::KernelCall;
using mixrt::sdk::TensorRef;

float* Floats(const TensorRef& t) { return static_cast<float*>(t.data()); }

// Reached only if the host launches what the table does not claim.
mixrt::sdk::Status Refuse(const KernelCall& call) {
  return mixrt::sdk::UnimplementedError(
      mixrt::sdk::StrCat("the partial plugin does not run ",
                         MixrtOpName(call.op), " in this form"));
}

mixrt::sdk::Status Fill(const KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtScalarAttrs>());
  float* out = Floats(call.outputs[0]);
  for (int64_t i = 0; i < call.outputs[0].numel(); ++i) {
    out[i] = static_cast<float>(attrs->value);
  }
  return mixrt::sdk::OkStatus();
}

// The one op whose input may be strided.
mixrt::sdk::Status Copy(const KernelCall& call) {
  const TensorRef& in = call.inputs[0];
  const TensorRef& out = call.outputs[0];
  mixrt::sdk::ForEachElement<2>(out.ndim(), out.shape(),
                                {in.strides(), out.strides()},
                                [&](const std::array<int64_t, 2>& o) {
                                  out.StoreFloat(o[1], in.LoadFloat(o[0]));
                                });
  return mixrt::sdk::OkStatus();
}

mixrt::sdk::Status AddOrMul(const KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtPointwiseAttrs>());
  const float* x = Floats(call.inputs[0]);
  const float* y = Floats(call.inputs[1]);
  float* out = Floats(call.outputs[0]);
  const int64_t n = call.outputs[0].numel();
  if (attrs->kind == MIXRT_BINARY_ADD) {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] + y[i];
  } else if (attrs->kind == MIXRT_BINARY_MUL) {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * y[i];
  } else {
    return Refuse(call);
  }
  return mixrt::sdk::OkStatus();
}

mixrt::sdk::Status Relu(const KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtPointwiseAttrs>());
  if (attrs->kind != MIXRT_UNARY_RELU) return Refuse(call);
  const float* x = Floats(call.inputs[0]);
  float* out = Floats(call.outputs[0]);
  for (int64_t i = 0; i < call.outputs[0].numel(); ++i) {
    // NaN stays NaN, as in PyTorch (x > 0 is false for it).
    out[i] = x[i] > 0.0f || x[i] != x[i] ? x[i] : 0.0f;
  }
  return mixrt::sdk::OkStatus();
}

// out[b] = a[b] @ w[b] (+ bias) + beta * out[b], dense f32.
mixrt::sdk::Status Matmul(const KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtMatmulAttrs>());
  if (attrs->activation != MIXRT_ACTIVATION_NONE) return Refuse(call);
  const TensorRef& a = call.inputs[0];
  const TensorRef& w = call.inputs[1];
  const TensorRef& out = call.outputs[0];
  const int nd = out.ndim();
  if (nd < 2 || a.ndim() != nd || w.ndim() != nd) {
    return mixrt::sdk::InvalidArgumentError("matmul: operands of unequal rank");
  }
  const int64_t m = out.shape()[nd - 2], n = out.shape()[nd - 1];
  const int64_t k = a.shape()[nd - 1];
  const int64_t batches = out.numel() / (m * n > 0 ? m * n : 1);
  const float* bias = call.inputs.size() > 2 ? Floats(call.inputs[2]) : nullptr;
  for (int64_t b = 0; b < batches && m * n > 0; ++b) {
    const float* ab = Floats(a) + b * m * k;
    const float* wb = Floats(w) + b * k * n;
    float* ob = Floats(out) + b * m * n;
    for (int64_t i = 0; i < m; ++i) {
      float* row = ob + i * n;
      for (int64_t j = 0; j < n; ++j) {
        // beta 0 overwrites: whatever out held (NaN included) is gone.
        row[j] = (attrs->beta != 0.0f ? attrs->beta * row[j] : 0.0f) +
                 (bias != nullptr ? bias[j] : 0.0f);
      }
      for (int64_t p = 0; p < k; ++p) {
        const float s = ab[i * k + p];
        const float* wr = wb + p * n;
        for (int64_t j = 0; j < n; ++j) row[j] += s * wr[j];
      }
    }
  }
  return mixrt::sdk::OkStatus();
}

// What this plugin runs: each kernel with the dtypes (of its first input
// and first output) and the variants it handles. The SDK's per-op answer
// is this table; `mixrt info` lists it and the conformance suite grades it.
constexpr mixrt::sdk::DTypeMask kF32 = mixrt::sdk::DTypes({MIXRT_DTYPE_F32});
const mixrt::sdk::OpTable kOps(
    "partial",
    {
        {MIXRT_OP_FILL, Fill, kF32},
        {MIXRT_OP_COPY, Copy, kF32},
        {MIXRT_OP_BINARY, AddOrMul, kF32,
         mixrt::sdk::Variants({MIXRT_BINARY_ADD, MIXRT_BINARY_MUL})},
        {MIXRT_OP_UNARY, Relu, kF32, mixrt::sdk::Variants({MIXRT_UNARY_RELU})},
        {MIXRT_OP_MATMUL, Matmul, kF32,
         mixrt::sdk::Variants({MIXRT_ACTIVATION_NONE})},
    });

class PartialPlugin : public mixrt::sdk::HostMemoryPlugin {
 public:
  mixrt::sdk::PluginInfo Info() const override {
    return {/*name=*/"partial", /*version=*/"0.1.0",
            /*build_info=*/
            "examples/out_of_tree_plugin, f32 fill, copy, "
            "add, mul, relu, matmul",
            /*device_type=*/"cpu"};
  }

  mixrt::sdk::DeviceCount CountDevices() override { return {1, ""}; }

  mixrt::sdk::StatusOr<mixrt::sdk::DeviceProperties> GetDeviceProperties(
      int) override {
    mixrt::sdk::DeviceProperties props;
    props.name = "partial host device";
    // Dense tensors only: the host makes inputs contiguous first.
    props.flags =
        MIXRT_DEVICE_FLAG_HOST_MEMORY | MIXRT_DEVICE_FLAG_NEEDS_CONTIGUOUS;
    return props;
  }

  // The summary `mixrt info` shows and autocast reads: f32 in the classes
  // where this plugin runs something. Per op, the table above answers.
  Capability GetCapability(int, MixrtOpClass op_class,
                           MixrtDtype dtype) override {
    const bool ours = op_class == MIXRT_OP_CLASS_ELEMENTWISE ||
                      op_class == MIXRT_OP_CLASS_CAST ||
                      op_class == MIXRT_OP_CLASS_MATMUL;
    if (ours && dtype == MIXRT_DTYPE_F32) return {MIXRT_SUPPORT_NATIVE, "", 0};
    return mixrt::sdk::Unsupported("the partial plugin runs f32 only");
  }

  const mixrt::sdk::OpTable* Ops() const override { return &kOps; }

  // Fusion (chain_fusion.cc): add/mul/relu chains, alone or after a matmul.
  mixrt::sdk::StatusOr<std::vector<int>> ClaimFusion(
      int, const mixrt::sdk::FusionGraph& graph) override {
    return ClaimChains(graph);
  }
  mixrt::sdk::StatusOr<std::unique_ptr<mixrt::sdk::FusedKernel>> CompileFusion(
      int, const mixrt::sdk::FusionGraph& graph,
      mixrt::sdk::Span<const int> group_of_node, int group) override {
    return CompileChain(graph, group_of_node, group);
  }

  mixrt::sdk::Status Launch(const KernelCall& call) override {
    return kOps.Run(call);
  }
};

}  // namespace partial

MIXRT_SDK_DEFINE_PLUGIN(partial::PartialPlugin)
