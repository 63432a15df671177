#include "core/tensor/generator.h"

#include "core/tensor/capture_hooks.h"

namespace mixrt {

Draw ReserveBlocks(const std::shared_ptr<Generator::State>& state,
                   uint64_t blocks) {
  Draw d;
  d.seed = state->seed.load();
  d.offset = state->offset.fetch_add(blocks);
  if (CaptureHooks* hooks = ActiveCaptureHooks()) {
    hooks->OnRandomDraw(state, d.seed, d.offset, blocks);
  }
  return d;
}

uint64_t Generator::ReserveBlocks(uint64_t blocks) {
  return mixrt::ReserveBlocks(state_, blocks).offset;
}

}  // namespace mixrt
