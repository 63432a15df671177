#include "backends/cpu/fusion/fused_gelu.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/status/statusor.h"
#include "backends/cpu/fusion/claim_in_order.h"
#include "backends/cpu/kernels/float_rows.h"
#include "backends/cpu/kernels/gelu_rows.h"
#include "backends/cpu/kernels/parallel.h"
#include "mixrt/status_macros.h"
#include "plugins/sdk/plugin.h"

namespace mixrt::cpu {
namespace {

using sdk::FusionGraph;
using sdk::FusionNode;
using sdk::FusionValue;

// The op-by-op kernels' chunking (cpu_pointwise.cc), so the threads split
// the elements alike.
constexpr int64_t kChunk = 1024;
constexpr int64_t kGrain = 1 << 14;

bool IsGelu(const FusionNode& n, MixrtOp op, size_t inputs) {
  if (n.op != op || n.attrs_extended || n.inputs.size() != inputs ||
      n.outputs.size() != 1) {
    return false;
  }
  auto a = n.GetAttrs<MixrtPointwiseAttrs>();
  return a.ok() && a->kind == MIXRT_UNARY_GELU;
}

// Static, dense, floating, and of x's shape and dtype.
bool LikeX(const FusionValue& v, const FusionValue& x) {
  return v.is_static() && v.is_contiguous() && v.dtype == x.dtype &&
         v.shape == x.shape;
}

// The GELU gradient at GELU node `i`'s x that can join it, or -1.
int GradOf(const FusionGraph& g, int i, absl::Span<const int> taken) {
  auto free = [&](int node) {
    return static_cast<size_t>(node) >= taken.size() || taken[node] < 0;
  };
  const FusionNode& n = g.nodes[i];
  if (!free(i) || !IsGelu(n, MIXRT_OP_UNARY, 1)) return -1;
  const int x = n.inputs[0];
  const FusionValue& xv = g.values[x];
  if (!LikeX(xv, xv) || !sdk::IsFloatingDtype(xv.dtype) ||
      !LikeX(g.values[n.outputs[0]], xv)) {
    return -1;
  }
  for (int r : g.readers[x]) {
    const FusionNode& b = g.nodes[r];
    if (r == i || !free(r) || !IsGelu(b, MIXRT_OP_UNARY_BACKWARD, 2) ||
        b.inputs[1] != x || b.inputs[0] == x ||
        !LikeX(g.values[b.inputs[0]], xv) ||
        !LikeX(g.values[b.outputs[0]], xv) || g.producer[b.inputs[0]] == i) {
      continue;
    }
    return r;
  }
  return -1;
}

class GeluWithGrad : public sdk::FusedKernel {
 public:
  // values: x, g, y (the GELU), d (the gradient).
  GeluWithGrad(FusionValue x, int x_value, int g_value, int y_value,
               int d_value, bool g_weight)
      : x_(std::move(x)),
        x_value_(x_value),
        g_value_(g_value),
        y_value_(y_value),
        d_value_(d_value),
        g_weight_(g_weight) {}

  sdk::Status Run(sdk::Span<void* const> data,
                  sdk::Span<const int64_t>) override {
    const void* x = data[x_value_];
    void* y = data[y_value_];
    void* d = data[d_value_];
    if (x == nullptr || y == nullptr || d == nullptr) {
      return absl::InvalidArgumentError(
          "GELU with its gradient: an address is missing");
    }
    const MixrtDtype dtype = x_.dtype;
    const int64_t numel = x_.numel();
    const float* g_floats = nullptr;  // Null: ones.
    const void* g = data[g_value_];
    if (g_weight_) {
      if (fresh_version_) {
        if (g == nullptr) {
          return absl::InvalidArgumentError(
              "GELU with its gradient: a new version of the gradient came "
              "without its memory");
        }
        KeepGradient(g, dtype, numel);
        fresh_version_ = false;
      }
      g_floats = kept_.empty() ? nullptr : kept_.data();
    } else if (g == nullptr) {
      return absl::InvalidArgumentError(
          "GELU with its gradient: the gradient's address is missing");
    }
    ParallelFor(numel, kGrain, [&](int64_t begin, int64_t end) {
      float xs[kChunk], gs[kChunk], ys[kChunk], ds[kChunk];
      for (int64_t b = begin; b < end; b += kChunk) {
        const int64_t n = std::min(kChunk, end - b);
        const float* xr = FloatsAt(x, dtype, b, n, xs);
        const float* gr = g_floats != nullptr ? g_floats + b
                          : g_weight_         ? nullptr
                                              : FloatsAt(g, dtype, b, n, gs);
        if (dtype == MIXRT_DTYPE_F32) {
          GeluWithGradRow(xr, gr, n, static_cast<float*>(y) + b,
                          static_cast<float*>(d) + b);
        } else {
          GeluWithGradRow(xr, gr, n, ys, ds);
          StoreRow(ys, n, y, dtype, b);
          StoreRow(ds, n, d, dtype, b);
        }
      }
    });
    return absl::OkStatus();
  }

  std::string Description() const override {
    return "GELU with its gradient (one erfc)";
  }

  void SetWeightVersion(int value, uint64_t version) override {
    if (value == g_value_ && version != version_) {
      version_ = version;
      fresh_version_ = true;
    }
  }
  bool KeepsCopyOf(int value) const override { return value == g_value_; }

 private:
  // Nothing when every element is exactly 1 (the product is then exact),
  // else the gradient's floats.
  void KeepGradient(const void* g, MixrtDtype dtype, int64_t numel) {
    kept_.resize(numel);
    LoadRow(g, dtype, 0, numel, kept_.data());
    if (std::all_of(kept_.begin(), kept_.end(),
                    [](float v) { return v == 1.0f; })) {
      kept_.clear();
      kept_.shrink_to_fit();
    }
  }

  const FusionValue x_;
  const int x_value_, g_value_, y_value_, d_value_;
  const bool g_weight_;
  uint64_t version_ = 0;
  bool fresh_version_ = false;
  std::vector<float> kept_;
};

}  // namespace

std::vector<int> ClaimGeluWithGrad(const FusionGraph& g,
                                   absl::Span<const int> taken, int first) {
  return ClaimInOrder(
      g.nodes.size(), taken, first, [&g](int i, absl::Span<const int> claimed) {
        const int b = GradOf(g, i, claimed);
        return b < 0 ? std::vector<int>{} : std::vector<int>{i, b};
      });
}

bool IsGeluWithGrad(const FusionGraph& g, absl::Span<const int> group_of_node,
                    int group) {
  const std::vector<int> nodes = FusionGraph::GroupNodes(group_of_node, group);
  return nodes.size() == 2 && GradOf(g, nodes[0], {}) == nodes[1];
}

absl::StatusOr<std::unique_ptr<sdk::FusedKernel>> CompileGeluWithGrad(
    const FusionGraph& g, absl::Span<const int> group_of_node, int group) {
  const std::vector<int> nodes = FusionGraph::GroupNodes(group_of_node, group);
  if (!IsGeluWithGrad(g, group_of_node, group)) {
    return absl::InvalidArgumentError(
        "GELU with its gradient: the group is not a GELU and its gradient at "
        "the same x");
  }
  const FusionNode& gelu = g.nodes[nodes[0]];
  const FusionNode& grad = g.nodes[nodes[1]];
  const int x = gelu.inputs[0], gradient = grad.inputs[0];
  const bool weight = g.values[gradient].has(MIXRT_FUSION_VALUE_WEIGHT);
  return std::make_unique<GeluWithGrad>(
      g.values[x], x, gradient, gelu.outputs[0], grad.outputs[0], weight);
}

}  // namespace mixrt::cpu
