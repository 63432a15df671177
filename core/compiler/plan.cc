#include "core/compiler/plan.h"

#include "absl/strings/str_cat.h"
#include "mixrt/op_names.h"
#include "mixrt/status_macros.h"

namespace mixrt::compiler {
namespace {

MixrtTensorDesc Describe(const ValueRef& v) {
  MixrtTensorDesc d{};
  d.struct_size = sizeof(d);
  d.dtype = ToAbi(v.dtype);
  d.ndim = static_cast<int32_t>(v.shape.size());
  d.shape = v.shape.data();
  d.strides = v.strides.data();
  return d;
}

}  // namespace

Plan::Plan(Graph graph) : graph_(std::move(graph)) {}

absl::StatusOr<std::unique_ptr<Plan>> Plan::Build(Graph graph,
                                                  bool preallocate) {
  std::unique_ptr<Plan> plan(new Plan(std::move(graph)));
  const size_t slots = plan->graph_.slots.size();
  plan->held_.resize(slots);
  plan->run_.resize(slots);
  plan->bases_.resize(slots, nullptr);
  for (const GraphNode& n : plan->graph_.nodes) {
    Prepared p;
    for (const ValueRef& v : n.inputs) p.inputs.push_back(Describe(v));
    for (const ValueRef& v : n.outputs) p.outputs.push_back(Describe(v));
    plan->prepared_.push_back(std::move(p));
  }
  if (preallocate) {
    for (size_t s = 0; s < slots; ++s) {
      const StorageSlot& slot = plan->graph_.slots[s];
      if (slot.kind == StorageSlot::Kind::kInternal && !slot.returned &&
          !slot.saved) {
        MIXRT_ASSIGN_OR_RETURN(
            plan->held_[s],
            Storage::Allocate(plan->graph_.device, slot.bytes));
      }
    }
  }
  return plan;
}

uint64_t Plan::held_bytes() const {
  uint64_t total = 0;
  for (const auto& s : held_) total += s ? s->bytes() : 0;
  return total;
}

absl::Status Plan::Allocate(int slot) {
  MIXRT_ASSIGN_OR_RETURN(
      run_[slot],
      Storage::Allocate(graph_.device, graph_.slots[slot].bytes));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Tensor>> Plan::Run(
    absl::Span<const Tensor> inputs,
    absl::Span<const SavedMemory> saved_in,
    std::vector<SavedMemory>* saved_out) {
  std::lock_guard<std::mutex> lock(mutex_);
  const Device& device = graph_.device;
  for (size_t s = 0; s < graph_.slots.size(); ++s) {
    const StorageSlot& slot = graph_.slots[s];
    switch (slot.kind) {
      case StorageSlot::Kind::kInput:
        if (slot.input >= static_cast<int>(inputs.size())) {
          return absl::InvalidArgumentError(absl::StrCat(
              "compiled graph: expected at least ", slot.input + 1,
              " inputs, got ", inputs.size()));
        }
        bases_[s] = static_cast<char*>(inputs[slot.input].data_ptr());
        break;
      case StorageSlot::Kind::kConstant:
        bases_[s] = static_cast<char*>(slot.constant->data());
        break;
      case StorageSlot::Kind::kSaved:
        if (slot.forward_slot >= static_cast<int>(saved_in.size()) ||
            saved_in[slot.forward_slot].storage == nullptr) {
          return absl::FailedPreconditionError(
              "compiled backward: the forward's saved activations are gone "
              "(a second backward needs retain_graph=true)");
        }
        run_[s] = saved_in[slot.forward_slot].storage;
        bases_[s] = saved_in[slot.forward_slot].base;
        break;
      case StorageSlot::Kind::kInternal:
        if (held_[s] != nullptr) {
          run_[s] = held_[s];
        } else {
          MIXRT_RETURN_IF_ERROR(Allocate(static_cast<int>(s)));
        }
        bases_[s] = static_cast<char*>(run_[s]->data());
        break;
    }
  }
  auto place = [&](const ValueRef& v, MixrtTensorDesc* d) {
    d->data = bases_[v.slot] + v.offset * static_cast<int64_t>(DTypeSize(v.dtype));
  };
  for (size_t i = 0; i < graph_.nodes.size(); ++i) {
    const GraphNode& n = graph_.nodes[i];
    Prepared& p = prepared_[i];
    for (size_t k = 0; k < n.inputs.size(); ++k) place(n.inputs[k], &p.inputs[k]);
    for (size_t k = 0; k < n.outputs.size(); ++k) place(n.outputs[k], &p.outputs[k]);
    absl::Status status;
    if (n.kind == GraphNode::Kind::kHostWrite) {
      status = device.backend()->Copy(device.index(), MIXRT_COPY_HOST_TO_DEVICE,
                                      p.outputs[0].data, n.host_bytes.data(),
                                      n.host_bytes.size());
    } else {
      status = device.backend()->Launch(device.index(), n.op, p.inputs,
                                        p.outputs,
                                        n.attrs.empty() ? nullptr : n.attrs.data());
    }
    if (!status.ok()) {
      return absl::Status(
          status.code(),
          absl::StrCat("compiled graph node ", i, " (",
                       n.kind == GraphNode::Kind::kHostWrite ? "host_write"
                                                        : MixrtOpName(n.op),
                       "): ", status.message()));
    }
  }
  std::vector<Tensor> results;
  for (const ValueRef& v : graph_.outputs) {
    const StorageSlot& slot = graph_.slots[v.slot];
    if (slot.kind == StorageSlot::Kind::kInput) {
      const Tensor& in = inputs[slot.input];
      results.emplace_back(in.storage(), v.dtype, v.shape, v.strides,
                           in.offset() + v.offset);
    } else if (slot.kind == StorageSlot::Kind::kSaved) {
      const int64_t base_offset =
          (bases_[v.slot] - static_cast<char*>(run_[v.slot]->data())) /
          static_cast<int64_t>(DTypeSize(v.dtype));
      results.emplace_back(run_[v.slot], v.dtype, v.shape, v.strides,
                           base_offset + v.offset);
    } else {
      results.emplace_back(slot.kind == StorageSlot::Kind::kConstant
                               ? slot.constant
                               : run_[v.slot],
                           v.dtype, v.shape, v.strides, v.offset);
    }
  }
  if (saved_out != nullptr) {
    saved_out->assign(graph_.slots.size(), SavedMemory{});
    for (size_t s = 0; s < graph_.slots.size(); ++s) {
      const StorageSlot& slot = graph_.slots[s];
      if (!slot.saved) continue;
      (*saved_out)[s] = {slot.kind == StorageSlot::Kind::kInput
                             ? inputs[slot.input].storage()
                             : run_[s],
                         bases_[s]};
    }
  }
  // This run's memory goes back (a returned slot lives on in its results).
  for (size_t s = 0; s < run_.size(); ++s) {
    if (held_[s] == nullptr) run_[s].reset();
  }
  return results;
}

}  // namespace mixrt::compiler
