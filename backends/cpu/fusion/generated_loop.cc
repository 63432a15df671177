#include "backends/cpu/fusion/generated_loop.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "backends/cpu/fusion/fused_loop.h"
#include "backends/cpu/fusion/loop_compiler.h"
#include "backends/cpu/kernels/parallel.h"
#include "mixrt/op_names.h"
#include "mixrt/status_macros.h"
#include "plugins/sdk/loop_codegen.h"

namespace mixrt::cpu {
namespace {

std::atomic<int64_t> generated_runs{0};

// What the kernel and its background build share (the build may finish
// after the kernel is gone).
struct Built {
  std::atomic<LoopEntry> entry{nullptr};
};

class GeneratedLoop : public sdk::FusedKernel {
 public:
  GeneratedLoop(std::unique_ptr<sdk::FusedKernel> interpreter,
                sdk::LoopSource source, std::vector<bool> may_be_null,
                std::shared_ptr<Built> built, std::string description)
      : interpreter_(std::move(interpreter)),
        source_(std::move(source)),
        may_be_null_(std::move(may_be_null)),
        built_(std::move(built)),
        description_(std::move(description)) {}

  std::string Description() const override { return description_; }

  sdk::Status Run(sdk::Span<void* const> data,
                  sdk::Span<const int64_t> symbols) override {
    const LoopEntry entry = built_->entry.load(std::memory_order_acquire);
    if (entry == nullptr) return interpreter_->Run(data, symbols);
    args_.resize(source_.values.size());
    for (size_t k = 0; k < source_.values.size(); ++k) {
      args_[k] = data[source_.values[k]];
      // The interpreter's checks name a missing value.
      if (args_[k] == nullptr && !may_be_null_[k])
        return interpreter_->Run(data, symbols);
    }
    if (source_.finishes) {
      partials_.resize(std::max<int64_t>(source_.partials, 1));
      args_.push_back(partials_.data());
    }
    ParallelFor(
        source_.units, GrainFor(source_.elements_per_unit * 4),
        [&](int64_t begin, int64_t end) { entry(args_.data(), begin, end); });
    if (source_.finishes) entry(args_.data(), source_.units, source_.units + 1);
    generated_runs.fetch_add(1, std::memory_order_relaxed);
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<sdk::FusedKernel> interpreter_;
  sdk::LoopSource source_;
  std::vector<bool> may_be_null_;  // Per argument: a reduction nobody reads.
  std::shared_ptr<Built> built_;
  std::string description_;
  // Runs never overlap (sdk::FusedKernel).
  std::vector<void*> args_;
  std::vector<double> partials_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<sdk::FusedKernel>> CompileGeneratedLoop(
    const sdk::FusionGraph& g, absl::Span<const int> group_of_node, int group) {
  // One program: the interpreter runs it, the emitter prints it.
  MIXRT_ASSIGN_OR_RETURN(sdk::LoopProgram program,
                         sdk::BuildLoopProgram(g, group_of_node, group));
  absl::StatusOr<sdk::LoopSource> source =
      sdk::EmitLoopSource(program, {.host_reductions = true});
  std::unique_ptr<sdk::FusedKernel> interpreter =
      MakeFusedLoop(std::move(program));
  const std::string ops = interpreter->Description();
  auto interpreted =
      [&](absl::string_view why) -> std::unique_ptr<sdk::FusedKernel> {
    struct Described : sdk::FusedKernel {
      std::unique_ptr<sdk::FusedKernel> inner;
      std::string description;
      sdk::Status Run(sdk::Span<void* const> d,
                      sdk::Span<const int64_t> s) override {
        return inner->Run(d, s);
      }
      std::string Description() const override { return description; }
    };
    auto k = std::make_unique<Described>();
    k->description = absl::StrCat(ops, " (interpreted: ", why, ")");
    k->inner = std::move(interpreter);
    return k;
  };
  MIXRT_ASSIGN_OR_RETURN(CodegenMode mode, CodegenModeFromEnv());
  if (mode == CodegenMode::kOff) return interpreted("MIXRT_CPU_CODEGEN=off");
  if (!source.ok()) return interpreted(source.status().message());
  const SystemCompiler& compiler = FindSystemCompiler();
  if (!compiler.missing.empty()) return interpreted(compiler.missing);
  std::vector<bool> may_be_null;
  for (int v : source->values) {
    may_be_null.push_back(g.producer[v] >= 0 &&
                          g.nodes[g.producer[v]].op == MIXRT_OP_REDUCE);
  }
  auto built = std::make_shared<Built>();
  std::string how = "generated C++";
  if (LoopEntry cached = LoadCachedLoop(source->source, source->name)) {
    built->entry.store(cached);
  } else if (mode == CodegenMode::kSync) {
    absl::StatusOr<LoopEntry> entry = BuildLoop(source->source, source->name);
    if (!entry.ok()) {
      // The compiler's output stays out of Explain's one line.
      const std::string why(entry.status().message());
      std::fprintf(stderr, "mixrt cpu: fused loop %s stays interpreted: %s\n",
                   source->name.c_str(), why.c_str());
      return interpreted(why.substr(0, std::min(why.find('\n'), size_t{160})));
    }
    built->entry.store(*entry);
  } else {
    how = "generated C++, built in the background; interpreted until it loads";
    BuildLoopInBackground(
        source->source, source->name,
        [built, name = source->name](absl::StatusOr<LoopEntry> entry) {
          if (entry.ok()) {
            built->entry.store(*entry, std::memory_order_release);
            return;
          }
          std::fprintf(
              stderr, "mixrt cpu: fused loop %s stays interpreted: %s\n",
              name.c_str(), std::string(entry.status().message()).c_str());
        });
  }
  const std::string description = absl::StrCat(ops, " (", how, ")");
  return std::make_unique<GeneratedLoop>(
      std::move(interpreter), *std::move(source), std::move(may_be_null),
      std::move(built), description);
}

int64_t GeneratedLoopRuns() { return generated_runs.load(); }

}  // namespace mixrt::cpu
