#include "plugins/sdk/op_table.h"

#include <utility>

#include "mixrt/op_names.h"
#include "plugins/sdk/strings.h"
#include "plugins/sdk/tensor_ref.h"

namespace mixrt::sdk {

OpTable::OpTable(std::string plugin, Span<const Row> rows,
                 DTypeMask default_dtypes)
    : plugin_(std::move(plugin)) {
  for (const Row& row : rows) {
    const int op = static_cast<int>(row.op);
    if (op < 0 || op >= MIXRT_OP_COUNT || row.kernel == nullptr) {
      StrAppend(&bad_rows_, " a row for op ", op, " (out of range or ",
                "without a kernel);");
    } else if (kernels_[op] != nullptr) {
      StrAppend(&bad_rows_, " two rows for ", MixrtOpName(row.op), ";");
    } else {
      kernels_[op] = row.kernel;
      dtypes_[op] = row.dtypes != 0 ? row.dtypes : default_dtypes;
      variants_[op] = row.variants;
    }
  }
}

bool OpTable::Has(MixrtOp op) const {
  const int i = static_cast<int>(op);
  return i >= 0 && i < MIXRT_OP_COUNT && kernels_[i] != nullptr;
}

std::string OpTable::Lacks(const OpQuery& query) const {
  if (!Has(query.op)) {
    return StrCat("the ", plugin_, " plugin has no kernel for ",
                  MixrtOpName(query.op));
  }
  const int op = static_cast<int>(query.op);
  const bool all_variants = variants_[op] == kAllVariants;
  if (!all_variants &&
      (query.variant >= 64 || (variants_[op] >> query.variant & 1) == 0)) {
    const std::string variant = MixrtOpVariantName(query.op, query.variant);
    return StrCat(
        "the ", plugin_, " plugin's ", MixrtOpName(query.op),
        " kernel does not run ",
        variant.empty() ? StrCat("variant ", query.variant) : variant);
  }
  for (MixrtDtype dtype : {query.dtype, query.out_dtype}) {
    const int d = static_cast<int>(dtype);
    if (d < 0 || d >= MIXRT_DTYPE_COUNT || (dtypes_[op] >> d & 1) == 0) {
      return StrCat("the ", plugin_, " plugin's ", MixrtOpName(query.op),
                    " kernel does not run ", DtypeName(dtype));
    }
  }
  return "";
}

Status OpTable::Run(const KernelCall& call) const {
  if (!bad_rows_.empty()) {
    return InternalError(
        StrCat("the ", plugin_, " plugin's op table has", bad_rows_));
  }
  if (!Has(call.op)) {
    return UnimplementedError(StrCat("the ", plugin_,
                                     " plugin does not implement op ",
                                     MixrtOpName(call.op), " (", call.op, ")"));
  }
  return kernels_[call.op](call);
}

}  // namespace mixrt::sdk
