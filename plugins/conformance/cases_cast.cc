#include <cmath>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/tensor/factories.h"
#include "gtest/gtest.h"
#include "mixrt/status_macros.h"
#include "plugins/conformance/case_util.h"

namespace mixrt::conformance {

void AddCastCases(std::vector<Case>* cases) {
  const DType all[] = {DType::kF32, DType::kF16, DType::kBF16,
                       DType::kI32, DType::kI64, DType::kBool};
  for (DType from : kFloatTypes) {
    for (DType to : all) {
      // A tensor's to() its own dtype launches nothing: such a case would
      // pass on any plugin (an f32-only one listed "ok" for bf16_to_bf16).
      // Same-dtype copies are the copy/ cases below.
      if (from == to) continue;
      for (Values values : {Values::kWide, Values::kSpecial}) {
        const InputSpec x{{37, 5}, from, values, true};
        cases->push_back(
            {absl::StrCat("cast/", DTypeName(from), "_to_", DTypeName(to),
                          values == Values::kWide ? "/wide" : "/special"),
             MIXRT_OP_CLASS_CAST, from, [=](const Devices& d) {
               CompareOp(
                   d, {x},
                   [to](const std::vector<Tensor>& in) {
                     return One(in[0].to(to));
                   },
                   Fixed({0, 0, {}}), kSeed);  // Conversions are exact.
             }});
      }
    }
  }
  // Copies into dense memory (contiguous) from a broadcast (stride 0, as
  // the gradient of a sum arrives), a permute that keeps the last axis, and
  // one that moves it: each element lands exactly.
  for (DType dtype : kFloatTypes) {
    cases->push_back(
        {absl::StrCat("copy/strided_to_dense/", DTypeName(dtype)),
         MIXRT_OP_CLASS_CAST, dtype, [=](const Devices& d) {
           CompareOp(
               d, {{{1, 1, 1}, dtype}, {{6, 5, 4, 33}, dtype}},
               [](const std::vector<Tensor>& in)
                   -> absl::StatusOr<std::vector<Tensor>> {
                 MIXRT_ASSIGN_OR_RETURN(Tensor wide, in[0].expand({6, 70, 33}));
                 MIXRT_ASSIGN_OR_RETURN(Tensor broadcast, wide.contiguous());
                 MIXRT_ASSIGN_OR_RETURN(Tensor heads,
                                        in[1].permute({0, 2, 1, 3}));
                 MIXRT_ASSIGN_OR_RETURN(Tensor merged, heads.contiguous());
                 MIXRT_ASSIGN_OR_RETURN(Tensor moved,
                                        in[1].permute({3, 1, 0, 2}));
                 MIXRT_ASSIGN_OR_RETURN(Tensor transposed, moved.contiguous());
                 return std::vector<Tensor>{broadcast, merged, transposed};
               },
               Fixed({0, 0, {}}), kSeed);
         }});
  }
  // out[i] = start + i * step: each element one rounding of the value
  // computed in double (integers exactly), with start and step that are
  // not sums of powers of two (a fraction of a unit per step adds up in
  // f32 loops). The double computation may or may not fuse its multiply
  // and add, which near 0 (element 33 here) shows: 2^-52 of the terms.
  for (DType dtype :
       {DType::kF32, DType::kF16, DType::kBF16, DType::kI32, DType::kI64}) {
    cases->push_back(
        {absl::StrCat("arange/ramp/", DTypeName(dtype)), MIXRT_OP_CLASS_CAST,
         dtype, [dtype](const Devices& d) {
           const bool floating = IsFloating(dtype);
           const double start = floating ? -3.3 : -1000;
           const double step = floating ? 0.1 : 7;
           const double end = start + 2049 * step;
           auto a = arange(start, end, step, dtype, d.plugin);
           auto b = arange(start, end, step, dtype, d.reference);
           CONFORMANCE_ASSERT_RAN(a.status());
           ASSERT_TRUE(b.ok()) << b.status();
           auto got = a->to_double_vector();
           auto want = b->to_double_vector();
           ASSERT_TRUE(got.ok() && want.ok());
           ASSERT_EQ(got->size(), want->size());
           const double unit = floating ? 2 * UnitRoundoff(dtype) : 0;
           for (size_t i = 0; i < want->size(); ++i) {
             const double terms = std::fabs(start) + i * std::fabs(step);
             ASSERT_LE(std::fabs((*got)[i] - (*want)[i]),
                       unit * std::fabs((*want)[i]) + 0x1p-52 * terms)
                 << "element " << i << ": plugin " << (*got)[i]
                 << ", reference " << (*want)[i];
           }
         }});
  }
  for (DType dtype : kFloatTypes) {
    cases->push_back(
        {absl::StrCat("random/normal_and_uniform/", DTypeName(dtype)),
         MIXRT_OP_CLASS_CAST, dtype, [dtype](const Devices& d) {
           // Same seed and offset on both devices: the ABI fixes the bits.
           for (bool normal : {false, true}) {
             Generator g1(99), g2(99);
             auto a = normal ? randn({513, 3}, dtype, d.plugin, 0, 1, &g1)
                             : rand({513, 3}, dtype, d.plugin, -2, 3, &g1);
             auto b = normal ? randn({513, 3}, dtype, d.reference, 0, 1, &g2)
                             : rand({513, 3}, dtype, d.reference, -2, 3, &g2);
             CONFORMANCE_ASSERT_RAN(a.status());
             ASSERT_TRUE(b.ok()) << b.status();
             EXPECT_EQ(*a->to_bytes(), *b->to_bytes())
                 << (normal ? "randn" : "rand");
           }
         }});
  }
}

}  // namespace mixrt::conformance
