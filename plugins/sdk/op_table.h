// A plugin's op dispatch as one table: each op -> the kernel that runs it,
// one row per op (ggml's per-op forward functions; a dispatcher's
// registrations in miniature). Ops without a row answer UNIMPLEMENTED, so
// the host falls back or composes them.
//
// The table is also what the plugin says it runs: return it from
// Plugin::Ops() and the SDK's default per-op answer (Plugin::GetOpSupport)
// claims exactly its rows — each in the dtypes and variants the row lists,
// at the speed GetCapability gives the op's class — and nothing else.
//
//   const sdk::OpTable kOps("example", {
//       {MIXRT_OP_FILL, RunFill, sdk::DTypes({MIXRT_DTYPE_F32})},
//       {MIXRT_OP_BINARY, RunBinary, sdk::DTypes({MIXRT_DTYPE_F32}),
//        sdk::Variants({MIXRT_BINARY_ADD, MIXRT_BINARY_MUL})},
//       {MIXRT_OP_MATMUL, RunMatmul},  // The table's dtypes, every variant.
//   });
//   const sdk::OpTable* Ops() const override { return &kOps; }
//   sdk::Status Launch(const sdk::KernelCall& call) override {
//     return kOps.Run(call);
//   }
#ifndef MIXRT_PLUGINS_SDK_OP_TABLE_H_
#define MIXRT_PLUGINS_SDK_OP_TABLE_H_

#include <array>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>

#include "mixrt/plugin_api.h"
#include "plugins/sdk/plugin.h"
#include "plugins/sdk/span.h"
#include "plugins/sdk/status.h"

namespace mixrt::sdk {

// A std::function: kernels written against another status type (the
// in-tree plugins return absl::Status) convert on return.
using OpKernel = std::function<Status(const KernelCall& call)>;

// A set of dtypes (bit 1 << dtype) and of an op's variants (bit
// 1 << variant: binary kinds, unary kinds, matmul activations, ...).
using DTypeMask = uint32_t;
using VariantMask = uint64_t;
inline constexpr DTypeMask kFloatingDTypes = (1u << MIXRT_DTYPE_F32) |
                                             (1u << MIXRT_DTYPE_F16) |
                                             (1u << MIXRT_DTYPE_BF16);
inline constexpr DTypeMask kAllDTypes = (1u << MIXRT_DTYPE_COUNT) - 1;
inline constexpr VariantMask kAllVariants = ~VariantMask{0};
constexpr DTypeMask DTypes(std::initializer_list<MixrtDtype> dtypes) {
  DTypeMask mask = 0;
  for (MixrtDtype d : dtypes) mask |= 1u << d;
  return mask;
}
constexpr VariantMask Variants(std::initializer_list<uint32_t> variants) {
  VariantMask mask = 0;
  for (uint32_t v : variants) mask |= v < 64 ? VariantMask{1} << v : 0;
  return mask;
}

class OpTable {
 public:
  struct Row {
    MixrtOp op;
    OpKernel kernel;
    // The dtypes the kernel runs, of its first input and of its first
    // output; 0: the table's default dtypes.
    DTypeMask dtypes = 0;
    VariantMask variants = kAllVariants;
  };
  // `plugin` names the plugin in UNIMPLEMENTED answers. A row whose op is
  // out of range, or that repeats an op, makes Run answer INTERNAL for it
  // (and the conformance suite fail). `default_dtypes` are the dtypes of
  // rows that list none: the floating ones unless the plugin's kernels
  // take integers too.
  OpTable(std::string plugin, Span<const Row> rows,
          DTypeMask default_dtypes = kFloatingDTypes);

  Status Run(const KernelCall& call) const;
  bool Has(MixrtOp op) const;
  // Why the table has no kernel for `query` ("no kernel for matmul",
  // "binary/sub is not among the variants of its kernel", ...), or "" when
  // it has one.
  std::string Lacks(const OpQuery& query) const;

 private:
  std::string plugin_;
  std::array<OpKernel, MIXRT_OP_COUNT> kernels_{};
  std::array<DTypeMask, MIXRT_OP_COUNT> dtypes_{};
  std::array<VariantMask, MIXRT_OP_COUNT> variants_{};
  std::string bad_rows_;  // What is wrong with the rows, or "".
};

}  // namespace mixrt::sdk

#endif  // MIXRT_PLUGINS_SDK_OP_TABLE_H_
