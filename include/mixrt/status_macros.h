// Early-return helpers for status values, as Abseil users write everywhere
// (Abseil 20220623 does not ship them). Shared by the core (absl::Status)
// and the plugin SDK (mixrt::sdk::Status, which converts to and from
// absl::Status), so plugin code reads like core code; they name neither
// type, so an out-of-tree plugin needs no Abseil:
//
//   MIXRT_RETURN_IF_ERROR(sdk::ExpectArity(call, 1, 1, 1));
//   MIXRT_ASSIGN_OR_RETURN(const MixrtReduceAttrs* attrs,
//                          call.GetAttrs<MixrtReduceAttrs>());
#ifndef MIXRT_STATUS_MACROS_H_
#define MIXRT_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"

#define MIXRT_STATUS_CONCAT_INNER(a, b) a##b
#define MIXRT_STATUS_CONCAT(a, b) MIXRT_STATUS_CONCAT_INNER(a, b)

#define MIXRT_RETURN_IF_ERROR(expr)                \
  do {                                             \
    auto mixrt_status_ = (expr);                   \
    if (!mixrt_status_.ok()) return mixrt_status_; \
  } while (0)

#define MIXRT_ASSIGN_OR_RETURN(lhs, expr)                                     \
  MIXRT_ASSIGN_OR_RETURN_IMPL(MIXRT_STATUS_CONCAT(mixrt_statusor_, __LINE__), \
                              lhs, expr)

#define MIXRT_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return std::move(tmp).status();    \
  lhs = std::move(tmp).value()

#endif  // MIXRT_STATUS_MACROS_H_
