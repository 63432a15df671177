// Which neighbouring kernel-graph steps the CPU plugin runs at once: only
// small ones that touch no common bytes where one of them writes.
#include "backends/cpu/step_pairs.h"

#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "plugins/sdk/plugin.h"

namespace mixrt::cpu {
namespace {

// A tensor of `shape` (row-major unless strides are given) at `offset`
// bytes into `buffer`.
struct Place {
  std::vector<int64_t> shape, strides;
  int32_t buffer;
  uint64_t offset;
};

// Matmuls a[m,k] @ b[k,n] -> c as graph steps; owned storage.
class Steps {
 public:
  void Matmul(Place a, Place b, Place c) {
    auto& s = storage_.emplace_back(std::make_unique<Storage>());
    s->places = {a, b, c};
    for (Place& p : s->places) {
      if (p.strides.empty()) {
        p.strides.assign(p.shape.size(), 1);
        for (int d = static_cast<int>(p.shape.size()) - 2; d >= 0; --d) {
          p.strides[d] = p.strides[d + 1] * p.shape[d + 1];
        }
      }
      MixrtTensorDesc desc{};
      desc.struct_size = sizeof(desc);
      desc.dtype = MIXRT_DTYPE_F32;
      desc.ndim = static_cast<int32_t>(p.shape.size());
      desc.shape = p.shape.data();
      desc.strides = p.strides.data();
      s->descs.push_back(desc);
      s->buffers.push_back(p.buffer);
      s->offsets.push_back(p.offset);
    }
    s->attrs.struct_size = sizeof(s->attrs);
    MixrtKernelGraphStep step{};
    step.struct_size = sizeof(step);
    step.op = MIXRT_OP_MATMUL;
    step.num_inputs = 2;
    step.inputs = s->descs.data();
    step.num_outputs = 1;
    step.outputs = s->descs.data() + 2;
    step.input_buffers = s->buffers.data();
    step.input_offsets = s->offsets.data();
    step.output_buffers = s->buffers.data() + 2;
    step.output_offsets = s->offsets.data() + 2;
    step.attrs = &s->attrs;
    steps_.push_back(step);
  }
  std::unique_ptr<sdk::StepGraph> Graph(int buffers) const {
    // Creation only checks and copies: no plugin is called.
    auto g = sdk::StepGraph::Create(nullptr, 0, buffers, steps_);
    EXPECT_TRUE(g.ok()) << g.status();
    return *std::move(g);
  }

 private:
  struct Storage {
    std::vector<Place> places;
    std::vector<MixrtTensorDesc> descs;
    std::vector<int32_t> buffers;
    std::vector<uint64_t> offsets;
    MixrtMatmulAttrs attrs{};
  };
  std::vector<std::unique_ptr<Storage>> storage_;
  std::vector<MixrtKernelGraphStep> steps_;
};

int Pairs(std::unique_ptr<sdk::StepGraph> g) {
  std::unique_ptr<sdk::KernelGraph> made = PairedStepGraph::Make(std::move(g));
  auto* paired = dynamic_cast<PairedStepGraph*>(made.get());
  return paired == nullptr ? 0 : paired->pairs();
}

// A backward's two products of one layer: dX = dZ W and dW = dZ^T X
// read the same dZ and write different buffers.
TEST(CpuStepPairs, ALayersTwoGradientProductsPair) {
  Steps s;
  // dZ [32, 64] in buffer 0; W [64, 64] in 1; X [32, 64] in 2.
  s.Matmul({{32, 64}, {}, 0, 0}, {{64, 64}, {}, 1, 0}, {{32, 64}, {}, 3, 0});
  s.Matmul({{64, 32}, {1, 64}, 0, 0}, {{32, 64}, {}, 2, 0}, {{64, 64}, {}, 4, 0});
  auto g = s.Graph(5);
  EXPECT_FALSE(StepsConflict(*g, 0, 1));
  EXPECT_EQ(Pairs(std::move(g)), 1);
}

TEST(CpuStepPairs, StepsSharingWrittenBytesStayInOrder) {
  {  // The second reads what the first writes (in another view of it).
    Steps s;
    s.Matmul({{8, 8}, {}, 0, 0}, {{8, 8}, {}, 1, 0}, {{8, 8}, {}, 2, 0});
    s.Matmul({{8, 8}, {1, 8}, 2, 0}, {{8, 8}, {}, 1, 0}, {{8, 8}, {}, 3, 0});
    auto g = s.Graph(4);
    EXPECT_TRUE(StepsConflict(*g, 0, 1));
    EXPECT_EQ(Pairs(std::move(g)), 0);
  }
  {  // The second overwrites what the first reads (its last row only).
    Steps s;
    s.Matmul({{8, 8}, {}, 0, 0}, {{8, 8}, {}, 1, 0}, {{8, 8}, {}, 2, 0});
    s.Matmul({{1, 8}, {}, 3, 0}, {{8, 8}, {}, 1, 0}, {{1, 8}, {}, 0, 7 * 8 * 4});
    auto g = s.Graph(4);
    EXPECT_TRUE(StepsConflict(*g, 0, 1));
  }
  {  // Both write one buffer, at bytes that do not meet.
    Steps s;
    s.Matmul({{8, 8}, {}, 0, 0}, {{8, 8}, {}, 1, 0}, {{4, 8}, {}, 2, 0});
    s.Matmul({{8, 8}, {}, 0, 0}, {{8, 8}, {}, 1, 0}, {{4, 8}, {}, 2, 4 * 8 * 4});
    auto g = s.Graph(3);
    EXPECT_FALSE(StepsConflict(*g, 0, 1));
  }
}

TEST(CpuStepPairs, LargeProductsKeepTheirThreads) {
  // 256^3 multiply-adds fork OpenMP threads of their own: never paired.
  Steps s;
  s.Matmul({{256, 256}, {}, 0, 0}, {{256, 256}, {}, 1, 0}, {{256, 256}, {}, 2, 0});
  s.Matmul({{256, 256}, {}, 0, 0}, {{256, 256}, {}, 1, 0}, {{256, 256}, {}, 3, 0});
  EXPECT_EQ(Pairs(s.Graph(4)), 0);
}

}  // namespace
}  // namespace mixrt::cpu
