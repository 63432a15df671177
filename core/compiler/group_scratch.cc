#include "core/compiler/group_scratch.h"

#include <algorithm>

#include "absl/status/statusor.h"
#include "mixrt/status_macros.h"

namespace mixrt::compiler {

absl::StatusOr<GroupScratch> GroupScratch::Create(
    const Graph& g, const std::vector<int>& nodes,
    const std::vector<ValueRef>& value_refs, const std::vector<int>& values) {
  GroupScratch s;
  s.g_ = &g;
  s.nodes_ = nodes;
  const Device& device = g.device;
  // Bytes each touched slot needs: its views' furthest element.
  std::map<int, int64_t> bytes;
  auto need = [&bytes](const ValueRef& v) {
    int64_t last = v.offset;
    for (size_t d = 0; d < v.shape.size(); ++d) {
      if (v.shape[d] == 0) return;
      last += (v.shape[d] - 1) * std::max<int64_t>(v.strides[d], 0);
    }
    const int64_t b = (last + 1) * static_cast<int64_t>(DTypeSize(v.dtype));
    bytes[v.slot] = std::max(bytes[v.slot], b);
  };
  for (int i : nodes) {
    for (const ValueRef& v : g.nodes[i].inputs) need(v);
    for (const ValueRef& v : g.nodes[i].outputs) need(v);
  }
  for (int v : values) need(value_refs[v]);
  for (const auto& [slot, size] : bytes) {
    if (g.slots[slot].kind == StorageSlot::Kind::kConstant) {
      std::shared_ptr<Storage> constant = g.slots[slot].constant.lock();
      if (constant == nullptr) {
        return absl::FailedPreconditionError("a constant of the graph is gone");
      }
      s.base_[slot] = static_cast<char*>(constant->data());
      s.held_.push_back(std::move(constant));
      continue;
    }
    MIXRT_ASSIGN_OR_RETURN(std::shared_ptr<Storage> mem,
                           Storage::Allocate(device, size));
    const std::vector<char> zeros(size, 0);
    MIXRT_RETURN_IF_ERROR(
        device.backend()->Copy(device.index(), MIXRT_COPY_HOST_TO_DEVICE,
                               mem->data(), zeros.data(), zeros.size()));
    s.base_[slot] = static_cast<char*>(mem->data());
    s.held_.push_back(std::move(mem));
  }
  s.ins_.resize(nodes.size());
  s.outs_.resize(nodes.size());
  for (size_t k = 0; k < nodes.size(); ++k) {
    for (const ValueRef& v : g.nodes[nodes[k]].inputs) {
      s.ins_[k].push_back(Describe(v));
      s.ins_[k].back().data = s.Place(v);
    }
    for (const ValueRef& v : g.nodes[nodes[k]].outputs) {
      s.outs_[k].push_back(Describe(v));
      s.outs_[k].back().data = s.Place(v);
    }
  }
  s.value_data_.assign(value_refs.size(), nullptr);
  for (int v : values) s.value_data_[v] = s.Place(value_refs[v]);
  return s;
}

void* GroupScratch::Place(const ValueRef& v) const {
  return base_.at(v.slot) + v.offset * static_cast<int64_t>(DTypeSize(v.dtype));
}

absl::Status GroupScratch::RunLaunches() const {
  const Device& device = g_->device;
  for (size_t k = 0; k < nodes_.size(); ++k) {
    const GraphNode& n = g_->nodes[nodes_[k]];
    MIXRT_RETURN_IF_ERROR(
        device.backend()->Launch(device.index(), n.op, ins_[k], outs_[k],
                                 n.attrs.empty() ? nullptr : n.attrs.data()));
  }
  return absl::OkStatus();
}

absl::Status GroupScratch::RunKernel(const PluginFusedKernel& kernel) const {
  return kernel.Run(value_data_, {});
}

bool GroupScratch::IsConstant(const ValueRef& v) const {
  return g_->slots[v.slot].kind == StorageSlot::Kind::kConstant;
}

absl::Status GroupScratch::Fill(const ValueRef& v,
                                const std::vector<char>& bytes) const {
  const Device& device = g_->device;
  return device.backend()->Copy(device.index(), MIXRT_COPY_HOST_TO_DEVICE,
                                Place(v), bytes.data(), bytes.size());
}

absl::StatusOr<std::vector<char>> GroupScratch::Read(const ValueRef& v) const {
  const Device& device = g_->device;
  std::vector<char> bytes(Elements(v) * DTypeSize(v.dtype));
  MIXRT_RETURN_IF_ERROR(device.backend()->Synchronize(device.index()));
  MIXRT_RETURN_IF_ERROR(
      device.backend()->Copy(device.index(), MIXRT_COPY_DEVICE_TO_HOST,
                             bytes.data(), Place(v), bytes.size()));
  return bytes;
}

}  // namespace mixrt::compiler
