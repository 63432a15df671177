// The SDK's default per-op answer (sdk::Plugin::GetOpSupport): a plugin
// claims exactly what its sdk::OpTable registers — the rows' dtypes and
// variants, at its class matrix's speed — and without a table nothing.
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "plugins/sdk/op_table.h"
#include "plugins/sdk/plugin.h"

namespace mixrt::sdk {
namespace {

sdk::Status Never(const KernelCall&) {
  return sdk::InternalError("not launched in this test");
}

// A plugin whose class matrix says f32 native, f16 slow, bf16 unsupported,
// with the table (or none) a test gives it.
class TablePlugin : public HostMemoryPlugin {
 public:
  explicit TablePlugin(const OpTable* table) : table_(table) {}
  PluginInfo Info() const override { return {"t", "0", "", "cpu"}; }
  DeviceCount CountDevices() override { return {1, ""}; }
  sdk::StatusOr<DeviceProperties> GetDeviceProperties(int) override {
    return DeviceProperties{"t", 0, MIXRT_DEVICE_FLAG_HOST_MEMORY, 64};
  }
  Capability GetCapability(int, MixrtOpClass, MixrtDtype dtype) override {
    if (dtype == MIXRT_DTYPE_F32) return {MIXRT_SUPPORT_NATIVE, "", 0};
    if (dtype == MIXRT_DTYPE_F16) return {MIXRT_SUPPORT_SLOW, "emulated", 0};
    return Unsupported("no bf16 here");
  }
  const OpTable* Ops() const override { return table_; }
  sdk::Status Launch(const KernelCall& call) override {
    return table_ != nullptr ? table_->Run(call)
                             : sdk::UnimplementedError("no table");
  }

 private:
  const OpTable* table_;
};

OpQuery Query(MixrtOp op, uint32_t variant, MixrtDtype dtype,
              MixrtDtype out_dtype) {
  OpQuery q;
  q.op = op;
  q.variant = variant;
  q.dtype = dtype;
  q.out_dtype = out_dtype;
  return q;
}

OpQuery Query(MixrtOp op, uint32_t variant, MixrtDtype dtype) {
  return Query(op, variant, dtype, dtype);
}

TEST(SdkOpSupport, WithoutATableThePluginRunsNothingAndSaysWhy) {
  TablePlugin plugin(nullptr);
  const Capability c = plugin.GetOpSupport(
      0, Query(MIXRT_OP_BINARY, MIXRT_BINARY_ADD, MIXRT_DTYPE_F32));
  EXPECT_EQ(c.level, MIXRT_SUPPORT_UNSUPPORTED);
  EXPECT_NE(c.reason.find("declares no ops"), std::string::npos) << c.reason;
  EXPECT_EQ(
      plugin.GetOpSupport(0, Query(MIXRT_OP_FILL, 0, MIXRT_DTYPE_I64)).level,
      MIXRT_SUPPORT_UNSUPPORTED);
}

TEST(SdkOpSupport, RowsWithDtypesAndVariantsClaimExactlyThose) {
  const OpTable table("t", {{MIXRT_OP_BINARY, Never, DTypes({MIXRT_DTYPE_F32}),
                             Variants({MIXRT_BINARY_ADD, MIXRT_BINARY_MUL})},
                            {MIXRT_OP_COPY, Never, DTypes({MIXRT_DTYPE_F32})}});
  TablePlugin plugin(&table);
  auto level = [&](const OpQuery& q) {
    return plugin.GetOpSupport(0, q).level;
  };
  EXPECT_EQ(level(Query(MIXRT_OP_BINARY, MIXRT_BINARY_ADD, MIXRT_DTYPE_F32)),
            MIXRT_SUPPORT_NATIVE);
  EXPECT_EQ(level(Query(MIXRT_OP_BINARY, MIXRT_BINARY_MUL, MIXRT_DTYPE_F32)),
            MIXRT_SUPPORT_NATIVE);
  const Capability sub = plugin.GetOpSupport(
      0, Query(MIXRT_OP_BINARY, MIXRT_BINARY_SUB, MIXRT_DTYPE_F32));
  EXPECT_EQ(sub.level, MIXRT_SUPPORT_UNSUPPORTED);
  EXPECT_NE(sub.reason.find("does not run sub"), std::string::npos)
      << sub.reason;
  // f16 is in the class matrix (slow) but not in the row.
  EXPECT_EQ(level(Query(MIXRT_OP_BINARY, MIXRT_BINARY_ADD, MIXRT_DTYPE_F16)),
            MIXRT_SUPPORT_UNSUPPORTED);
  // Integers were claimed by the old default for every op; not here.
  EXPECT_EQ(level(Query(MIXRT_OP_BINARY, MIXRT_BINARY_ADD, MIXRT_DTYPE_I32)),
            MIXRT_SUPPORT_UNSUPPORTED);
  // A cast's output dtype counts too.
  EXPECT_EQ(level(Query(MIXRT_OP_COPY, 0, MIXRT_DTYPE_F32)),
            MIXRT_SUPPORT_NATIVE);
  EXPECT_EQ(level(Query(MIXRT_OP_COPY, 0, MIXRT_DTYPE_F32, MIXRT_DTYPE_BF16)),
            MIXRT_SUPPORT_UNSUPPORTED);
  // An op of a supported class without a row: not claimed.
  const Capability unary = plugin.GetOpSupport(
      0, Query(MIXRT_OP_UNARY, MIXRT_UNARY_RELU, MIXRT_DTYPE_F32));
  EXPECT_EQ(unary.level, MIXRT_SUPPORT_UNSUPPORTED);
  EXPECT_NE(unary.reason.find("no kernel for unary"), std::string::npos)
      << unary.reason;
}

TEST(SdkOpSupport, RowsWithoutDtypesTakeTheTablesAtTheClassMatrixSpeed) {
  const OpTable floating("t", {{MIXRT_OP_BINARY, Never}});
  TablePlugin plugin(&floating);
  const Capability f16 = plugin.GetOpSupport(
      0, Query(MIXRT_OP_BINARY, MIXRT_BINARY_SUB, MIXRT_DTYPE_F16));
  EXPECT_EQ(f16.level, MIXRT_SUPPORT_SLOW);
  EXPECT_EQ(f16.reason, "emulated");
  EXPECT_EQ(plugin
                .GetOpSupport(0, Query(MIXRT_OP_BINARY, MIXRT_BINARY_SUB,
                                       MIXRT_DTYPE_BF16))
                .level,
            MIXRT_SUPPORT_UNSUPPORTED);
  EXPECT_EQ(plugin
                .GetOpSupport(0, Query(MIXRT_OP_BINARY, MIXRT_BINARY_SUB,
                                       MIXRT_DTYPE_I64))
                .level,
            MIXRT_SUPPORT_UNSUPPORTED);

  const OpTable all("t", {{MIXRT_OP_COPY, Never}, {MIXRT_OP_COMPARE, Never}},
                    kAllDTypes);
  TablePlugin integers(&all);
  EXPECT_EQ(integers
                .GetOpSupport(0, Query(MIXRT_OP_COMPARE, MIXRT_COMPARE_LT,
                                       MIXRT_DTYPE_I64, MIXRT_DTYPE_BOOL))
                .level,
            MIXRT_SUPPORT_NATIVE);
  // From an integer to a float: the class's speed at the float.
  EXPECT_EQ(integers
                .GetOpSupport(0, Query(MIXRT_OP_COPY, 0, MIXRT_DTYPE_I64,
                                       MIXRT_DTYPE_BF16))
                .level,
            MIXRT_SUPPORT_UNSUPPORTED);
  EXPECT_EQ(integers
                .GetOpSupport(0, Query(MIXRT_OP_COPY, 0, MIXRT_DTYPE_I64,
                                       MIXRT_DTYPE_F16))
                .level,
            MIXRT_SUPPORT_SLOW);
}

TEST(SdkOpSupport, TheClassMatrixAnswerClaimsWholeClassesWhenAskedFor) {
  TablePlugin plugin(nullptr);
  EXPECT_EQ(plugin
                .OpSupportFromClassMatrix(
                    0, Query(MIXRT_OP_UNARY, MIXRT_UNARY_GELU, MIXRT_DTYPE_F32))
                .level,
            MIXRT_SUPPORT_NATIVE);
  EXPECT_EQ(
      plugin
          .OpSupportFromClassMatrix(
              0, Query(MIXRT_OP_BINARY, MIXRT_BINARY_ADD, MIXRT_DTYPE_I32))
          .level,
      MIXRT_SUPPORT_NATIVE);
}

}  // namespace
}  // namespace mixrt::sdk
