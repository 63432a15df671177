// Shape arithmetic takes sizes from users: broadcasting, element counts and
// dim wrapping must return a Status on any input, never overflow or crash,
// and what they return must satisfy the broadcasting rules.
#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "absl/status/statusor.h"
#include "core/tensor/shape.h"
#include "fuzz/fuzz_input.h"

namespace {

mixrt::Shape ReadShape(mixrt::fuzz::FuzzInput& in) {
  mixrt::Shape shape(in.Read<uint8_t>() % 10);
  for (int64_t& d : shape) {
    // Mostly small sizes (so broadcasting succeeds often), sometimes
    // anything, negative and huge included.
    const uint8_t kind = in.Read<uint8_t>();
    d = kind < 200 ? kind % 5 : in.Read<int64_t>();
  }
  return shape;
}

void Check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mixrt::fuzz::FuzzInput in(data, size);
  const mixrt::Shape a = ReadShape(in);
  const mixrt::Shape b = ReadShape(in);

  const absl::StatusOr<int64_t> n = mixrt::CheckedNumElements(a);
  if (n.ok()) {
    Check(*n >= 0);
    const mixrt::Strides strides = mixrt::ContiguousStrides(a);
    Check(strides.size() == a.size());
  }

  const absl::StatusOr<mixrt::Shape> ab = mixrt::BroadcastShapes(a, b, "fuzz");
  const absl::StatusOr<mixrt::Shape> ba = mixrt::BroadcastShapes(b, a, "fuzz");
  Check(ab.ok() == ba.ok());
  if (ab.ok()) {
    Check(*ab == *ba);
    Check(ab->size() == std::max(a.size(), b.size()));
    // Each input dim equals the result's or is 1 (right-aligned).
    for (const mixrt::Shape* s : {&a, &b}) {
      const size_t lead = ab->size() - s->size();
      for (size_t i = 0; i < s->size(); ++i) {
        Check((*ab)[lead + i] >= 0);
        Check((*s)[i] == (*ab)[lead + i] || (*s)[i] == 1);
      }
    }
  } else {
    Check(!ab.status().message().empty());
  }

  const int64_t dim = in.Read<int64_t>() % 16;
  const absl::StatusOr<int> wrapped =
      mixrt::WrapDim(dim, static_cast<int>(a.size()));
  if (wrapped.ok()) {
    // A 0-d tensor accepts dims -1 and 0, as in PyTorch.
    Check(*wrapped >= 0 && *wrapped < std::max(static_cast<int>(a.size()), 1));
  }
  return 0;
}
