#include "core/compiler/capture.h"

#include <cstring>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "core/autograd/grad_mode.h"
#include "core/tensor/capture_hooks.h"
#include "core/tensor/generator.h"
#include "mixrt/op_names.h"

namespace mixrt::compiler {
namespace {

// Every attribute struct starts with these two fields (plugin_api.h).
struct AttrsHeader {
  size_t struct_size;
  MixrtExtensionBase* ext;
};

class Recorder : public CaptureHooks {
 public:
  explicit Recorder(const std::vector<Tensor>& inputs) : inputs_(inputs) {}

  void OnLaunch(MixrtOp op, absl::Span<const Tensor> inputs,
                absl::Span<const Tensor> outputs, const void* attrs) override {
    if (broken()) return;
    Node node;
    node.op = op;
    if (attrs != nullptr) {
      const auto* header = static_cast<const AttrsHeader*>(attrs);
      if (header->ext != nullptr) {
        Break(absl::StrCat(MixrtOpName(op),
                           " was launched with an attribute extension chain, "
                           "which a graph cannot copy"));
        return;
      }
      const auto* bytes = static_cast<const uint8_t*>(attrs);
      node.attrs.assign(bytes, bytes + header->struct_size);
    }
    for (const Tensor& t : inputs) node.inputs.push_back(Value(t));
    for (const Tensor& t : outputs) node.outputs.push_back(Value(t));
    if (!SameDevice(outputs.empty() ? Device() : outputs[0].device(), op)) {
      return;
    }
    graph_.nodes.push_back(std::move(node));
  }

  void OnAllocate(const std::shared_ptr<Storage>& storage) override {
    // Kept alive until the capture ends, so no later allocation can reuse
    // the address and be taken for it.
    allocated_[storage.get()] = storage;
  }

  void OnHostWrite(const Tensor& dst, const void* src, size_t bytes) override {
    if (broken()) return;
    Node node;
    node.kind = Node::Kind::kHostWrite;
    node.outputs.push_back(Value(dst));
    const auto* b = static_cast<const uint8_t*>(src);
    node.host_bytes.assign(b, b + bytes);
    if (!SameDevice(dst.device(), MIXRT_OP_COPY)) return;
    graph_.nodes.push_back(std::move(node));
  }

  void OnHostRead(const Tensor& src) override {
    Break(absl::StrCat(
        "a host read of tensor data (item(), to_*_vector(), to_bytes() or a "
        "copy between devices) of a ",
        DTypeName(src.dtype()), ShapeToString(src.shape()),
        " tensor: what follows may depend on its values"));
  }

  void Break(std::string reason) {
    if (!broken()) reason_ = std::move(reason);
  }
  bool broken() const { return !reason_.empty(); }
  const std::string& reason() const { return reason_; }

  // The graph with `outputs` as its results (marks their memory returned).
  Graph Finish(const std::vector<Tensor>& outputs) {
    for (const Tensor& t : outputs) {
      const ValueRef v = Value(t);
      StorageSlot& slot = graph_.slots[v.slot];
      if (slot.kind == StorageSlot::Kind::kInternal) slot.returned = true;
      graph_.outputs.push_back(v);
      if (!graph_.device.valid()) graph_.device = t.device();
    }
    return std::move(graph_);
  }

 private:
  bool SameDevice(const Device& device, MixrtOp op) {
    if (!graph_.device.valid()) graph_.device = device;
    if (device == graph_.device) return true;
    Break(absl::StrCat(MixrtOpName(op), " ran on ", device.ToString(),
                       " after launches on ", graph_.device.ToString(),
                       ": a graph runs on one device"));
    return false;
  }

  ValueRef Value(const Tensor& t) {
    ValueRef v;
    v.dtype = t.dtype();
    v.shape = t.shape();
    v.strides = t.strides();
    const Storage* storage = t.storage().get();
    auto [it, added] = slot_of_.try_emplace(storage, 0);
    if (added) {
      it->second = static_cast<int>(graph_.slots.size());
      graph_.slots.push_back(NewSlot(t));
    }
    v.slot = it->second;
    const StorageSlot& slot = graph_.slots[v.slot];
    v.offset = slot.kind == StorageSlot::Kind::kInput
                   ? t.offset() - inputs_[slot.input].offset()
                   : t.offset();
    return v;
  }

  StorageSlot NewSlot(const Tensor& t) {
    StorageSlot slot;
    if (auto a = allocated_.find(t.storage().get()); a != allocated_.end()) {
      slot.kind = StorageSlot::Kind::kInternal;
      slot.bytes = a->second->bytes();
      return slot;
    }
    for (size_t i = 0; i < inputs_.size(); ++i) {
      if (inputs_[i].defined() && inputs_[i].storage() == t.storage()) {
        slot.kind = StorageSlot::Kind::kInput;
        slot.input = static_cast<int>(i);
        return slot;
      }
    }
    slot.kind = StorageSlot::Kind::kConstant;
    slot.constant = t.storage();
    return slot;
  }

  const std::vector<Tensor>& inputs_;
  Graph graph_;
  absl::flat_hash_map<const Storage*, int> slot_of_;
  absl::flat_hash_map<const Storage*, std::shared_ptr<Storage>> allocated_;
  std::string reason_;
};

}  // namespace

absl::StatusOr<CaptureOutcome> CaptureCall(const TracedFunction& fn,
                                           const std::vector<Tensor>& inputs) {
  Recorder recorder(inputs);
  const uint64_t random_offset = DefaultGenerator().offset();
  absl::StatusOr<std::vector<Tensor>> outputs;
  {
    ScopedCaptureHooks hooks(&recorder);
    outputs = fn(inputs);
  }
  if (!outputs.ok()) return outputs.status();
  CaptureOutcome outcome;
  outcome.outputs = *std::move(outputs);
  if (DefaultGenerator().offset() != random_offset) {
    recorder.Break(
        "random numbers were drawn (dropout in training mode, random "
        "tensors): a replay would repeat the same draws");
  }
  if (GradModeEnabled()) {
    for (const Tensor& t : outcome.outputs) {
      if (t.defined() && t.requires_grad()) {
        recorder.Break(
            "a result requires grad: compiled graphs do not record autograd "
            "history yet (run the call under NoGradGuard or InferenceMode)");
        break;
      }
    }
  }
  for (const Tensor& t : outcome.outputs) {
    if (!t.defined()) recorder.Break("a result is an undefined tensor");
  }
  if (recorder.broken()) {
    outcome.not_captured = recorder.reason();
  } else {
    outcome.graph = recorder.Finish(outcome.outputs);
  }
  return outcome;
}

}  // namespace mixrt::compiler
