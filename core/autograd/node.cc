#include "core/autograd/node.h"

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/autograd/grad_mode.h"
#include "core/kernels/pointwise.h"
#include "mixrt/status_macros.h"

namespace mixrt {

absl::StatusOr<std::vector<Tensor>> AccumulateGrad::Apply(
    std::vector<Tensor> grad_outputs) {
  std::shared_ptr<AutogradMeta> leaf = leaf_.lock();
  if (leaf == nullptr || !grad_outputs[0].defined()) {
    return std::vector<Tensor>{};
  }
  const Tensor& g = grad_outputs[0];
  if (absl::Span<const int64_t>(g.shape()) !=
      absl::Span<const int64_t>(shape_)) {
    return absl::InternalError(
        absl::StrCat("autograd: gradient of shape ", ShapeToString(g.shape()),
                     " for a leaf of shape ", ShapeToString(shape_)));
  }
  // .grad must be a tensor of its own in the leaf's dtype: optimizers and
  // the scaler modify it in place. A gradient nothing else holds (the usual
  // case: a GEMM's fresh output) is adopted as is; a shared one is copied.
  const bool exclusive =
      g.storage().use_count() == 1 && g.is_contiguous() && g.offset() == 0;
  Tensor converted;
  if (g.dtype() != dtype_) {
    MIXRT_ASSIGN_OR_RETURN(converted, g.to(dtype_));
  } else if (exclusive) {
    converted = std::move(g);
  } else {
    MIXRT_ASSIGN_OR_RETURN(converted, g.clone());
  }
  Tensor grad;
  std::vector<std::function<absl::Status(const Tensor&)>> hooks;
  {
    std::lock_guard<std::mutex> lock(leaf->accumulator_mutex);
    if (!leaf->grad.defined()) {
      leaf->grad = converted;
    } else {
      MIXRT_ASSIGN_OR_RETURN(leaf->grad, kernels::add(leaf->grad, converted));
    }
    grad = leaf->grad;
    for (const auto& [id, hook] : leaf->post_accumulate_grad_hooks) {
      hooks.push_back(hook);
    }
  }
  // Outside the lock: a hook may read or replace .grad itself.
  for (const auto& hook : hooks) MIXRT_RETURN_IF_ERROR(hook(grad));
  return std::vector<Tensor>{};
}

namespace {
std::atomic<uint64_t> g_nodes_created{0};
}  // namespace

uint64_t NodesCreated() { return g_nodes_created.load(); }

Node::Node(std::string name)
    : name_(std::move(name)), sequence_(g_nodes_created.fetch_add(1)) {}

Edge GradientEdge(const Tensor& t) {
  const std::shared_ptr<AutogradMeta> meta = t.autograd_meta();
  if (meta == nullptr) return {};
  if (meta->grad_fn != nullptr) return {meta->grad_fn, meta->output_nr};
  if (!meta->requires_grad) return {};
  std::lock_guard<std::mutex> lock(meta->accumulator_mutex);
  std::shared_ptr<Node> accumulator = meta->grad_accumulator.lock();
  if (accumulator == nullptr) {
    accumulator = std::make_shared<AccumulateGrad>(meta, t.dtype(), t.shape());
    meta->grad_accumulator = accumulator;
  }
  return {accumulator, 0};
}

bool AnyRequiresGrad(std::initializer_list<const Tensor*> inputs) {
  if (!GradModeEnabled()) return false;
  for (const Tensor* t : inputs) {
    if (t != nullptr && t->defined() && t->requires_grad()) return true;
  }
  return false;
}

bool AnyRequiresGrad(const std::vector<Tensor>& inputs) {
  if (!GradModeEnabled()) return false;
  for (const Tensor& t : inputs) {
    if (t.defined() && t.requires_grad()) return true;
  }
  return false;
}

void SetHistory(Tensor& output, const std::shared_ptr<Node>& node,
                int output_nr) {
  AutogradMeta& meta = output.mutable_autograd_meta();
  meta.grad_fn = node;
  meta.output_nr = output_nr;
  meta.requires_grad = true;
}

}  // namespace mixrt
