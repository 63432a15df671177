// The out-of-process plugin's fusion and kernel graphs
// (plugin_host_process.h).
#include <algorithm>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/plugin/isolation/fusion_graph_codec.h"
#include "core/plugin/isolation/kernel_graph_codec.h"
#include "core/plugin/plugin_host_process.h"

namespace mixrt::isolation {

// ---------------------------------------------------------------------------
// Fusion: the graph travels to the plugin for claim and compile; a kernel is
// the plugin's handle, run with the values' places.

MixrtError* PluginHostProcess::FusionClaim(MixrtFusion_Claim_Args* a) {
  std::lock_guard<std::mutex> lock(call_mu_);
  MessageWriter w(block_->payload);
  w.Put(a->device);
  if (!isolation::WriteFusionGraph(*a->graph, w)) {
    return MakeError(MIXRT_ERROR_CODE_UNIMPLEMENTED,
                     "fusion_claim: the graph does not fit the channel to the "
                     "plugin's process");
  }
  std::optional<MessageReader> r;
  if (MixrtError* e = Exchange(Call::kFusionClaim, w, "fusion_claim",
                               options_.call_timeout, &r)) {
    return e;
  }
  if (!r->Get(&a->num_groups) ||
      !r->GetBytes(a->group_of_node,
                   sizeof(int32_t) * std::max(0, a->graph->num_nodes))) {
    return ProtocolBreak("malformed fusion_claim");
  }
  return nullptr;
}

MixrtError* PluginHostProcess::FusionCompile(MixrtFusion_Compile_Args* a) {
  std::lock_guard<std::mutex> lock(call_mu_);
  MessageWriter w(block_->payload);
  w.Put(a->device);
  if (!isolation::WriteFusionGraph(*a->graph, w) ||
      !w.PutBytes(a->group_of_node,
                  sizeof(int32_t) * std::max(0, a->graph->num_nodes)) ||
      !w.Put(a->group)) {
    return MakeError(MIXRT_ERROR_CODE_UNIMPLEMENTED,
                     "fusion_compile: the graph does not fit the channel to "
                     "the plugin's process");
  }
  std::optional<MessageReader> r;
  if (MixrtError* e = Exchange(Call::kFusionCompile, w, "fusion_compile",
                               options_.call_timeout, &r)) {
    return e;
  }
  uint64_t kernel = 0, scratch_bytes = 0;
  std::string description;
  if (!r->Get(&kernel) || !r->GetString(&description) ||
      !r->Get(&scratch_bytes)) {
    return ProtocolBreak("malformed fusion_compile");
  }
  a->kernel = nullptr;
  if (kernel != 0) {
    MixrtError* refused = nullptr;
    const uint64_t handle =
        AdoptHandle(kernel, kernels_, "fusion_compile: kernel", &refused);
    if (handle == 0) return refused;
    kernels_[handle] = KernelInfo{kernel, a->device, a->graph->num_values,
                                  a->graph->num_symbols, absl::ZeroDuration()};
    a->kernel = reinterpret_cast<MixrtFusedKernel*>(handle);
  }
  a->description = Keep(std::move(description));
  if (MIXRT_STRUCT_HAS(a, MixrtFusion_Compile_Args, scratch_bytes)) {
    a->scratch_bytes = scratch_bytes;
  }
  return nullptr;
}

template <typename Info>
uint64_t PluginHostProcess::AdoptHandle(uint64_t plugin_handle,
                                        const std::map<uint64_t, Info>& live,
                                        const char* what, MixrtError** error) {
  if (std::any_of(live.begin(), live.end(), [&](const auto& entry) {
        return entry.second.plugin_handle == plugin_handle;
      })) {
    *error = MakeError(
        MIXRT_ERROR_CODE_INTERNAL,
        absl::StrCat(what, ": the plugin answered with handle 0x",
                     absl::Hex(plugin_handle),
                     ", which one it made earlier still holds; refused"));
    return 0;
  }
  return ++next_handle_;
}

MixrtError* PluginHostProcess::FusedRun(MixrtFusedKernel_Run_Args* a) {
  std::lock_guard<std::mutex> lock(call_mu_);
  const uint64_t handle = reinterpret_cast<uint64_t>(a->kernel);
  auto it = kernels_.find(handle);
  if (it == kernels_.end()) {
    return MakeError(MIXRT_ERROR_CODE_INVALID_ARGUMENT,
                     "fused_kernel_run: not a kernel this plugin compiled");
  }
  KernelInfo& kernel = it->second;
  MessageWriter w(block_->payload);
  w.Put(kernel.plugin_handle);
  if (MixrtError* e = PutPlaces(kernel.device, a->value_data, kernel.num_values,
                                "fused_kernel_run: value", w)) {
    return e;
  }
  w.Put(kernel.num_symbols);
  if (kernel.num_symbols > 0) {
    w.PutBytes(a->symbol_sizes, sizeof(int64_t) * kernel.num_symbols);
  }
  const absl::Duration spin = SpinFor(kernel.last_run);
  ++launches_;
  std::optional<MessageReader> r;
  const absl::Time start = absl::Now();
  MixrtError* error = Exchange(Call::kFusedRun, w, "a fused kernel",
                               options_.call_timeout, &r, spin, launches_);
  kernel.last_run = absl::Now() - start;
  return error;
}

void PluginHostProcess::FusedDestroy(MixrtFusedKernel_Destroy_Args* a) {
  if (a->kernel == nullptr) return;
  std::lock_guard<std::mutex> lock(call_mu_);
  auto it = kernels_.find(reinterpret_cast<uint64_t>(a->kernel));
  if (it == kernels_.end()) return;
  const uint64_t plugin_handle = it->second.plugin_handle;
  kernels_.erase(it);
  if (failed_.load(std::memory_order_acquire)) return;
  MessageWriter w(block_->payload);
  w.Put(plugin_handle);
  std::optional<MessageReader> r;
  if (MixrtError* e = Exchange(Call::kFusedDestroy, w, "fused_kernel_destroy",
                               options_.call_timeout, &r)) {
    delete reinterpret_cast<ProxyError*>(e);
  }
}

MixrtError* PluginHostProcess::FusedSetWeightVersion(
    MixrtFusedKernel_SetWeightVersion_Args* a) {
  uint64_t plugin_handle = 0;
  {
    std::lock_guard<std::mutex> lock(call_mu_);
    auto it = kernels_.find(reinterpret_cast<uint64_t>(a->kernel));
    if (it == kernels_.end()) {
      return MakeError(MIXRT_ERROR_CODE_INVALID_ARGUMENT,
                       "fused_kernel_set_weight_version: not a kernel this "
                       "plugin compiled");
    }
    plugin_handle = it->second.plugin_handle;
  }
  return Ask(
      Call::kFusedSetWeightVersion, "fused_kernel_set_weight_version",
      [&](MessageWriter& w) {
        w.Put(plugin_handle);
        w.Put(a->value);
        w.Put(a->version);
      },
      [&](MessageReader& r) {
        uint32_t keeps_copy = 0;
        if (!r.Get(&keeps_copy)) return false;
        if (MIXRT_STRUCT_HAS(a, MixrtFusedKernel_SetWeightVersion_Args,
                             keeps_copy)) {
          a->keeps_copy = keeps_copy;
        }
        return true;
      });
}

MixrtError* PluginHostProcess::FusedSetScratch(
    MixrtFusedKernel_SetScratch_Args* a) {
  std::lock_guard<std::mutex> lock(call_mu_);
  const uint64_t handle = reinterpret_cast<uint64_t>(a->kernel);
  auto it = kernels_.find(handle);
  WireRef scratch;
  if (it == kernels_.end() ||
      !RefFor(it->second.device, a->scratch, &scratch)) {
    return MakeError(MIXRT_ERROR_CODE_INVALID_ARGUMENT,
                     "fused_kernel_set_scratch: unknown kernel, or scratch "
                     "memory not from this device");
  }
  MessageWriter w(block_->payload);
  w.Put(it->second.plugin_handle);
  w.Put(scratch);
  w.Put(a->bytes);
  std::optional<MessageReader> r;
  return Exchange(Call::kFusedSetScratch, w, "fused_kernel_set_scratch",
                  options_.call_timeout, &r);
}

// ---------------------------------------------------------------------------
// Kernel graphs: the steps travel once; a run sends the buffers' places.

MixrtError* PluginHostProcess::GraphCreate(MixrtKernelGraph_Create_Args* a) {
  std::lock_guard<std::mutex> lock(call_mu_);
  MessageWriter w(block_->payload);
  w.Put(a->device);
  w.Put(a->num_buffers);
  // A step's fused kernel is a handle this side gave; the plugin gets its
  // own back.
  for (int32_t i = 0; i < a->num_steps; ++i) {
    const MixrtKernelGraphStep& s = a->steps[i];
    if (MIXRT_STRUCT_HAS(&s, MixrtKernelGraphStep, fused_values) &&
        s.fused_kernel != nullptr &&
        kernels_.count(reinterpret_cast<uint64_t>(s.fused_kernel)) == 0) {
      return MakeError(MIXRT_ERROR_CODE_INVALID_ARGUMENT,
                       absl::StrCat("kernel_graph_create: step ", i,
                                    " runs a fused kernel this plugin did "
                                    "not compile"));
    }
  }
  const auto plugin_kernel = [this](const MixrtFusedKernel* k) {
    return kernels_.at(reinterpret_cast<uint64_t>(k)).plugin_handle;
  };
  if (!isolation::WriteKernelGraphSteps(a->steps, a->num_steps, plugin_kernel,
                                        w)) {
    return MakeError(MIXRT_ERROR_CODE_UNIMPLEMENTED,
                     "kernel_graph_create: the steps do not fit the channel "
                     "to the plugin's process");
  }
  std::optional<MessageReader> r;
  if (MixrtError* e = Exchange(Call::kGraphCreate, w, "kernel_graph_create",
                               options_.call_timeout, &r)) {
    return e;
  }
  uint64_t graph = 0;
  if (!r->Get(&graph)) return ProtocolBreak("malformed kernel_graph_create");
  a->graph = nullptr;
  if (graph != 0) {
    MixrtError* refused = nullptr;
    const uint64_t handle =
        AdoptHandle(graph, graphs_, "kernel_graph_create: graph", &refused);
    if (handle == 0) return refused;
    graphs_[handle] =
        GraphInfo{graph, a->device, a->num_buffers, absl::ZeroDuration()};
    a->graph = reinterpret_cast<MixrtKernelGraph*>(handle);
  }
  return nullptr;
}

MixrtError* PluginHostProcess::GraphRun(MixrtKernelGraph_Run_Args* a) {
  std::lock_guard<std::mutex> lock(call_mu_);
  const uint64_t handle = reinterpret_cast<uint64_t>(a->graph);
  auto it = graphs_.find(handle);
  if (it == graphs_.end()) {
    return MakeError(MIXRT_ERROR_CODE_INVALID_ARGUMENT,
                     "kernel_graph_run: not a graph this plugin made");
  }
  GraphInfo& graph = it->second;
  MessageWriter w(block_->payload);
  w.Put(graph.plugin_handle);
  if (MixrtError* e = PutPlaces(graph.device, a->buffers, graph.num_buffers,
                                "kernel_graph_run: buffer", w)) {
    return e;
  }
  const absl::Duration spin = SpinFor(graph.last_run);
  ++launches_;
  std::optional<MessageReader> r;
  const absl::Time start = absl::Now();
  MixrtError* error = Exchange(Call::kGraphRun, w, "a kernel graph",
                               options_.call_timeout, &r, spin, launches_);
  graph.last_run = absl::Now() - start;
  int32_t failed_step = -1;
  if (r.has_value() && r->Get(&failed_step) &&
      MIXRT_STRUCT_HAS(a, MixrtKernelGraph_Run_Args, failed_step)) {
    a->failed_step = failed_step;
  }
  return error;
}

void PluginHostProcess::GraphDestroy(MixrtKernelGraph_Destroy_Args* a) {
  if (a->graph == nullptr) return;
  std::lock_guard<std::mutex> lock(call_mu_);
  auto it = graphs_.find(reinterpret_cast<uint64_t>(a->graph));
  if (it == graphs_.end()) return;
  const uint64_t plugin_handle = it->second.plugin_handle;
  graphs_.erase(it);
  if (failed_.load(std::memory_order_acquire)) return;
  MessageWriter w(block_->payload);
  w.Put(plugin_handle);
  std::optional<MessageReader> r;
  if (MixrtError* e = Exchange(Call::kGraphDestroy, w, "kernel_graph_destroy",
                               options_.call_timeout, &r)) {
    delete reinterpret_cast<ProxyError*>(e);
  }
}

}  // namespace mixrt::isolation
