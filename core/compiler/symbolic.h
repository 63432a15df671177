// Graphs over one symbolic size (automatic dynamic shapes). Two traces of
// a function that differ only in one size N (a batch, a sequence length)
// generalize into a graph whose every integer (shapes, strides, offsets,
// memory sizes) is a + b N, when the two graphs have the same launches,
// attributes and memory slots; a third trace at another size must then
// match the formulas exactly before they are trusted (a quantity in N^2
// or N / 2 fits two points but not three). A verified graph at a new N is
// only ever compared with that size's own trace (compile.cc): host code
// may branch on N beyond what three sizes show.
#ifndef MIXRT_CORE_COMPILER_SYMBOLIC_H_
#define MIXRT_CORE_COMPILER_SYMBOLIC_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/compiler/graph.h"

namespace mixrt::compiler {

struct Affine {
  int64_t a = 0, b = 0;
  // a + b n; nullopt when it does not fit 64 bits (formulas loaded from a
  // cache file may hold anything).
  std::optional<int64_t> At(int64_t n) const {
    int64_t bn = 0, sum = 0;
    if (__builtin_mul_overflow(b, n, &bn) ||
        __builtin_add_overflow(a, bn, &sum)) {
      return std::nullopt;
    }
    return sum;
  }
};

struct SymbolicGraph {
  Graph structure;           // The first trace; its integers are replaced.
  std::vector<Affine> ints;  // Every integer of the graph, in visit order.
};

// Same launches, attributes, host data, memory slots and ranks.
bool SameStructure(const Graph& x, const Graph& y);
// SameStructure and every integer equal.
bool SameGraph(const Graph& x, const Graph& y);

// Where y first differs from x, in words naming the node or slot and what
// that usually means; "" when SameGraph.
std::string FirstDifference(const Graph& x, const Graph& y);

// What SameStructure compares, as text (constants by slot, not by
// storage): equal for two graphs of one structure, in any process.
std::string StructureKey(const Graph& g);

// Null when the graphs differ in structure, or an integer does not change
// by a whole multiple of n2 - n1.
std::optional<SymbolicGraph> Generalize(const Graph& g1, int64_t n1,
                                        const Graph& g2, int64_t n2);

// Null when some integer would be negative at n, or when s has not one
// formula per integer of its structure (formulas read from elsewhere).
std::optional<Graph> Instantiate(const SymbolicGraph& s, int64_t n);

}  // namespace mixrt::compiler

#endif  // MIXRT_CORE_COMPILER_SYMBOLIC_H_
