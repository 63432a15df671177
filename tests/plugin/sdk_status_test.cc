// The SDK's own Status, StatusOr, StrCat, Span and SmallVector (no Abseil in
// a plugin's DT_NEEDED), and how they meet Abseil's in the in-tree plugins.
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "mixrt/plugin_api.h"
#include "mixrt/status_macros.h"
#include "plugins/sdk/small_vector.h"
#include "plugins/sdk/span.h"
#include "plugins/sdk/status.h"
#include "plugins/sdk/strings.h"

namespace mixrt::sdk {
namespace {

TEST(SdkStatus, CodesMessagesAndText) {
  EXPECT_TRUE(OkStatus().ok());
  EXPECT_EQ(OkStatus().ToString(), "OK");
  const Status bad = InvalidArgumentError("shape [2, 3] is not [3]");
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message(), "shape [2, 3] is not [3]");
  EXPECT_EQ(bad.ToString(), "INVALID_ARGUMENT: shape [2, 3] is not [3]");
  EXPECT_TRUE(IsUnimplemented(UnimplementedError("x")));
  // Abseil's numbering: the ABI's error codes are cast from it.
  EXPECT_EQ(static_cast<int>(StatusCode::kUnimplemented),
            static_cast<int>(absl::StatusCode::kUnimplemented));
  EXPECT_EQ(static_cast<int>(StatusCode::kUnauthenticated),
            static_cast<int>(absl::StatusCode::kUnauthenticated));
}

TEST(SdkStatus, PayloadsTravelWithCopiesAndNotWithOk) {
  Status s = InternalError("step failed");
  s.SetPayload("step", "3");
  const Status copy = s;
  s.SetPayload("step", "4");
  EXPECT_EQ(copy.GetPayload("step"), "3");
  EXPECT_EQ(s.GetPayload("step"), "4");
  EXPECT_EQ(s.GetPayload("other"), std::nullopt);
  Status ok;
  ok.SetPayload("step", "1");
  EXPECT_EQ(ok.GetPayload("step"), std::nullopt);
}

TEST(SdkStatus, StatusOrHoldsAValueOrWhyNot) {
  StatusOr<std::string> value = std::string("abc");
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(*value, "abc");
  EXPECT_EQ(value->size(), 3u);
  StatusOr<std::string> error = NotFoundError("no such plugin");
  EXPECT_FALSE(error.ok());
  EXPECT_EQ(error.status().code(), StatusCode::kNotFound);
  // An OK status is no value: a bug, reported as one.
  StatusOr<int> from_ok = OkStatus();
  EXPECT_FALSE(from_ok.ok());
  EXPECT_EQ(from_ok.status().code(), StatusCode::kInternal);
  EXPECT_EQ(StatusOr<int>(7).value_or(1), 7);
  EXPECT_EQ(StatusOr<int>(AbortedError("x")).value_or(1), 1);
}

TEST(SdkStatus, ConvertsToAndFromAbseilKeepingCodeAndMessage) {
  const absl::Status a = absl::FailedPreconditionError("not ready");
  const Status s = a;
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "not ready");
  const absl::Status back = s;
  EXPECT_EQ(back, a);
  EXPECT_TRUE(absl::Status(OkStatus()).ok());
  EXPECT_TRUE(absl::IsUnimplemented(UnimplementedError("y")));

  const StatusOr<int> sv = 5;
  const absl::StatusOr<int> av = sv;
  ASSERT_TRUE(av.ok());
  EXPECT_EQ(*av, 5);
  const absl::StatusOr<int> ae = StatusOr<int>(OutOfRangeError("z"));
  EXPECT_EQ(ae.status().code(), absl::StatusCode::kOutOfRange);
  const StatusOr<int> se = absl::StatusOr<int>(absl::DataLossError("w"));
  EXPECT_EQ(se.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(se.status().message(), "w");
}

// The macros return across the two families, as plugin code does.
StatusOr<int> SdkHalf(int v) {
  if (v % 2 != 0) return InvalidArgumentError(StrCat(v, " is odd"));
  return v / 2;
}
absl::StatusOr<int> AbslQuarter(int v) {
  MIXRT_ASSIGN_OR_RETURN(const int half, SdkHalf(v));
  MIXRT_ASSIGN_OR_RETURN(const int quarter, SdkHalf(half));
  return quarter;
}
Status SdkCheck(int v) {
  MIXRT_RETURN_IF_ERROR(AbslQuarter(v).status());
  MIXRT_ASSIGN_OR_RETURN(const int q, AbslQuarter(v));
  if (q > 10) return absl::OutOfRangeError(absl::StrCat(q, " > 10"));
  return absl::OkStatus();
}

TEST(SdkStatus, MacrosReturnAcrossStatusFamilies) {
  EXPECT_EQ(*AbslQuarter(12), 3);
  EXPECT_EQ(AbslQuarter(6).status().message(), "3 is odd");
  EXPECT_EQ(AbslQuarter(6).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(SdkCheck(8).ok());
  EXPECT_EQ(SdkCheck(5).message(), "5 is odd");
  EXPECT_EQ(SdkCheck(44).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(SdkCheck(44).message(), "11 > 10");
}

enum Color { kRed = 2 };

TEST(SdkStrings, StrCatPrintsAsAbseilDoes) {
  EXPECT_EQ(StrCat("a", 1, " ", -2, " ", 3u, " ", int64_t{1} << 40),
            "a1 -2 3 1099511627776");
  EXPECT_EQ(StrCat(0.1, " ", 1.0f, " ", 1e-7, " ", 123456789.0),
            "0.1 1 1e-07 1.23457e+08");
  EXPECT_EQ(StrCat(kRed, MIXRT_DTYPE_BF16), "22");
  EXPECT_EQ(StrCat(std::string("s"), absl::string_view("v"), 'c', true),
            "svc1");
  std::string out = "x";
  StrAppend(&out, "=", 4);
  EXPECT_EQ(out, "x=4");
  EXPECT_EQ(StrJoin(std::vector<int>{1, 2, 3}, ", "), "1, 2, 3");
  EXPECT_EQ(StrFormat("%.3f|%5s", 1.5, "ab"), "1.500|   ab");
}

int Sum(Span<const int> values) {
  int sum = 0;
  for (int x : values) sum += x;
  return sum;
}

TEST(SdkSpan, ViewsContainersWithoutCopying) {
  std::vector<int> v = {1, 2, 3, 4};
  const Span<const int> all = v;
  EXPECT_EQ(all.size(), 4u);
  EXPECT_EQ(all.data(), v.data());
  EXPECT_EQ(all.subspan(1, 2)[1], 3);
  EXPECT_EQ(all.subspan(3).size(), 1u);
  EXPECT_EQ(all.subspan(9).size(), 0u);
  Span<int> mutable_view = v;
  mutable_view[0] = 9;
  EXPECT_EQ(v[0], 9);
  // A braced list lives for the call it is passed to (as with absl::Span).
  EXPECT_EQ(Sum({5, 6}), 11);
}

TEST(SdkSmallVector, StaysInlineThenMovesToTheHeapKeepingOrder) {
  SmallVector<int, 2> v;
  v.push_back(1);
  v.push_back(2);
  const int* inline_data = v.data();
  v.push_back(3);
  v.push_back(4);
  EXPECT_NE(v.data(), inline_data);
  ASSERT_EQ(v.size(), 4u);
  EXPECT_EQ(v[0] + v[1] * 10 + v[2] * 100 + v[3] * 1000, 4321);
  SmallVector<int, 2> copy = v;
  copy[0] = 7;
  EXPECT_EQ(v[0], 1);
  EXPECT_EQ(copy.back(), 4);
  copy = {5};
  EXPECT_EQ(copy.size(), 1u);
  EXPECT_EQ(copy.front(), 5);
}

}  // namespace
}  // namespace mixrt::sdk
