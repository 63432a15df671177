// Element types of mixrt tensors. Values equal the ABI's MixrtDtype.
#ifndef MIXRT_CORE_DTYPE_H_
#define MIXRT_CORE_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "mixrt/plugin_api.h"

namespace mixrt {

enum class DType : uint8_t {
  kF32 = MIXRT_DTYPE_F32,
  kF16 = MIXRT_DTYPE_F16,
  kBF16 = MIXRT_DTYPE_BF16,
  kI32 = MIXRT_DTYPE_I32,
  kI64 = MIXRT_DTYPE_I64,
  kBool = MIXRT_DTYPE_BOOL,
};

inline constexpr int kNumDTypes = MIXRT_DTYPE_COUNT;

size_t DTypeSize(DType dtype);
absl::string_view DTypeName(DType dtype);  // "f32", "bf16", ...
bool IsFloating(DType dtype);
// Parses "f32"/"float32", "f16"/"float16"/"half", "bf16"/"bfloat16", ...
absl::StatusOr<DType> ParseDType(absl::string_view name);
// The dtype arithmetic on a and b computes in, as PyTorch promotes: floats
// beat integers, f16 with bf16 gives f32, wider integers win.
DType PromoteTypes(DType a, DType b);

inline MixrtDtype ToAbi(DType dtype) { return static_cast<MixrtDtype>(dtype); }

}  // namespace mixrt

#endif  // MIXRT_CORE_DTYPE_H_
