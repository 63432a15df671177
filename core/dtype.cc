#include "core/dtype.h"

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace mixrt {

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF32:
    case DType::kI32:
      return 4;
    case DType::kF16:
    case DType::kBF16:
      return 2;
    case DType::kI64:
      return 8;
    case DType::kBool:
      return 1;
  }
  return 0;
}

absl::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kF16:
      return "f16";
    case DType::kBF16:
      return "bf16";
    case DType::kI32:
      return "i32";
    case DType::kI64:
      return "i64";
    case DType::kBool:
      return "bool";
  }
  return "?";
}

bool IsFloating(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16;
}

absl::StatusOr<DType> ParseDType(absl::string_view name) {
  const std::string n = absl::AsciiStrToLower(name);
  if (n == "f32" || n == "float32" || n == "float") return DType::kF32;
  if (n == "f16" || n == "float16" || n == "half") return DType::kF16;
  if (n == "bf16" || n == "bfloat16") return DType::kBF16;
  if (n == "i32" || n == "int32") return DType::kI32;
  if (n == "i64" || n == "int64" || n == "long") return DType::kI64;
  if (n == "bool") return DType::kBool;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dtype '", name,
                   "'; expected one of f32, f16, bf16, i32, i64, bool"));
}

DType PromoteTypes(DType a, DType b) {
  if (a == b) return a;
  const bool fa = IsFloating(a);
  const bool fb = IsFloating(b);
  if (fa && fb) return DType::kF32;  // Any two different float types.
  if (fa) return a;
  if (fb) return b;
  if (a == DType::kBool) return b;
  if (b == DType::kBool) return a;
  return DType::kI64;  // i32 with i64.
}

}  // namespace mixrt
