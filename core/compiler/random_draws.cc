#include "core/compiler/random_draws.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "core/tensor/generator.h"

namespace mixrt::compiler {
namespace {

template <typename Attrs>
RandomFields FieldsOf() {
  return {offsetof(Attrs, seed), offsetof(Attrs, offset)};
}

}  // namespace

uint64_t ReadField(const std::vector<uint8_t>& attrs, size_t at) {
  uint64_t v = 0;
  std::memcpy(&v, attrs.data() + at, sizeof(v));
  return v;
}

void WriteField(std::vector<uint8_t>* attrs, size_t at, uint64_t value) {
  std::memcpy(attrs->data() + at, &value, sizeof(value));
}

std::optional<RandomFields> RandomFieldsOf(MixrtOp op,
                                           const std::vector<uint8_t>& attrs) {
  RandomFields f;
  switch (op) {
    case MIXRT_OP_RANDOM_UNIFORM:
    case MIXRT_OP_RANDOM_NORMAL:
      f = FieldsOf<MixrtRandomAttrs>();
      break;
    case MIXRT_OP_DROPOUT:
      f = FieldsOf<MixrtDropoutAttrs>();
      break;
    case MIXRT_OP_SCALED_DOT_PRODUCT_ATTENTION:
    case MIXRT_OP_SCALED_DOT_PRODUCT_ATTENTION_BACKWARD: {
      double p = 0;
      const size_t p_at = offsetof(MixrtAttentionAttrs, dropout_p);
      if (attrs.size() < p_at + sizeof(p)) return std::nullopt;
      std::memcpy(&p, attrs.data() + p_at, sizeof(p));
      if (!(p > 0)) return std::nullopt;  // No numbers read.
      f = FieldsOf<MixrtAttentionAttrs>();
      break;
    }
    default:
      return std::nullopt;
  }
  const size_t end = std::max(f.seed_at, f.offset_at) + sizeof(uint64_t);
  if (attrs.size() < end) return std::nullopt;
  return f;
}

absl::StatusOr<RandomBase> ReserveRandomBlocks(const Graph& g) {
  RandomBase base;
  for (const RandomSource& source : g.random_sources) {
    const std::shared_ptr<Generator::State> state = source.state.lock();
    if (state == nullptr) {
      return absl::FailedPreconditionError(
          "compiled graph: a generator it draws from is gone");
    }
    base.push_back(ReserveBlocks(state, static_cast<uint64_t>(source.blocks)));
  }
  return base;
}

void ReturnRandomBlocks(const Graph& g, const RandomBase& base) {
  for (size_t i = 0; i < g.random_sources.size() && i < base.size(); ++i) {
    const std::shared_ptr<Generator::State> state =
        g.random_sources[i].state.lock();
    if (state == nullptr) continue;
    uint64_t expected =
        base[i].offset + static_cast<uint64_t>(g.random_sources[i].blocks);
    state->offset.compare_exchange_strong(expected, base[i].offset);
  }
}

bool DrawsOnlyFromDefaultGenerator(const Graph& g) {
  for (const RandomSource& source : g.random_sources) {
    if (source.state.lock() != DefaultGenerator().state()) return false;
  }
  return true;
}

}  // namespace mixrt::compiler
