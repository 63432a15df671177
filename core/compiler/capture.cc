#include "core/compiler/capture.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/amp/autocast/autocast.h"
#include "core/autograd/engine.h"
#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/compiler/random_draws.h"
#include "core/tensor/capture_hooks.h"
#include "core/tensor/factories.h"
#include "core/tensor/generator.h"
#include "mixrt/op_names.h"

namespace mixrt::compiler {
namespace {

// Every attribute struct starts with these two fields (plugin_api.h).
struct AttrsHeader {
  size_t struct_size;
  MixrtExtensionBase* ext;
};

// The first tensor of `list` viewing t's memory, or -1.
int IndexOfStorage(const std::vector<Tensor>& list, const Tensor& t) {
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i].defined() && list[i].storage() == t.storage()) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

class Recorder : public CaptureHooks {
 public:
  // A backward's recorder maps the forward's memory to kSaved slots.
  explicit Recorder(const std::vector<Tensor>& inputs,
                    Recorder* forward = nullptr,
                    const std::vector<Tensor>* parameters = nullptr,
                    bool host_reads_are_guards = false)
      : inputs_(inputs),
        forward_(forward),
        parameters_(parameters),
        host_reads_are_guards_(host_reads_are_guards) {}

  void OnLaunch(MixrtOp op, absl::Span<const Tensor> inputs,
                absl::Span<const Tensor> outputs, const void* attrs) override {
    if (broken()) return;
    GraphNode node;
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
    if (!MarkRandom(&node)) return;
    graph_.nodes.push_back(std::move(node));
  }

  void OnRandomDraw(const std::shared_ptr<Generator::State>& source,
                    uint64_t seed, uint64_t offset, uint64_t blocks) override {
    if (forward_ != nullptr) {
      Break(
          "random numbers were drawn in the backward: a replay of its graph "
          "would repeat them");
      return;
    }
    int s = 0;
    while (s < static_cast<int>(sources_.size()) && sources_[s] != source) ++s;
    if (s == static_cast<int>(sources_.size())) {
      sources_.push_back(source);  // Held until the capture ends.
      graph_.random_sources.push_back({source, 0});
    }
    RandomSource& r = graph_.random_sources[s];
    draws_.push_back({s, seed, offset, blocks, r.blocks});
    r.blocks += static_cast<int64_t>(blocks);
  }

  void OnAllocate(const std::shared_ptr<Storage>& storage) override {
    // Kept alive until the capture ends, so no later allocation can reuse
    // the address and be taken for it.
    allocated_[storage.get()] = storage;
  }

  void OnHostWrite(const Tensor& dst, const void* src, size_t bytes) override {
    if (broken()) return;
    GraphNode node;
    node.kind = GraphNode::Kind::kHostWrite;
    node.outputs.push_back(Value(dst));
    const auto* b = static_cast<const uint8_t*>(src);
    node.host_bytes.assign(b, b + bytes);
    if (!SameDevice(dst.device(), MIXRT_OP_COPY)) return;
    graph_.nodes.push_back(std::move(node));
  }

  void OnHostRead(const Tensor& src, const void* data, size_t bytes) override {
    const std::string what = absl::StrCat(
        "a host read of tensor data (item(), to_*_vector(), to_bytes() or a "
        "copy between devices) of a ",
        DTypeName(src.dtype()), ShapeToString(src.shape()), " tensor");
    if (!host_reads_are_guards_ || forward_ != nullptr) {
      Break(absl::StrCat(what, ": what follows may depend on its values",
                         forward_ != nullptr ? " (in the backward)" : ""));
      return;
    }
    // A replay that finds another value stops at the read and the call
    // runs again: nothing before the read may have changed memory that
    // outlives the call.
    for (const GraphNode& n : graph_.nodes) {
      for (const ValueRef& v : n.outputs) {
        if (graph_.slots[v.slot].kind != StorageSlot::Kind::kInternal) {
          Break(absl::StrCat(what, " after ",
                             n.kind == GraphNode::Kind::kHostWrite
                                 ? "a host write"
                                 : MixrtOpName(n.op),
                             " wrote an input or a tensor the function closes "
                             "over: a replay that reads another value could "
                             "not run the call again"));
          return;
        }
      }
    }
    GraphNode node;
    node.kind = GraphNode::Kind::kHostRead;
    node.inputs.push_back(Value(src));
    const auto* b = static_cast<const uint8_t*>(data);
    node.host_bytes.assign(b, b + bytes);
    if (!SameDevice(src.device(), MIXRT_OP_COPY)) return;
    graph_.nodes.push_back(std::move(node));
  }

  void OnUntraceable(const char* what) override {
    // The engine run this recorder traces reports itself first; every
    // later report (an op that fell back to another backend, a backward
    // run inside the backward) is work the graph would not replay.
    if (engine_reports_expected_ > 0) {
      --engine_reports_expected_;
      return;
    }
    Break(what);
  }
  void set_tracing_backward() { engine_reports_expected_ = 1; }

  void OnHostGuard(const HostGuard& guard) override {
    if (guarded_.insert(guard.identity).second) host_guards_.push_back(guard);
  }

  void OnLeafRead(const Tensor& leaf) override {
    // Memory this call allocated is fresh on every call, and an input's
    // requires_grad is part of the call's signature.
    if (allocated_.contains(leaf.storage().get()) ||
        IndexOfStorage(inputs_, leaf) >= 0) {
      return;
    }
    const std::shared_ptr<AutogradMeta> meta = leaf.autograd_meta();
    if (!guarded_.insert(meta.get()).second) return;
    const bool requires_grad = meta->requires_grad;
    std::weak_ptr<AutogradMeta> weak = meta;
    host_guards_.push_back(
        {meta.get(),
         absl::StrCat("requires_grad of a ", DTypeName(leaf.dtype()),
                      ShapeToString(leaf.shape()), " tensor it read (",
                      requires_grad ? "yes" : "no", ")"),
         // A handle that is gone (a temporary view) guards nothing; the
         // memory it viewed is a constant of the graph, which is.
         [weak, requires_grad] {
           const std::shared_ptr<AutogradMeta> m = weak.lock();
           return m == nullptr || m->requires_grad == requires_grad;
         }});
  }

  std::vector<HostGuard> TakeHostGuards() { return std::move(host_guards_); }

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
    if (forward_ != nullptr && forward_->Holds(t)) {
      slot.kind = StorageSlot::Kind::kSaved;
      slot.forward_slot = forward_->SavedSlot(t);
      return slot;
    }
    if (const int input = IndexOfStorage(inputs_, t); input >= 0) {
      slot.kind = StorageSlot::Kind::kInput;
      slot.input = input;
      return slot;
    }
    slot.kind = StorageSlot::Kind::kConstant;
    slot.constant = t.storage();
    if (parameters_ != nullptr)
      slot.parameter = IndexOfStorage(*parameters_, t);
    return slot;
  }

  // Whether t views memory this call allocated or one of its inputs: what
  // differs between calls, so a backward must be handed it.
  bool Holds(const Tensor& t) const {
    return allocated_.contains(t.storage().get()) ||
           IndexOfStorage(inputs_, t) >= 0;
  }

  // The forward slot of memory it allocated, marked saved for a backward.
  int SavedSlot(const Tensor& t) {
    const int slot = Value(t).slot;
    graph_.slots[slot].saved = true;
    return slot;
  }

  // Philox blocks [offset, offset + blocks) the call drew under `seed`
  // from random source `source`, `relative` blocks after its first draw
  // from that source.
  struct Draw {
    int source;
    uint64_t seed, offset, blocks;
    int64_t relative;
  };

  // A launch reading random numbers keeps their source and place among the
  // call's draws instead of their seed and offset, which a replay takes
  // from the generator (random_draws.h). False (a break) when the numbers
  // were not drawn during the call (a replay would read the same ones), or
  // when two generators drew them (both with one seed at one offset: which
  // one a replay should draw from is unknowable).
  bool MarkRandom(GraphNode* node) {
    const std::optional<RandomFields> fields =
        RandomFieldsOf(node->op, node->attrs);
    if (!fields.has_value()) return true;
    const uint64_t seed = ReadField(node->attrs, fields->seed_at);
    const uint64_t offset = ReadField(node->attrs, fields->offset_at);
    const Draw* found = nullptr;
    const Recorder& root = forward_ != nullptr ? *forward_ : *this;
    for (const Draw& d : root.draws_) {
      // (A draw of no blocks, for an empty tensor, is read at its offset.)
      if (d.seed != seed || offset < d.offset ||
          offset - d.offset >= std::max<uint64_t>(d.blocks, 1)) {
        continue;
      }
      if (found != nullptr && found->source != d.source) {
        Break(absl::StrCat(MixrtOpName(node->op),
                           " read random numbers that two generators drew "
                           "(one seed, one offset): a replay could not tell "
                           "which to draw from"));
        return false;
      }
      found = &d;
    }
    if (found == nullptr) {
      Break(absl::StrCat(MixrtOpName(node->op),
                         " read random numbers drawn before the call: a "
                         "replay would read the same ones"));
      return false;
    }
    node->random_source = found->source;
    node->random_offset =
        found->relative + static_cast<int64_t>(offset - found->offset);
    WriteField(&node->attrs, fields->seed_at, 0);
    WriteField(&node->attrs, fields->offset_at, 0);
    return true;
  }

  const std::vector<Tensor>& inputs_;
  Recorder* forward_;
  std::vector<Draw> draws_;
  std::vector<std::shared_ptr<Generator::State>> sources_;
  const std::vector<Tensor>* parameters_;
  const bool host_reads_are_guards_;
  int engine_reports_expected_ = 0;
  std::vector<HostGuard> host_guards_;
  absl::flat_hash_set<const void*> guarded_;
  Graph graph_;
  absl::flat_hash_map<const Storage*, int> slot_of_;
  absl::flat_hash_map<const Storage*, std::shared_ptr<Storage>> allocated_;
  std::string reason_;
};

// Catches the gradient bound for one boundary of the traced region.
class SinkNode : public Node {
 public:
  SinkNode() : Node("CompiledGradientSink") {}
  absl::StatusOr<std::vector<Tensor>> Apply(
      std::vector<Tensor> grad_outputs) override {
    gradient = grad_outputs.empty() ? Tensor() : grad_outputs[0];
    return std::vector<Tensor>{};
  }
  Tensor gradient;
};

// Traces the backward of `outputs` (the forward recorded by `forward`).
// Returns the reason when it cannot.
std::string CaptureBackward(const std::vector<Tensor>& inputs,
                            const std::vector<Tensor>& outputs,
                            uint64_t first_node, Recorder* forward,
                            const std::vector<Tensor>* parameters,
                            TrainingGraphs* training,
                            std::vector<HostGuard>* host_guards) {
  // Boundaries: edges into an input's history, a leaf's accumulator, or a
  // node recorded before the call. Each (node, slot) gets one sink.
  absl::flat_hash_map<std::pair<const Node*, int>, int> input_of;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) continue;
    const Edge e = GradientEdge(inputs[i]);
    if (e.node != nullptr) {
      input_of.try_emplace(
          std::make_pair<const Node*, int>(e.node.get(), int{e.input_nr}),
          static_cast<int>(i));
    }
  }
  struct Redirect {
    Node* node;
    size_t k;
    Edge original;
  };
  std::vector<Redirect> redirects;
  std::vector<std::shared_ptr<SinkNode>> sinks;
  absl::flat_hash_map<std::pair<const Node*, int>, int> sink_of;
  std::vector<Tensor> roots, grads;
  std::vector<Node*> stack;
  absl::flat_hash_map<const Node*, bool> seen;  // Autograd nodes walked.
  for (size_t k = 0; k < outputs.size(); ++k) {
    const Edge e = GradientEdge(outputs[k]);
    if (e.node == nullptr) continue;
    training->grad_outputs.push_back(static_cast<int>(k));
    roots.push_back(outputs[k]);
    if (seen.emplace(e.node.get(), true).second) stack.push_back(e.node.get());
  }
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    std::vector<Edge>& edges = node->next_edges();
    for (size_t k = 0; k < edges.size(); ++k) {
      const Edge& e = edges[k];
      if (e.node == nullptr) continue;
      const auto key =
          std::make_pair<const Node*, int>(e.node.get(), int{e.input_nr});
      const auto input = input_of.find(key);
      const bool boundary =
          input != input_of.end() ||
          dynamic_cast<AccumulateGrad*>(e.node.get()) != nullptr ||
          e.node->sequence() < first_node;
      if (!boundary) {
        if (seen.emplace(e.node.get(), true).second)
          stack.push_back(e.node.get());
        continue;
      }
      auto [it, added] =
          sink_of.try_emplace(key, static_cast<int>(sinks.size()));
      if (added) {
        sinks.push_back(std::make_shared<SinkNode>());
        GradientSink target;
        if (input != input_of.end()) {
          target.input = input->second;
        } else {
          target.edge = e;
          for (size_t p = 0; parameters != nullptr && p < parameters->size();
               ++p) {
            if (GradientEdge((*parameters)[p]).node == e.node) {
              target.parameter = static_cast<int>(p);
              break;
            }
          }
        }
        training->sinks.push_back(target);
      }
      redirects.push_back({node, k, e});
      edges[k] = Edge{sinks[it->second], 0};
    }
  }
  for (const Tensor& r : roots) {
    absl::StatusOr<Tensor> one = ones(r.shape(), r.dtype(), r.device());
    if (!one.ok()) return std::string(one.status().message());
    grads.push_back(*one);
  }
  Recorder backward(grads, forward, parameters);
  backward.set_tracing_backward();
  absl::Status status;
  {
    ScopedCaptureHooks hooks(&backward);
    status = RunBackward(roots, grads, /*retain_graph=*/true);
  }
  for (const Redirect& r : redirects) r.node->next_edges()[r.k] = r.original;
  for (HostGuard& g : backward.TakeHostGuards())
    host_guards->push_back(std::move(g));
  if (!status.ok()) {
    return absl::StrCat("its backward failed: ", status.message());
  }
  if (backward.broken())
    return absl::StrCat("in its backward, ", backward.reason());
  std::vector<Tensor> results;
  for (const auto& sink : sinks) {
    training->sink_result.push_back(
        sink->gradient.defined() ? static_cast<int>(results.size()) : -1);
    if (sink->gradient.defined()) results.push_back(sink->gradient);
  }
  training->backward = backward.Finish(results);
  if (std::string why = UnwrittenRead(training->backward); !why.empty()) {
    return absl::StrCat("its backward graph is not self-contained: ", why);
  }
  return "";
}

}  // namespace

absl::StatusOr<CaptureOutcome> CaptureCall(
    const TracedFunction& fn, const std::vector<Tensor>& inputs,
    const std::vector<Tensor>* parameters, bool host_reads_are_guards) {
  Recorder recorder(inputs, nullptr, parameters, host_reads_are_guards);
  const uint64_t first_node = NodesCreated();
  absl::StatusOr<std::vector<Tensor>> outputs;
  {
    ScopedCaptureHooks hooks(&recorder);
    AutocastCacheBypass casts_are_launches;
    outputs = fn(inputs);
  }
  if (!outputs.ok()) return outputs.status();
  CaptureOutcome outcome;
  outcome.outputs = *std::move(outputs);
  for (const Tensor& t : outcome.outputs) {
    if (!t.defined()) recorder.Break("a result is an undefined tensor");
  }
  bool training = false;
  if (GradModeEnabled()) {
    for (const Tensor& t : outcome.outputs) {
      training |= t.defined() && t.requires_grad();
    }
  }
  if (training && !recorder.broken()) {
    TrainingGraphs graphs;
    const std::string why =
        CaptureBackward(inputs, outcome.outputs, first_node, &recorder,
                        parameters, &graphs, &outcome.host_guards);
    if (!why.empty()) {
      recorder.Break(why);
    } else {
      outcome.training = std::move(graphs);
    }
  }
  for (HostGuard& g : recorder.TakeHostGuards())
    outcome.host_guards.push_back(std::move(g));
  if (recorder.broken()) {
    outcome.not_captured = recorder.reason();
    outcome.training.reset();
  } else {
    outcome.graph = recorder.Finish(outcome.outputs);
    if (std::string why = UnwrittenRead(*outcome.graph); !why.empty()) {
      outcome.graph.reset();
      outcome.training.reset();
      outcome.not_captured =
          absl::StrCat("its graph is not self-contained: ", why);
    }
  }
  return outcome;
}

}  // namespace mixrt::compiler
