// Random numbers in compiled graphs. Every random op reads counter-based
// Philox numbers named by a seed and an offset in its attributes
// (plugin_api.h): random tensors, dropout, attention's dropout, and the
// backward kernels that regenerate a forward's mask from the same pair. A
// trace records the draws the call made from each generator (in order, as
// offsets from the call's first draw from it) and which launches read
// them; a graph node keeps only its generator and that relative offset.
// Each run of the graph reserves as many blocks from each generator as the
// call drew, and each random node launches with its generator's seed and
// the run's first block + its offset: the numbers eager would have drawn
// for the same generator states, and new ones every call. The backward of
// a call takes the blocks its forward drew.
#ifndef MIXRT_CORE_COMPILER_RANDOM_DRAWS_H_
#define MIXRT_CORE_COMPILER_RANDOM_DRAWS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "core/compiler/graph.h"
#include "core/tensor/generator.h"
#include "mixrt/plugin_api.h"

namespace mixrt::compiler {

// Where in an op's attribute struct its Philox seed and offset live.
struct RandomFields {
  size_t seed_at = 0, offset_at = 0;
};

// The fields of a launch that reads random numbers: random uniform and
// normal, dropout, and attention (forward or backward) with dropout_p > 0.
// Nullopt for other launches, and for attribute bytes too short to hold
// the fields.
std::optional<RandomFields> RandomFieldsOf(MixrtOp op,
                                           const std::vector<uint8_t>& attrs);

uint64_t ReadField(const std::vector<uint8_t>& attrs, size_t at);
void WriteField(std::vector<uint8_t>* attrs, size_t at, uint64_t value);

// What one run drew from each of the graph's random sources: the seed and
// the first block (mixrt::Draw), in the order of graph.random_sources.
using RandomBase = std::vector<Draw>;

// The blocks of one run of `g`, reserved from its generators;
// FAILED_PRECONDITION when one is gone.
absl::StatusOr<RandomBase> ReserveRandomBlocks(const Graph& g);

// Gives back what ReserveRandomBlocks(g) reserved, for a run abandoned
// before it used them (a host read found another value, and the call runs
// again): each generator whose offset is still where that reservation left
// it goes back, so the call draws as eager would; one that another thread
// drew from since keeps its offset.
void ReturnRandomBlocks(const Graph& g, const RandomBase& base);

// Whether `g` draws from no generator but the default one (whose numbers
// another instance of a module may draw too).
bool DrawsOnlyFromDefaultGenerator(const Graph& g);

}  // namespace mixrt::compiler

#endif  // MIXRT_CORE_COMPILER_RANDOM_DRAWS_H_
