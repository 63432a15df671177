// The chain of ops after a oneDNN matmul or convolution that becomes its
// post-ops (fused_matmul.h, fused_conv.h): which fusion nodes map to which
// post-op, checked against the op-by-op kernels' NaN and infinities.
#ifndef MIXRT_BACKENDS_CPU_EPILOGUE_CHAIN_H_
#define MIXRT_BACKENDS_CPU_EPILOGUE_CHAIN_H_

#include <optional>
#include <string>

#include "oneapi/dnnl/dnnl.hpp"
#include "plugins/sdk/fusion.h"

namespace mixrt::cpu {

struct ChainStep {
  dnnl::algorithm algorithm = dnnl::algorithm::undef;
  float alpha = 0, beta = 0;
  int operand = -1;  // The binary op's other value, else -1.
  std::string name;
};

// The eltwise post-op computing unary `kind`, checked against the op's
// NaN and infinities; nullopt when there is none or it differs.
std::optional<ChainStep> EltwiseFor(uint32_t kind, float alpha, float beta);

// Whether a binary op's other operand `v` can be a post-op's second
// source for the chain's value `like` (the fusion decides which layouts).
using OperandFits = bool (*)(const sdk::FusionValue& v, const sdk::FusionValue& like);

// The step node `n` adds when it reads `v` (the chain's current value) and
// fuses, and whether it is a cast (no step).
std::optional<ChainStep> StepFor(const sdk::FusionGraph& g, const sdk::FusionNode& n, int v,
                                 OperandFits fits, bool* cast);

// Whether node `n` is unary op `kind` of value `v` alone.
bool IsUnaryOf(const sdk::FusionNode& n, int v, uint32_t kind);

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_EPILOGUE_CHAIN_H_
