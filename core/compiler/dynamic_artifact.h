// A learned dynamic size as the compile cache stores it: which input dims
// are the size N, the two sizes it was learned from, the input signature
// with those dims masked, and every integer of the forward (and backward)
// graph as a + b N. The graphs themselves are not stored: a process traces
// once (its constants are its own), and the formulas must reproduce that
// trace exactly before they are used.
#ifndef MIXRT_CORE_COMPILER_DYNAMIC_ARTIFACT_H_
#define MIXRT_CORE_COMPILER_DYNAMIC_ARTIFACT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/compiler/symbolic.h"

namespace mixrt::compiler {

struct DynamicArtifact {
  std::vector<std::pair<int, int>> dims;  // (input, dim)
  int64_t n1 = 0, n2 = 0;
  std::string masked_key;
  std::vector<Affine> forward;
  std::optional<std::vector<Affine>> backward;
};

std::string EncodeDynamic(const DynamicArtifact& a);
// Nullopt when `text` is not a complete artifact.
std::optional<DynamicArtifact> DecodeDynamic(const std::string& text);

}  // namespace mixrt::compiler

#endif  // MIXRT_CORE_COMPILER_DYNAMIC_ARTIFACT_H_
