#include "backends/gpu/multi_tensor_plan.h"

namespace mixrt::gpu {
namespace {

// A new tensor starts at element 0, so a later chunk (start > 0) continues
// the last registered tensor even if two tensors share a data pointer.
bool Continues(const MultiTensorLaunch& launch, const MultiTensorInput& t,
               int64_t start) {
  return start > 0 && launch.num_tensors > 0 &&
         launch.data[launch.num_tensors - 1] == t.data;
}

}  // namespace

std::vector<MultiTensorLaunch> PlanMultiTensorLaunches(
    const std::vector<MultiTensorInput>& tensors, int64_t chunk) {
  std::vector<MultiTensorLaunch> launches;
  MultiTensorLaunch current;
  auto flush = [&]() {
    if (current.num_blocks > 0) launches.push_back(current);
    current = MultiTensorLaunch();
  };
  for (const MultiTensorInput& t : tensors) {
    for (int64_t start = 0; start < t.numel; start += chunk) {
      // A tensor continues in the current launch unless the launch is full;
      // a continuing tensor is registered again in the next launch.
      if (current.num_blocks == kMultiTensorMaxBlocks ||
          (!Continues(current, t, start) &&
           current.num_tensors == kMultiTensorMaxTensors)) {
        flush();
      }
      if (!Continues(current, t, start)) {
        const int32_t slot = current.num_tensors++;
        current.data[slot] = t.data;
        current.dtype[slot] = t.dtype;
        current.numel[slot] = t.numel;
      }
      MultiTensorBlock& b = current.blocks[current.num_blocks++];
      b.tensor = current.num_tensors - 1;
      b.start = start;
      b.count = t.numel - start < chunk ? t.numel - start : chunk;
    }
  }
  flush();
  return launches;
}

}  // namespace mixrt::gpu
