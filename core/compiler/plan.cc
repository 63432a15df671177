#include "core/compiler/plan.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/on_off.h"
#include "core/compiler/fusion.h"
#include "core/tensor/op_profile.h"
#include "mixrt/op_names.h"
#include "mixrt/status_macros.h"

namespace mixrt::compiler {
namespace {

constexpr char kKernelGraphsEnv[] = "MIXRT_COMPILE_KERNEL_GRAPHS";
constexpr char kFusionEnv[] = "MIXRT_COMPILE_FUSION";
constexpr uint64_t kMaxHeldBytes = 64 << 10;

std::string DescribeFusion(const FusionOutcome& o) {
  std::string text =
      o.groups > 0
          ? absl::StrCat(o.groups, " fused kernels for ", o.launches, " of ",
                         o.offered,
                         " launches offered: ", absl::StrJoin(o.kernels, "; "))
      : !o.not_offered.empty()
          ? absl::StrCat("none (", o.not_offered, ")")
          : absl::StrCat("none (", o.offered,
                         " launches offered, none claimed)");
  for (const std::string& r : o.refused) {
    absl::StrAppend(&text, "; refused ", r);
  }
  return text;
}

}  // namespace

Plan::Plan(Graph graph)
    : graph_(std::move(graph)), slots_(graph_.slots.size()) {}

bool Plan::FusionEnabled() {
  const char* env = std::getenv(kFusionEnv);
  return env == nullptr || ParseOnOff(env).value_or(true);
}

absl::Status HeldBuffers::Reserve(const Device& device,
                                  const std::vector<uint64_t>& sizes) {
  if (buffers_.size() < sizes.size()) buffers_.resize(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (buffers_[i] == nullptr || buffers_[i]->bytes() < sizes[i]) {
      MIXRT_ASSIGN_OR_RETURN(buffers_[i], Storage::Allocate(device, sizes[i]));
    }
  }
  return absl::OkStatus();
}

uint64_t HeldBuffers::bytes() const {
  uint64_t total = 0;
  for (const auto& b : buffers_) total += b->bytes();
  return total;
}

// The last line of defence against reading past memory: each slot's views
// must end inside what the slot holds. Internal memory is sized here;
// inputs and constants are checked against their storage on every run
// (CheckExtents). A graph always comes from a trace of its own size, so
// this never fires unless something upstream is wrong.
absl::Status Plan::BoundViews() {
  auto cover = [&](const ValueRef& v) -> absl::Status {
    int64_t last = v.offset;
    for (size_t d = 0; d < v.shape.size(); ++d) {
      if (v.shape[d] == 0) return absl::OkStatus();
      // A view before its slot's start (an input's storage before the
      // input's own offset) is bounded by its storage alone: not checked.
      if (v.strides[d] < 0 || v.offset < 0) return absl::OkStatus();
      last += (v.shape[d] - 1) * v.strides[d];
    }
    const uint64_t end = static_cast<uint64_t>(last + 1) * DTypeSize(v.dtype);
    slots_[v.slot].extent = std::max(slots_[v.slot].extent, end);
    return absl::OkStatus();
  };
  for (const GraphNode& n : graph_.nodes) {
    for (const auto* refs : {&n.inputs, &n.outputs}) {
      for (const ValueRef& v : *refs) MIXRT_RETURN_IF_ERROR(cover(v));
    }
  }
  for (const ValueRef& v : graph_.outputs) MIXRT_RETURN_IF_ERROR(cover(v));
  for (size_t s = 0; s < graph_.slots.size(); ++s) {
    const StorageSlot& slot = graph_.slots[s];
    if (slot.kind == StorageSlot::Kind::kInternal &&
        slots_[s].extent > slot.bytes) {
      return absl::InternalError(
          absl::StrCat("compiled graph: a view of buffer ", s, " reaches byte ",
                       slots_[s].extent, " of its ", slot.bytes));
    }
  }
  return absl::OkStatus();
}

absl::Status Plan::CheckExtent(int slot, uint64_t available) const {
  if (slots_[slot].extent <= available) return absl::OkStatus();
  return absl::OutOfRangeError(
      absl::StrCat("compiled graph: memory ", slot, " holds ", available,
                   " bytes but the graph reads ", slots_[slot].extent,
                   " (refused rather than read past it)"));
}

absl::StatusOr<std::unique_ptr<Plan>> Plan::Build(Graph graph,
                                                  BuildOptions options) {
  std::unique_ptr<const Graph> traced;
  std::string fusion;
  if (options.fuse) {
    if (!FusionEnabled()) {
      fusion = absl::StrCat("none (", kFusionEnv, "=0)");
    } else {
      Graph fused;
      MIXRT_ASSIGN_OR_RETURN(
          FusionOutcome outcome,
          FuseWithBackend(graph, &fused, options.time_fusion));
      fusion = DescribeFusion(outcome);
      if (outcome.groups > 0) {
        traced = std::make_unique<const Graph>(std::move(graph));
        graph = std::move(fused);
      }
    }
  }
  std::unique_ptr<Plan> plan(new Plan(std::move(graph)));
  plan->traced_ = std::move(traced);
  plan->fusion_ = std::move(fusion);
  plan->held_ = options.held != nullptr ? std::move(options.held)
                                        : std::make_shared<HeldBuffers>();
  const size_t slots = plan->graph_.slots.size();
  for (const GraphNode& n : plan->graph_.nodes) {
    Prepared p;
    for (const ValueRef& v : n.inputs) p.inputs.push_back(Describe(v));
    for (const ValueRef& v : n.outputs) p.outputs.push_back(Describe(v));
    plan->prepared_.push_back(std::move(p));
  }
  MIXRT_RETURN_IF_ERROR(plan->BoundViews());
  // Each slot's lifetime: the first and last node that touches it.
  for (size_t i = 0; i < plan->graph_.nodes.size(); ++i) {
    const GraphNode& n = plan->graph_.nodes[i];
    for (const auto* refs : {&n.inputs, &n.outputs}) {
      for (const ValueRef& v : *refs) {
        if (plan->slots_[v.slot].first_use < 0)
          plan->slots_[v.slot].first_use = static_cast<int>(i);
        plan->slots_[v.slot].last_use = static_cast<int>(i);
      }
    }
  }
  Plan* self = plan.get();
  plan->kept_ = std::make_unique<KeptLaunches>(
      plan->graph_, [self](int slot) { return self->Temporary(slot); },
      [self](int slot) -> uint64_t {
        // A constant's version: this run's hold on it (Run takes one for
        // every constant).
        const auto& run = self->slots_[slot].run;
        return run != nullptr ? run->version() : 0;
      });
  plan->frees_after_.resize(plan->graph_.nodes.size());
  plan->saved_done_after_.resize(plan->graph_.nodes.size());
  std::vector<bool> viewed_by_result(slots, false);
  for (const ValueRef& v : plan->graph_.outputs)
    viewed_by_result[v.slot] = true;
  for (size_t s = 0; s < slots; ++s) {
    if (plan->slots_[s].last_use < 0) continue;
    if (plan->kept_->IsKept(static_cast<int>(s))) continue;
    if (plan->Temporary(static_cast<int>(s))) {
      plan->frees_after_[plan->slots_[s].last_use].push_back(
          static_cast<int>(s));
    } else if (plan->graph_.slots[s].kind == StorageSlot::Kind::kSaved &&
               !viewed_by_result[s]) {
      plan->saved_done_after_[plan->slots_[s].last_use].push_back(
          static_cast<int>(s));
    }
  }
  plan->order_.resize(plan->graph_.nodes.size());
  for (size_t i = 0; i < plan->order_.size(); ++i)
    plan->order_[i] = static_cast<int>(i);
  plan->segment_at_.assign(plan->order_.size(), -1);
  if (options.preallocate) {
    plan->recycle_ = true;
    MIXRT_RETURN_IF_ERROR(plan->PlanBuffers());
    const Device& device = plan->graph_.device;
    const char* env = std::getenv(kKernelGraphsEnv);
    if (env != nullptr && !ParseOnOff(env).value_or(true)) {
      plan->execution_ = absl::StrCat("one by one (", kKernelGraphsEnv, "=0)");
    } else if (device.valid() && device.backend()->has_kernel_graphs()) {
      plan->OrderForGraphs();
      if (absl::Status built = plan->BuildKernelGraphs(); !built.ok()) {
        plan->segments_.clear();
        plan->segment_at_.assign(plan->order_.size(), -1);
        plan->execution_ = absl::StrCat("one by one (", built.message(), ")");
      }
    } else if (device.valid()) {
      plan->execution_ = absl::StrCat("one by one (", device.backend()->name(),
                                      " makes no kernel graphs)");
    }
  }
  return plan;
}

void Plan::OrderForGraphs() {
  std::vector<bool> written(graph_.slots.size(), false);
  std::vector<int> hoisted, rest;
  for (size_t i = 0; i < graph_.nodes.size(); ++i) {
    const GraphNode& n = graph_.nodes[i];
    if (kept_->IsKeptLaunch(static_cast<int>(i))) {
      bool free = true;
      for (const ValueRef& v : n.inputs) free &= !written[v.slot];
      if (free) {
        hoisted.push_back(static_cast<int>(i));
        continue;
      }
    }
    rest.push_back(static_cast<int>(i));
    for (const ValueRef& v : n.outputs) written[v.slot] = true;
  }
  order_ = std::move(hoisted);
  order_.insert(order_.end(), rest.begin(), rest.end());
}

bool Plan::Graphable(int node) const {
  const GraphNode& n = graph_.nodes[node];
  // A random launch takes new attributes every run; a kernel graph keeps
  // the ones it was made with.
  if ((n.kind != GraphNode::Kind::kLaunch &&
       n.kind != GraphNode::Kind::kFused) ||
      kept_->IsKeptLaunch(node) || n.random()) {
    return false;
  }
  for (const auto* refs : {&n.inputs, &n.outputs}) {
    for (const ValueRef& v : *refs) {
      if (v.offset < 0) return false;  // Before its input's view.
    }
  }
  return true;
}

bool Plan::Releases(int node) const {
  if (!saved_done_after_[node].empty()) return true;
  for (int slot : frees_after_[node]) {
    if (slots_[slot].buffer < 0) return true;
  }
  return false;
}

bool Plan::Allocates(int node) const {
  const GraphNode& n = graph_.nodes[node];
  for (const auto* refs : {&n.inputs, &n.outputs}) {
    for (const ValueRef& v : *refs) {
      if (graph_.slots[v.slot].kind == StorageSlot::Kind::kInternal &&
          slots_[v.slot].buffer < 0 && !kept_->IsKept(v.slot) &&
          slots_[v.slot].first_use == node) {
        return true;
      }
    }
  }
  return false;
}

// A graph frees what its nodes release only when it ends, so it ends
// before a node that takes fresh memory after an earlier node released
// some: the backward frees each activation before allocating what
// follows, as eager does (one graph for a whole backward held them all
// to the end, 1.6x eager's peak).
int Plan::SegmentEnd(int pos) const {
  const int count = static_cast<int>(order_.size());
  int last = pos;
  bool released = Releases(order_[pos]);
  while (last + 1 < count && Graphable(order_[last + 1]) &&
         !(released && Allocates(order_[last + 1]))) {
    ++last;
    released |= Releases(order_[last]);
  }
  return last;
}

absl::Status Plan::BuildSegment(int pos, int last) {
  const Device& device = graph_.device;
  // Descriptors come from prepared_ (shapes and strides in graph_, which
  // does not move); locations from the value refs.
  struct Locations {
    std::vector<int32_t> in_buffers, out_buffers;
    std::vector<uint64_t> in_offsets, out_offsets;
    std::vector<int32_t> fused_values;
  };
  std::vector<Locations> where(last - pos + 1);
  std::vector<MixrtKernelGraphStep> steps(last - pos + 1);
  Segment segment;
  segment.first = pos;
  segment.last = last;
  std::vector<bool> listed(graph_.slots.size(), false);
  for (int k = pos; k <= last; ++k) {
    const int node = order_[k];
    const GraphNode& n = graph_.nodes[node];
    Locations& w = where[k - pos];
    auto locate = [&](const ValueRef& v, std::vector<int32_t>* buffers,
                      std::vector<uint64_t>* offsets) {
      buffers->push_back(v.slot);
      offsets->push_back(static_cast<uint64_t>(v.offset) * DTypeSize(v.dtype));
      if (graph_.slots[v.slot].kind == StorageSlot::Kind::kInternal &&
          !listed[v.slot]) {
        listed[v.slot] = true;
        segment.internal_slots.push_back(v.slot);
      }
    };
    for (const ValueRef& v : n.inputs) locate(v, &w.in_buffers, &w.in_offsets);
    for (const ValueRef& v : n.outputs)
      locate(v, &w.out_buffers, &w.out_offsets);
    MixrtKernelGraphStep& step = steps[k - pos];
    step.struct_size = sizeof(step);
    step.op = n.op;
    step.num_inputs = static_cast<int32_t>(n.inputs.size());
    step.inputs = prepared_[node].inputs.data();
    step.num_outputs = static_cast<int32_t>(n.outputs.size());
    step.outputs = prepared_[node].outputs.data();
    step.input_buffers = w.in_buffers.data();
    step.input_offsets = w.in_offsets.data();
    step.output_buffers = w.out_buffers.data();
    step.output_offsets = w.out_offsets.data();
    step.attrs = n.attrs.empty() ? nullptr : n.attrs.data();
    if (n.kind == GraphNode::Kind::kFused) {
      step.op = 0;
      step.fused_kernel = n.fused->kernel->handle();
      w.fused_values = n.fused->input_values;
      w.fused_values.insert(w.fused_values.end(),
                            n.fused->output_values.begin(),
                            n.fused->output_values.end());
      step.fused_values = w.fused_values.data();
    }
  }
  MIXRT_ASSIGN_OR_RETURN(
      segment.graph,
      device.backend()->CreateKernelGraph(
          device.index(), static_cast<int>(graph_.slots.size()), steps));
  segment_at_[pos] = static_cast<int>(segments_.size());
  segments_.push_back(std::move(segment));
  return absl::OkStatus();
}

absl::Status Plan::BuildKernelGraphs() {
  int launches = 0;
  const int count = static_cast<int>(order_.size());
  for (int pos = 0; pos < count;) {
    const int last = Graphable(order_[pos]) ? SegmentEnd(pos) : pos;
    if (last == pos) {  // One launch gains nothing from a graph.
      ++pos;
      continue;
    }
    MIXRT_RETURN_IF_ERROR(BuildSegment(pos, last));
    launches += last - pos + 1;
    pos = last + 1;
  }
  graph_buffers_.assign(graph_.slots.size(), nullptr);
  execution_ = absl::StrCat("kernel graphs: ", segments_.size(), " (", launches,
                            " of ", graph_.nodes.size(), " nodes)");
  return absl::OkStatus();
}

bool Plan::Temporary(int slot) const {
  const StorageSlot& s = graph_.slots[slot];
  return s.kind == StorageSlot::Kind::kInternal && !s.returned && !s.saved;
}

// Temporaries whose lifetimes do not overlap share one held buffer (large
// ones come from the caching allocator at their first node, as in
// "default": their kernels dwarf an allocation, and held they kept a
// transformer block's step 1.4x above eager's peak): slots
// in order of first use take the smallest free buffer that fits (best
// fit), else a new one; a buffer frees after its slot's last use.
absl::Status Plan::PlanBuffers() {
  struct Buffer {
    uint64_t bytes;
    int busy_until;  // Last node of the slot using it.
  };
  std::vector<Buffer> buffers;
  std::vector<int> order;
  for (size_t s = 0; s < graph_.slots.size(); ++s) {
    if (Temporary(static_cast<int>(s)) && slots_[s].first_use >= 0 &&
        !kept_->IsKept(static_cast<int>(s)) &&
        graph_.slots[s].bytes < kMaxHeldBytes) {
      order.push_back(static_cast<int>(s));
    }
  }
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return slots_[a].first_use < slots_[b].first_use;
  });
  std::vector<int> buffer_of(graph_.slots.size(), -1);
  for (int s : order) {
    const uint64_t need = graph_.slots[s].bytes;
    int best = -1;
    for (size_t b = 0; b < buffers.size(); ++b) {
      // Free strictly before this slot's first node: a node never reads
      // and writes one buffer through two slots.
      if (buffers[b].busy_until >= slots_[s].first_use ||
          buffers[b].bytes < need) {
        continue;
      }
      if (best < 0 || buffers[b].bytes < buffers[best].bytes)
        best = static_cast<int>(b);
    }
    if (best < 0) {
      buffers.push_back({need, -1});
      best = static_cast<int>(buffers.size() - 1);
    }
    buffers[best].busy_until = slots_[s].last_use;
    buffer_of[s] = best;
  }
  // Largest first: the i-th largest of each plan sharing the held buffers
  // take buffer i.
  std::vector<int> by_size(buffers.size());
  for (size_t b = 0; b < buffers.size(); ++b) by_size[b] = static_cast<int>(b);
  std::stable_sort(by_size.begin(), by_size.end(), [&](int a, int b) {
    return buffers[a].bytes > buffers[b].bytes;
  });
  std::vector<int> rank(buffers.size());
  std::vector<uint64_t> sizes;
  for (size_t r = 0; r < by_size.size(); ++r) {
    rank[by_size[r]] = static_cast<int>(r);
    sizes.push_back(buffers[by_size[r]].bytes);
  }
  for (size_t s = 0; s < graph_.slots.size(); ++s) {
    if (buffer_of[s] >= 0) slots_[s].buffer = rank[buffer_of[s]];
  }
  std::lock_guard<std::mutex> lock(held_->mutex());
  return held_->Reserve(graph_.device, sizes);
}

absl::Status Plan::Allocate(int slot) {
  const uint64_t bytes = graph_.slots[slot].bytes;
  std::shared_ptr<Storage>* last = nullptr;
  const StorageSlot& s = graph_.slots[slot];
  if (recycle_ && s.saved && !s.returned && bytes <= kRecycledBytes) {
    last = &slots_[slot].recycled;
    // Nobody else holds the last run's memory any more (its backward ran
    // or was dropped): the same memory again, as a CUDA graph's pool gives
    // it, instead of an allocation and a free per slot per run. (Not
    // results: a reference kept here would stop AccumulateGrad from
    // taking a gradient as it is, and make it copy.)
    if (*last != nullptr && last->use_count() == 1) {
      slots_[slot].run = *last;
      slots_[slot].base = static_cast<char*>(slots_[slot].run->data());
      return absl::OkStatus();
    }
  }
  MIXRT_ASSIGN_OR_RETURN(slots_[slot].run,
                         Storage::Allocate(graph_.device, bytes));
  slots_[slot].base = static_cast<char*>(slots_[slot].run->data());
  if (last != nullptr) *last = slots_[slot].run;
  return absl::OkStatus();
}

// Temporaries go back to the allocator after their last node, as eager
// tensors do when their last handle goes; constants the node wrote count a
// write, as launches through the runtime do (kept launches of every plan
// compare versions).
void Plan::AfterNode(int i, std::vector<SavedMemory>& saved_in) {
  for (const ValueRef& v : graph_.nodes[i].outputs) {
    const StorageSlot& slot = graph_.slots[v.slot];
    if (slot.kind == StorageSlot::Kind::kConstant) {
      slots_[v.slot].run->BumpVersion();
    } else if (slot.kind == StorageSlot::Kind::kInput) {
      run_inputs_[slot.input].storage()->BumpVersion();
    }
  }
  for (int slot : frees_after_[i]) {
    if (slots_[slot].buffer < 0) slots_[slot].run.reset();
  }
  for (int slot : saved_done_after_[i]) {
    slots_[slot].run.reset();
    saved_in[graph_.slots[slot].forward_slot].storage.reset();
  }
}

absl::Status Plan::RunNode(int i, std::vector<SavedMemory>& saved_in) {
  const Device& device = graph_.device;
  const GraphNode& n = graph_.nodes[i];
  Prepared& p = prepared_[i];
  for (const auto* refs : {&n.inputs, &n.outputs}) {
    for (const ValueRef& v : *refs) {
      if (graph_.slots[v.slot].kind == StorageSlot::Kind::kInternal &&
          slots_[v.slot].run == nullptr && !kept_->Absent(v.slot)) {
        MIXRT_RETURN_IF_ERROR(Allocate(v.slot));
      }
    }
  }
  auto place = [&](const ValueRef& v, MixrtTensorDesc* d) {
    d->data = slots_[v.slot].base == nullptr
                  ? nullptr
                  : slots_[v.slot].base +
                        v.offset * static_cast<int64_t>(DTypeSize(v.dtype));
  };
  for (size_t k = 0; k < n.inputs.size(); ++k) place(n.inputs[k], &p.inputs[k]);
  for (size_t k = 0; k < n.outputs.size(); ++k)
    place(n.outputs[k], &p.outputs[k]);
  absl::Status status;
  if (kept_->IsKeptLaunch(i)) {
    status = kept_->RunIfDue(i, [&] {
      return device.backend()->Launch(
          device.index(), n.op, p.inputs, p.outputs,
          n.attrs.empty() ? nullptr : n.attrs.data());
    });
  } else if (n.kind == GraphNode::Kind::kFused) {
    const FusedGroup& f = *n.fused;
    MIXRT_RETURN_IF_ERROR(kept_->TellWeightVersions(i));
    p.value_data.resize(f.num_values, nullptr);
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      p.value_data[f.input_values[k]] = p.inputs[k].data;
    }
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      p.value_data[f.output_values[k]] = p.outputs[k].data;
    }
    status = f.kernel->Run(p.value_data, {});
  } else if (n.kind == GraphNode::Kind::kHostWrite) {
    status = device.backend()->Copy(device.index(), MIXRT_COPY_HOST_TO_DEVICE,
                                    p.outputs[0].data, n.host_bytes.data(),
                                    n.host_bytes.size());
  } else if (n.kind == GraphNode::Kind::kHostRead) {
    status = CheckHostRead(i, n, p);
  } else if (n.random()) {
    status = LaunchRandom(n, p);
  } else {
    status =
        device.backend()->Launch(device.index(), n.op, p.inputs, p.outputs,
                                 n.attrs.empty() ? nullptr : n.attrs.data());
  }
  AfterNode(i, saved_in);
  return NodeError(i, "", status);
}

absl::Status HostValueChanged(int node) {
  absl::Status s = absl::AbortedError(
      absl::StrCat("compiled graph: the host read at node ", node,
                   " found another value than the trace read"));
  s.SetPayload(kHostValueChangedPayload, absl::Cord("1"));
  return s;
}

bool IsHostValueChanged(const absl::Status& status) {
  return status.GetPayload(kHostValueChangedPayload).has_value();
}

absl::Status Plan::CheckHostRead(int i, const GraphNode& n, const Prepared& p) {
  host_read_.resize(n.host_bytes.size());
  const Device& device = graph_.device;
  MIXRT_RETURN_IF_ERROR(device.backend()->Copy(
      device.index(), MIXRT_COPY_DEVICE_TO_HOST, host_read_.data(),
      p.inputs[0].data, host_read_.size()));
  if (host_read_ != n.host_bytes) return HostValueChanged(i);
  return absl::OkStatus();
}

absl::Status Plan::LaunchRandom(const GraphNode& n, const Prepared& p) {
  const std::optional<RandomFields> fields = RandomFieldsOf(n.op, n.attrs);
  if (run_random_ == nullptr || !fields.has_value() ||
      n.random_source >= static_cast<int>(run_random_->size())) {
    return absl::InternalError(
        "a random node ran without the generator state its call drew");
  }
  const Draw& drawn = (*run_random_)[n.random_source];
  random_attrs_ = n.attrs;
  WriteField(&random_attrs_, fields->seed_at, drawn.seed);
  WriteField(&random_attrs_, fields->offset_at,
             drawn.offset + static_cast<uint64_t>(n.random_offset));
  const Device& device = graph_.device;
  return device.backend()->Launch(device.index(), n.op, p.inputs, p.outputs,
                                  random_attrs_.data());
}

// As eager launches are timed (kernel_launch.cc), under "compiled ..." so
// one table shows where a compiled step goes beside the eager ops.
absl::Status Plan::ProfiledRunNode(int i, std::vector<SavedMemory>& saved_in) {
  const GraphNode& n = graph_.nodes[i];
  const auto start = std::chrono::steady_clock::now();
  MIXRT_RETURN_IF_ERROR(RunNode(i, saved_in));
  MIXRT_RETURN_IF_ERROR(
      graph_.device.backend()->Synchronize(graph_.device.index()));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  std::string name;
  if (n.kind == GraphNode::Kind::kFused) {
    name = absl::StrCat("compiled fused: ", n.fused->kernel->description());
  } else if (n.kind == GraphNode::Kind::kHostWrite) {
    name = "compiled host_write";
  } else if (n.kind == GraphNode::Kind::kHostRead) {
    name = "compiled host_read";
  } else {
    name = absl::StrCat(
        "compiled ", MixrtOpName(n.op), " ",
        n.inputs.empty() ? "-" : DTypeName(n.inputs[0].dtype), " -> ",
        n.outputs.empty() ? "-" : DTypeName(n.outputs[0].dtype));
  }
  RecordOpTime(name, seconds);
  return absl::OkStatus();
}

absl::Status Plan::NodeError(int node, absl::string_view where,
                             const absl::Status& status) const {
  if (status.ok() || IsHostValueChanged(status)) return status;
  const GraphNode& n = graph_.nodes[node];
  return absl::Status(
      status.code(),
      absl::StrCat("compiled graph node ", node, " (",
                   n.kind == GraphNode::Kind::kHostWrite  ? "host_write"
                   : n.kind == GraphNode::Kind::kHostRead ? "host_read"
                   : n.kind == GraphNode::Kind::kFused
                       ? absl::StrCat("fused: ", n.fused->kernel->description())
                       : std::string(MixrtOpName(n.op)),
                   where, "): ", status.message()));
}

absl::Status Plan::RunSegment(int s, std::vector<SavedMemory>& saved_in) {
  Segment& segment = segments_[s];
  for (int slot : segment.internal_slots) {
    if (slots_[slot].run == nullptr && !kept_->Absent(slot))
      MIXRT_RETURN_IF_ERROR(Allocate(slot));
  }
  // A kernel graph takes no null buffer: a released slot, which its
  // readers promised not to read, gets an address that holds nothing.
  alignas(64) static char released_placeholder[64];
  for (size_t slot = 0; slot < slots_.size(); ++slot) {
    graph_buffers_[slot] = kept_->Absent(static_cast<int>(slot))
                               ? released_placeholder
                               : slots_[slot].base;
  }
  for (int pos = segment.first; pos <= segment.last; ++pos) {
    MIXRT_RETURN_IF_ERROR(kept_->TellWeightVersions(order_[pos]));
  }
  int failed_step = -1;
  const absl::Status status = segment.graph->Run(graph_buffers_, &failed_step);
  for (int pos = segment.first; pos <= segment.last; ++pos) {
    AfterNode(order_[pos], saved_in);
  }
  if (status.ok()) return status;
  // The plugin says which step failed (failed_step, ABI 1.1): name the
  // graph node it came from, else the segment's first.
  int node = order_[segment.first];
  if (failed_step >= 0 && failed_step <= segment.last - segment.first) {
    node = order_[segment.first + failed_step];
  }
  return NodeError(node, ", in a kernel graph", status);
}

// Fused kernels may keep what they prepared from a weight (a packed copy)
// while its version stands: each hears of a new version right before it
// runs (after the kept launches before it, which may have just recomputed
// a weight's bf16 copy), in either way of running (node by node, kernel
// graphs).
absl::StatusOr<std::vector<Tensor>> Plan::Run(
    absl::Span<const Tensor> inputs, std::vector<SavedMemory> saved_in,
    std::vector<SavedMemory>* saved_out, const RandomBase* random) {
  std::lock_guard<std::mutex> lock(held_->mutex());
  run_inputs_ = inputs;
  run_random_ = random;
  for (size_t s = 0; s < graph_.slots.size(); ++s) {
    MIXRT_RETURN_IF_ERROR(BindSlot(static_cast<int>(s), inputs, saved_in));
  }
  if (absl::Status ran = RunInOrder(saved_in); !ran.ok()) {
    // A run stopped part way (a host read that found another value, a
    // failed launch) holds none of its memory after.
    for (SlotState& slot : slots_) {
      if (slot.buffer < 0) slot.run.reset();
    }
    return ran;
  }
  std::vector<Tensor> results = Results(inputs);
  if (saved_out != nullptr) *saved_out = SavedActivations(inputs);
  kept_->ReleaseCopiedWeights();
  // This run's memory goes back (a returned slot lives on in its results).
  for (SlotState& slot : slots_) {
    if (slot.buffer < 0) slot.run.reset();
  }
  return results;
}

absl::Status Plan::BindSlot(int s, absl::Span<const Tensor> inputs,
                            const std::vector<SavedMemory>& saved_in) {
  const Device& device = graph_.device;
  const StorageSlot& slot = graph_.slots[s];
  switch (slot.kind) {
    case StorageSlot::Kind::kInput:
      if (slot.input >= static_cast<int>(inputs.size())) {
        return absl::InvalidArgumentError(
            absl::StrCat("compiled graph: expected at least ", slot.input + 1,
                         " inputs, got ", inputs.size()));
      }
      slots_[s].base = static_cast<char*>(
          const_cast<void*>(inputs[slot.input].const_data_ptr()));
      if (inputs[slot.input].defined()) {
        const Tensor& in = inputs[slot.input];
        MIXRT_RETURN_IF_ERROR(CheckExtent(
            s, in.storage()->bytes() -
                   static_cast<uint64_t>(in.offset()) * DTypeSize(in.dtype())));
      }
      return absl::OkStatus();
    case StorageSlot::Kind::kConstant:
      // Held for this run; the caller (CompiledFunction) checked that
      // every constant is still there and holds them too.
      slots_[s].run = slot.constant.lock();
      if (slots_[s].run == nullptr) {
        return absl::FailedPreconditionError(
            absl::StrCat("compiled graph: constant ", s,
                         " is gone (nothing else holds it)"));
      }
      slots_[s].base = static_cast<char*>(slots_[s].run->data());
      MIXRT_RETURN_IF_ERROR(CheckExtent(s, slots_[s].run->bytes()));
      return absl::OkStatus();
    case StorageSlot::Kind::kSaved:
      if (slot.forward_slot >= static_cast<int>(saved_in.size()) ||
          saved_in[slot.forward_slot].storage == nullptr) {
        return absl::FailedPreconditionError(
            "compiled backward: the forward's saved activations are gone "
            "(a second backward needs retain_graph=true)");
      }
      slots_[s].run = saved_in[slot.forward_slot].storage;
      slots_[s].base = saved_in[slot.forward_slot].base;
      return absl::OkStatus();
    case StorageSlot::Kind::kInternal:
      // Memory from the allocator comes at the slot's first node.
      slots_[s].run.reset();  // What a failed run may have left.
      if (kept_->IsKept(s)) {
        // Null when released and not due: the kernels reading it have
        // their own copies; nothing reads this slot this run.
        MIXRT_RETURN_IF_ERROR(kept_->Bind(s, device, &slots_[s].run));
        slots_[s].base = slots_[s].run == nullptr
                             ? nullptr
                             : static_cast<char*>(slots_[s].run->data());
      } else if (slots_[s].buffer >= 0) {
        slots_[s].run = held_->buffer(slots_[s].buffer);
        slots_[s].base = static_cast<char*>(slots_[s].run->data());
      } else if (slots_[s].first_use < 0 && !Temporary(s)) {
        // Never launched on (a result allocated and returned as is).
        MIXRT_RETURN_IF_ERROR(Allocate(s));
      }
      return absl::OkStatus();
  }
  return absl::OkStatus();  // Not reached: every kind returns.
}

absl::Status Plan::RunInOrder(std::vector<SavedMemory>& saved_in) {
  for (size_t pos = 0; pos < order_.size();) {
    if (const int segment = segment_at_[pos]; segment >= 0) {
      MIXRT_RETURN_IF_ERROR(RunSegment(segment, saved_in));
      pos = segments_[segment].last + 1;
    } else if (OpProfileEnabled()) {
      MIXRT_RETURN_IF_ERROR(ProfiledRunNode(order_[pos], saved_in));
      ++pos;
    } else {
      MIXRT_RETURN_IF_ERROR(RunNode(order_[pos], saved_in));
      ++pos;
    }
  }
  return absl::OkStatus();
}

std::vector<Tensor> Plan::Results(absl::Span<const Tensor> inputs) const {
  std::vector<Tensor> results;
  for (const ValueRef& v : graph_.outputs) {
    const StorageSlot& slot = graph_.slots[v.slot];
    if (slot.kind == StorageSlot::Kind::kInput) {
      const Tensor& in = inputs[slot.input];
      results.emplace_back(in.storage(), v.dtype, v.shape, v.strides,
                           in.offset() + v.offset);
    } else if (slot.kind == StorageSlot::Kind::kSaved) {
      const int64_t base_offset =
          (slots_[v.slot].base -
           static_cast<char*>(slots_[v.slot].run->data())) /
          static_cast<int64_t>(DTypeSize(v.dtype));
      results.emplace_back(slots_[v.slot].run, v.dtype, v.shape, v.strides,
                           base_offset + v.offset);
    } else {
      results.emplace_back(slots_[v.slot].run, v.dtype, v.shape, v.strides,
                           v.offset);
    }
  }
  return results;
}

std::vector<SavedMemory> Plan::SavedActivations(
    absl::Span<const Tensor> inputs) const {
  std::vector<SavedMemory> saved(graph_.slots.size(), SavedMemory{});
  for (size_t s = 0; s < graph_.slots.size(); ++s) {
    const StorageSlot& slot = graph_.slots[s];
    if (!slot.saved) continue;
    if (slot.kind == StorageSlot::Kind::kInput) {
      // The backward addresses saved memory by storage offset (capture's
      // Value: t.offset() for a saved slot), so its base is the storage's
      // start, not the input's first element: an input that is a view at
      // an offset (a batch shard x[8:16]) was read that many elements too
      // far, past its storage, and gave garbage weight gradients.
      const Tensor& in = inputs[slot.input];
      saved[s] = {
          in.storage(),
          slots_[s].base - static_cast<int64_t>(in.offset()) *
                               static_cast<int64_t>(DTypeSize(in.dtype()))};
      continue;
    }
    saved[s] = {slots_[s].run, slots_[s].base};
  }
  return saved;
}

}  // namespace mixrt::compiler
