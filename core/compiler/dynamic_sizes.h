// Sizes learned to be dynamic (torch.compile's automatic dynamic shapes):
// when a recompile differs from the trace before only in dims that all
// changed from one value to another, those dims become a candidate, its
// two graphs generalized into formulas of one symbol N; a third size
// verifies them, and from then on a new size is traced once and checked
// against the formulas (never extrapolated: host code may branch on a
// size) without counting as a recompile. Verified sizes go to the compile
// cache for other processes, which check them against their own trace.
#ifndef MIXRT_CORE_COMPILER_DYNAMIC_SIZES_H_
#define MIXRT_CORE_COMPILER_DYNAMIC_SIZES_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/compiler/symbolic.h"
#include "core/compiler/trace_entry.h"

namespace mixrt::compiler {

// Dims (input, dim) that changed together between two traces, one symbol
// N for all of them.
struct DynamicSize {
  std::vector<std::pair<int, int>> dims;
  std::string masked_key;
  int64_t n1 = 0, n2 = 0;
  std::optional<SymbolicGraph> forward, backward;
  // What instances copy from the trace at n2 besides the graphs.
  std::vector<Guard> guards;
  std::vector<HostGuard> host_guards;
  TrainingGraphs training;
  bool verified = false;
  bool failed = false;
  int checked = 0;  // New sizes traced that matched the formulas.
};

class DynamicSizes {
 public:
  // `enabled`: CompileOptions::dynamic (unset: learned; false: never).
  // `mode`: the compile mode, part of the cache key. `event`: a line for
  // Explain().
  DynamicSizes(std::optional<bool> enabled, std::string mode,
               std::function<void(std::string)> event);

  // After a recompile from `before` to `now`: a candidate when only sizes
  // changed, all from one value to another.
  void Learn(const std::vector<Tensor>& inputs, const TraceEntry& before,
             const TraceEntry& now);
  // The size `inputs` are an instance of, and their N; null when none.
  DynamicSize* Match(const std::vector<Tensor>& inputs, int64_t* n);
  // A candidate's third size: its formulas against the fresh trace.
  void VerifyFormulas(DynamicSize* d, int64_t n, const TraceEntry& fresh,
                      const std::vector<Tensor>& inputs);
  // A verified size's formulas against the trace of a size they have not
  // seen: it joins the checked ones, or the formulas are dropped.
  void CheckSize(DynamicSize* d, int64_t n, const TraceEntry& traced);
  // After a trace no size covered: a size another process learned for
  // this graph, if the compile cache has one that reproduces the trace.
  void Load(const std::vector<Tensor>& inputs, const TraceEntry& e);

  // Whether `now` (the guards of `inputs`) differs from the trace `last`
  // only in sizes that all changed from one value to another: with
  // dynamic=true such a call is learning, not recompiling.
  static bool SizeOnlyChange(const std::vector<Tensor>& inputs,
                             const std::vector<Guard>& now,
                             const TraceEntry& last);
  // Whether some size's formulas were refuted (sizes stay static then).
  bool AnyFailed() const;

  const std::vector<DynamicSize>& sizes() const { return sizes_; }
  static std::string DimsName(const std::vector<std::pair<int, int>>& dims);

 private:
  void Store(const DynamicSize& d, const TraceEntry& e,
             const std::vector<Tensor>& inputs);
  std::string ArtifactKey(const TraceEntry& e) const;

  std::optional<bool> enabled_;
  std::string mode_;
  std::function<void(std::string)> event_;
  std::vector<DynamicSize> sizes_;
};

}  // namespace mixrt::compiler

#endif  // MIXRT_CORE_COMPILER_DYNAMIC_SIZES_H_
