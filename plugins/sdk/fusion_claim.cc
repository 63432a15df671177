#include "plugins/sdk/fusion_claim.h"

#include <set>

#include "plugins/sdk/plugin.h"

namespace mixrt::sdk {
namespace {

struct Group {
  std::vector<int64_t> shape;
  uint32_t reduce_axes = 0;  // 0: no reduction yet.
  int nodes = 0;
  size_t reductions = 0;
  std::set<int> after;  // Groups it runs after (what it reads depends on).
};

// Whether group `from` runs after group `to`, directly or through others.
bool RunsAfter(const std::vector<Group>& groups, int from, int to) {
  std::vector<bool> seen(groups.size(), false);
  std::vector<int> stack = {from};
  while (!stack.empty()) {
    const int x = stack.back();
    stack.pop_back();
    if (x == to) return true;
    if (seen[x]) continue;
    seen[x] = true;
    stack.insert(stack.end(), groups[x].after.begin(), groups[x].after.end());
  }
  return false;
}

}  // namespace

// A node joins the group of a producer of one of its inputs when they
// iterate over one shape, unless that would make the group wait for
// itself: when the node reads (through nodes outside the group) something
// that depends on the group, or a group that runs after it.
std::vector<int> ClaimLoops(const FusionGraph& g, const LoopRules& rules) {
  const int n = static_cast<int>(g.nodes.size());
  std::vector<int> group_of(n, -1);
  std::vector<Group> groups;
  // Per node: the groups it depends on, its own included.
  std::vector<std::set<int>> depends(n);
  auto base_of = [&](int v) {
    return g.values[v].view_of >= 0 ? g.values[v].view_of : v;
  };
  for (int i = 0; i < n; ++i) {
    const FusionNode& node = g.nodes[i];
    std::vector<int64_t> shape = rules.iteration_shape(node);
    uint32_t axes = 0;
    if (node.op == MIXRT_OP_REDUCE && !shape.empty()) {
      auto a = node.GetAttrs<MixrtReduceAttrs>();
      if (a.ok() && a->axes_mask != 0) {
        axes = a->axes_mask;
      } else {
        shape.clear();
      }
    }
    // What it depends on through producers outside group `g0`.
    auto outside = [&](int g0) {
      std::set<int> d;
      for (int v : node.inputs) {
        const int p = g.producer[base_of(v)];
        if (p < 0 || (g0 >= 0 && group_of[p] == g0)) continue;
        d.insert(depends[p].begin(), depends[p].end());
      }
      return d;
    };
    int join = -1;
    if (!shape.empty()) {
      for (int v : node.inputs) {
        const int p = g.producer[base_of(v)];
        if (p < 0 || group_of[p] < 0 || base_of(v) != v) continue;
        const int c = group_of[p];
        const Group& cg = groups[c];
        if (cg.shape != shape || g.nodes[p].op == MIXRT_OP_REDUCE) continue;
        if (axes != 0 && ((cg.reduce_axes != 0 && cg.reduce_axes != axes) ||
                          cg.reductions >= rules.max_reductions)) {
          continue;
        }
        const std::set<int> d = outside(c);
        bool cycle = d.count(c) > 0;
        for (int h : d) cycle = cycle || RunsAfter(groups, h, c);
        if (cycle) continue;
        join = c;
        break;
      }
    }
    if (!shape.empty() && join < 0 && node.op != MIXRT_OP_REDUCE) {
      join = static_cast<int>(groups.size());
      groups.push_back({shape, 0, 0, 0, {}});
    }
    depends[i] = outside(join);
    if (join < 0) continue;
    group_of[i] = join;
    Group& grp = groups[join];
    ++grp.nodes;
    if (axes != 0) {
      grp.reduce_axes = axes;
      ++grp.reductions;
    }
    for (int h : depends[i]) {
      if (h != join) grp.after.insert(h);
    }
    depends[i].insert(join);
  }
  // Single launches gain nothing; number the rest densely.
  std::vector<int> renumber(groups.size(), -1);
  int next = 0;
  for (size_t k = 0; k < groups.size(); ++k) {
    if (groups[k].nodes >= 2) renumber[k] = next++;
  }
  for (int& x : group_of) {
    if (x >= 0) x = renumber[x];
  }
  return group_of;
}

}  // namespace mixrt::sdk
