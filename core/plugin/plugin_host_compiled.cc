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
    return MakeError(MIXRT_ERROR_CODE_INTERNAL, "malformed fusion_claim");
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
    return MakeError(MIXRT_ERROR_CODE_INTERNAL, "malformed fusion_compile");
  }
  a->kernel = reinterpret_cast<MixrtFusedKernel*>(kernel);
  a->description = Keep(std::move(description));
  if (MIXRT_STRUCT_HAS(a, MixrtFusion_Compile_Args, scratch_bytes)) {
    a->scratch_bytes = scratch_bytes;
  }
  if (kernel != 0) {
    kernels_[kernel] = KernelInfo{a->device, a->graph->num_values,
                                  a->graph->num_symbols, absl::ZeroDuration()};
  }
  return nullptr;
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
  w.Put(handle);
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
  const uint64_t handle = reinterpret_cast<uint64_t>(a->kernel);
  kernels_.erase(handle);
  if (failed_.load(std::memory_order_acquire)) return;
  MessageWriter w(block_->payload);
  w.Put(handle);
  std::optional<MessageReader> r;
  if (MixrtError* e = Exchange(Call::kFusedDestroy, w, "fused_kernel_destroy",
                               options_.call_timeout, &r)) {
    delete reinterpret_cast<ProxyError*>(e);
  }
}

MixrtError* PluginHostProcess::FusedSetWeightVersion(
    MixrtFusedKernel_SetWeightVersion_Args* a) {
  return Ask(
      Call::kFusedSetWeightVersion, "fused_kernel_set_weight_version",
      [&](MessageWriter& w) {
        w.Put(reinterpret_cast<uint64_t>(a->kernel));
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
  w.Put(handle);
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
  if (!isolation::WriteKernelGraphSteps(a->steps, a->num_steps, w)) {
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
  if (!r->Get(&graph)) {
    return MakeError(MIXRT_ERROR_CODE_INTERNAL,
                     "malformed kernel_graph_create");
  }
  a->graph = reinterpret_cast<MixrtKernelGraph*>(graph);
  if (graph != 0) {
    graphs_[graph] = GraphInfo{a->device, a->num_buffers, absl::ZeroDuration()};
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
  w.Put(handle);
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
  const uint64_t handle = reinterpret_cast<uint64_t>(a->graph);
  graphs_.erase(handle);
  if (failed_.load(std::memory_order_acquire)) return;
  MessageWriter w(block_->payload);
  w.Put(handle);
  std::optional<MessageReader> r;
  if (MixrtError* e = Exchange(Call::kGraphDestroy, w, "kernel_graph_destroy",
                               options_.call_timeout, &r)) {
    delete reinterpret_cast<ProxyError*>(e);
  }
}

}  // namespace mixrt::isolation
