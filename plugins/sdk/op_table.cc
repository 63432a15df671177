#include "plugins/sdk/op_table.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "mixrt/op_names.h"

namespace mixrt::sdk {

OpTable::OpTable(std::string plugin, absl::Span<const Row> rows)
    : plugin_(std::move(plugin)) {
  for (const Row& row : rows) {
    const int op = static_cast<int>(row.op);
    if (op < 0 || op >= MIXRT_OP_COUNT || row.kernel == nullptr) {
      absl::StrAppend(&bad_rows_, " a row for op ", op, " (out of range or ",
                      "without a kernel);");
    } else if (kernels_[op] != nullptr) {
      absl::StrAppend(&bad_rows_, " two rows for ", MixrtOpName(row.op), ";");
    } else {
      kernels_[op] = row.kernel;
    }
  }
}

bool OpTable::Has(MixrtOp op) const {
  const int i = static_cast<int>(op);
  return i >= 0 && i < MIXRT_OP_COUNT && kernels_[i] != nullptr;
}

absl::Status OpTable::Run(const KernelCall& call) const {
  if (!bad_rows_.empty()) {
    return absl::InternalError(
        absl::StrCat("the ", plugin_, " plugin's op table has", bad_rows_));
  }
  if (!Has(call.op)) {
    return absl::UnimplementedError(
        absl::StrCat("the ", plugin_, " plugin does not implement op ",
                     MixrtOpName(call.op), " (", call.op, ")"));
  }
  return kernels_[call.op](call);
}

}  // namespace mixrt::sdk
