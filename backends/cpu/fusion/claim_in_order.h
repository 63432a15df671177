// The claim loop the CPU plugin's pattern fusions share: one pass over the
// offered nodes in order, each match a new group, nodes already claimed
// (by an earlier kind of fusion or an earlier match) passed to the matcher
// so it leaves them alone.
#ifndef MIXRT_BACKENDS_CPU_FUSION_CLAIM_IN_ORDER_H_
#define MIXRT_BACKENDS_CPU_FUSION_CLAIM_IN_ORDER_H_

#include <cstddef>
#include <vector>

#include "absl/types/span.h"

namespace mixrt::cpu {

// Per node, its group (`first`, first + 1, ...) or -1. `match(i, claimed)`
// returns the nodes of the group node i starts, or none.
template <typename Match>
std::vector<int> ClaimInOrder(size_t nodes, absl::Span<const int> taken,
                              int first, Match match) {
  std::vector<int> group(nodes, -1);
  std::vector<int> claimed(taken.begin(), taken.end());
  claimed.resize(nodes, -1);
  int next = first;
  for (size_t i = 0; i < nodes; ++i) {
    const std::vector<int> members =
        match(static_cast<int>(i), absl::Span<const int>(claimed));
    if (members.empty()) continue;
    for (int k : members) group[k] = claimed[k] = next;
    ++next;
  }
  return group;
}

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_FUSION_CLAIM_IN_ORDER_H_
