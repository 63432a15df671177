// The compile cache reads files other processes wrote: any bytes as an
// entry file must give a payload or the reason it is ignored, and any
// payload a dynamic-size artifact or nothing; a decoded artifact's
// formulas (overflowing ones included) instantiate a graph or refuse,
// never crash. The first byte picks: odd, the rest is an entry file; even,
// the rest is a payload.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "core/compiler/artifact_cache.h"
#include "core/compiler/dynamic_artifact.h"
#include "core/compiler/symbolic.h"
#include "fuzz/fuzz_input.h"

namespace {

using mixrt::compiler::Graph;

// A small graph: one launch over two slots, its integers the formulas'.
Graph TinyGraph() {
  Graph g;
  g.slots.resize(2);
  g.slots[0].kind = mixrt::compiler::StorageSlot::Kind::kInput;
  g.slots[0].input = 0;
  g.slots[1].bytes = 64;
  mixrt::compiler::GraphNode n;
  n.op = MIXRT_OP_COPY;
  mixrt::compiler::ValueRef in{0, 0, mixrt::DType::kF32, {4, 4}, {4, 1}};
  mixrt::compiler::ValueRef out{1, 0, mixrt::DType::kF32, {4, 4}, {4, 1}};
  n.inputs.push_back(in);
  n.outputs.push_back(out);
  g.nodes.push_back(n);
  g.outputs.push_back(out);
  return g;
}

mixrt::compiler::ArtifactCache& Cache() {
  static auto* cache = [] {
    char dir[] = "/tmp/mixrt_cache_fuzz.XXXXXX";
    if (mkdtemp(dir) == nullptr) std::abort();
    return new mixrt::compiler::ArtifactCache(dir);
  }();
  return *cache;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mixrt::fuzz::FuzzInput in(data, size);
  const bool as_file = in.Read<uint8_t>() & 1;
  const std::string rest = in.Rest();
  std::string payload = rest;
  if (as_file) {
    const std::string key = "fuzzed entry";
    const std::string path = Cache().PathFor(key);
    if (path.empty()) return 0;
    std::ofstream(path, std::ios::binary | std::ios::trunc) << rest;
    std::string why;
    const std::optional<std::string> loaded = Cache().Load(key, &why);
    if (!loaded.has_value()) {
      if (why.empty() && !rest.empty())
        std::abort();  // Ignored without a reason.
      return 0;
    }
    payload = *loaded;
  }
  const std::optional<mixrt::compiler::DynamicArtifact> a =
      mixrt::compiler::DecodeDynamic(payload);
  if (!a.has_value()) return 0;
  const mixrt::compiler::SymbolicGraph s{TinyGraph(), a->forward};
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{1} << 40}) {
    const std::optional<Graph> g = mixrt::compiler::Instantiate(s, n);
    if (g.has_value() && g->nodes.size() != 1) std::abort();
  }
  return 0;
}
