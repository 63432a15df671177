// A plugin's op dispatch as one table: each op -> the kernel that runs it,
// one row per op (ggml's per-op forward functions; a dispatcher's
// registrations in miniature). Ops without a row answer UNIMPLEMENTED, so
// the host falls back or composes them.
//
//   const sdk::OpTable kOps("example", {
//       {MIXRT_OP_BINARY, RunBinary},
//       {MIXRT_OP_MATMUL, RunMatmul},
//   });
//   absl::Status Launch(const sdk::KernelCall& call) override {
//     return kOps.Run(call);
//   }
#ifndef MIXRT_PLUGINS_SDK_OP_TABLE_H_
#define MIXRT_PLUGINS_SDK_OP_TABLE_H_

#include <array>
#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "mixrt/plugin_api.h"
#include "plugins/sdk/plugin.h"

namespace mixrt::sdk {

using OpKernel = absl::Status (*)(const KernelCall& call);

class OpTable {
 public:
  struct Row {
    MixrtOp op;
    OpKernel kernel;
  };
  // `plugin` names the plugin in UNIMPLEMENTED answers. A row whose op is
  // out of range, or that repeats an op, makes Run answer INTERNAL for it
  // (and the conformance suite fail).
  OpTable(std::string plugin, absl::Span<const Row> rows);

  absl::Status Run(const KernelCall& call) const;
  bool Has(MixrtOp op) const;

 private:
  std::string plugin_;
  std::array<OpKernel, MIXRT_OP_COUNT> kernels_{};
  std::string bad_rows_;  // What is wrong with the rows, or "".
};

}  // namespace mixrt::sdk

#endif  // MIXRT_PLUGINS_SDK_OP_TABLE_H_
