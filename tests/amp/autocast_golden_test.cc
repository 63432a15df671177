// Output dtypes under CPU autocast equal PyTorch's, row by row, for every op
// mixrt shares with it: tests/amp/golden/autocast_cpu_dtypes.tsv was written
// by tools/golden/autocast_dtypes.py running torch.autocast("cpu").
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_split.h"
#include "core/amp/autocast/autocast.h"
#include "core/amp/autocast/autocast_policy.h"
#include "core/dtype.h"
#include "gtest/gtest.h"
#include "tests/amp/autocast_ops.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

struct GoldenRow {
  std::string op, autocast_dtype, input_dtype, output_dtype;
};

std::vector<GoldenRow> ReadGolden() {
  std::ifstream in(
      testing::RunfilePath("tests/amp/golden/autocast_cpu_dtypes.tsv"));
  std::vector<GoldenRow> rows;
  std::string line;
  bool header = true;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (header) {  // op autocast_dtype input_dtype output_dtype
      header = false;
      continue;
    }
    std::vector<std::string> f = absl::StrSplit(line, '\t');
    if (f.size() == 4) rows.push_back({f[0], f[1], f[2], f[3]});
  }
  return rows;
}

DType Parse(const std::string& name) {
  auto d = ParseDType(name);
  EXPECT_TRUE(d.ok()) << name;
  return d.ok() ? *d : DType::kF32;
}

TEST(AutocastGolden, OutputDtypesMatchPyTorchOnEveryRow) {
  const Device d = testing::ReferenceDevice();
  const std::vector<GoldenRow> rows = ReadGolden();
  // 37 ops x 2 autocast dtypes x 3 input dtypes.
  ASSERT_EQ(rows.size(), 37u * 2 * 3);
  int checked = 0;
  for (const GoldenRow& row : rows) {
    auto call = testing::AutocastOps().find(row.op);
    ASSERT_NE(call, testing::AutocastOps().end())
        << "golden op " << row.op << " has no mixrt call";
    AutocastGuard guard("cpu", Parse(row.autocast_dtype));
    absl::StatusOr<Tensor> out = call->second(d, Parse(row.input_dtype));
    if (row.output_dtype == "error") {
      // PyTorch refused it (a promote-list op given a lower-precision dtype
      // other than autocast's): so must mixrt.
      EXPECT_FALSE(out.ok())
          << row.op << " under " << row.autocast_dtype << " autocast with "
          << row.input_dtype << " inputs should be refused";
      ++checked;
      continue;
    }
    ASSERT_TRUE(out.ok()) << row.op << ": " << out.status();
    EXPECT_EQ(DTypeName(out->dtype()), row.output_dtype)
        << row.op << " under " << row.autocast_dtype << " autocast with "
        << row.input_dtype << " inputs";
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(rows.size()));
}

// A live policy entry for an op mixrt lacks would be a promise nothing
// keeps: every entry must be an op the test can call, and the call works.
TEST(AutocastPolicy, EveryLiveEntryIsAnImplementedOp) {
  const Device d = testing::ReferenceDevice();
  for (auto table : {CpuAutocastPolicy(), CudaAutocastPolicy()}) {
    for (const AutocastPolicyEntry& e : table) {
      auto call = testing::AutocastOps().find(std::string(e.op));
      ASSERT_NE(call, testing::AutocastOps().end())
          << e.op << " is in a policy table but mixrt has no such op";
      EXPECT_TRUE(call->second(d, DType::kF32).ok()) << e.op;
    }
  }
}

}  // namespace
}  // namespace mixrt
