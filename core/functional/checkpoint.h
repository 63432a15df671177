// Gradient checkpointing, as torch.utils.checkpoint.checkpoint: the forward
// runs without keeping its activations; backward runs it again, with the
// autocast state and the random state of the original forward (dropout
// masks identical; PyTorch once got this wrong, pytorch#71169), and
// backpropagates through the recomputed graph. Trades compute for memory.
//
//   auto out = mixrt::checkpoint(
//       [&](const std::vector<Tensor>& in) ->
//       absl::StatusOr<std::vector<Tensor>> {
//         MIXRT_ASSIGN_OR_RETURN(Tensor y, block->forward(in[0]));
//         return std::vector<Tensor>{y};
//       },
//       {hidden}, {.generators = {&gen}});
//
// With use_reentrant (the default here), as PyTorch's reentrant version,
// gradients reach parameters used inside `fn` only when at least one input
// requires grad (it warns otherwise). Without it, as PyTorch's
// use_reentrant=False, they reach them either way: the region's backward
// is anchored to a tensor of its own when no input needs a gradient, so a
// checkpointed first block (whose input is data) still trains.
#ifndef MIXRT_CORE_FUNCTIONAL_CHECKPOINT_H_
#define MIXRT_CORE_FUNCTIONAL_CHECKPOINT_H_

#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor/generator.h"
#include "core/tensor/tensor.h"

namespace mixrt {

using CheckpointFn = std::function<absl::StatusOr<std::vector<Tensor>>(
    const std::vector<Tensor>& inputs)>;

struct CheckpointOptions {
  // Generators `fn` draws from, restored for the recompute (the default
  // generator always is), and left as they were after it.
  std::vector<Generator*> generators;
  // torch's preserve_rng_state: false skips both (the recompute draws on
  // from where the generators are then, so its dropout masks differ from
  // the forward's and later draws shift), saving the state juggling when
  // fn draws nothing.
  bool preserve_rng_state = true;
  // torch's use_reentrant (see above); false: parameters inside `fn` get
  // gradients even when no input requires grad. The outputs then require
  // grad whenever grad mode is on, even if `fn` uses no such parameter.
  bool use_reentrant = true;
};

absl::StatusOr<std::vector<Tensor>> checkpoint(
    const CheckpointFn& fn, const std::vector<Tensor>& inputs,
    const CheckpointOptions& options = {});

}  // namespace mixrt

#endif  // MIXRT_CORE_FUNCTIONAL_CHECKPOINT_H_
