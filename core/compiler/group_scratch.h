// A fused group and the launches it replaces, set up to run side by side
// outside any plan: scratch memory for every slot they touch (the graph's
// constants as they are), the launches' descriptors and the kernel's
// value addresses. What max-autotune times (fusion_timing.h) and what the
// fusion check compares (fusion_check.h).
#ifndef MIXRT_CORE_COMPILER_GROUP_SCRATCH_H_
#define MIXRT_CORE_COMPILER_GROUP_SCRATCH_H_

#include <map>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "core/compiler/graph.h"
#include "core/plugin/backend.h"
#include "core/tensor/storage.h"

namespace mixrt::compiler {

class GroupScratch {
 public:
  // `nodes` (launches of `g`) and a kernel given an address for each of
  // `values` (`value_refs[v]` is value v's place in `g`). Non-constant
  // memory starts zeroed.
  static absl::StatusOr<GroupScratch> Create(
      const Graph& g, const std::vector<int>& nodes,
      const std::vector<ValueRef>& value_refs, const std::vector<int>& values);

  // The launches one by one; the kernel once.
  absl::Status RunLaunches() const;
  absl::Status RunKernel(const PluginFusedKernel& kernel) const;

  // Writes `bytes` into v's slot at its offset (v dense) / reads v back.
  absl::Status Fill(const ValueRef& v, const std::vector<char>& bytes) const;
  absl::StatusOr<std::vector<char>> Read(const ValueRef& v) const;
  bool IsConstant(const ValueRef& v) const;

 private:
  GroupScratch() = default;
  void* Place(const ValueRef& v) const;

  const Graph* g_ = nullptr;
  std::vector<int> nodes_;
  std::map<int, char*> base_;
  std::vector<std::shared_ptr<Storage>> held_;
  std::vector<std::vector<MixrtTensorDesc>> ins_, outs_;
  std::vector<void*> value_data_;
};

}  // namespace mixrt::compiler

#endif  // MIXRT_CORE_COMPILER_GROUP_SCRATCH_H_
