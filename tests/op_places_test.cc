// Every op of the ABI in each of its places: a name (op_names.h), a
// capability class (op_class.h), a kernel in the reference plugin and in
// the CPU plugin, and a conformance case that runs it. docs/contributing.md
// lists the files of each place; this test names the op and the place it is
// missing from, so a new op cannot half-land.
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_join.h"
#include "core/tensor/op_profile.h"
#include "gtest/gtest.h"
#include "mixrt/op_class.h"
#include "mixrt/op_names.h"
#include "mixrt/plugin_api.h"
#include "plugins/conformance/conformance_cases.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

// As ggml's static_assert(GGML_OP_COUNT == N): raising the count is the
// moment to walk docs/contributing.md's list for the new op.
static_assert(MIXRT_OP_COUNT == 38,
              "a new MixrtOp: give it every place docs/contributing.md "
              "lists (\"Add an op\"), then raise this count");

std::vector<MixrtOp> AllOps() {
  std::vector<MixrtOp> ops;
  for (int op = 0; op < MIXRT_OP_COUNT; ++op) {
    ops.push_back(static_cast<MixrtOp>(op));
  }
  return ops;
}

TEST(OpPlacesTest, EveryOpHasANameAndACapabilityClass) {
  std::set<std::string> names;
  for (MixrtOp op : AllOps()) {
    const std::string name = MixrtOpName(op);
    EXPECT_NE(name, "unknown op")
        << "op " << op << " has no name in op_names.h";
    EXPECT_TRUE(names.insert(name).second) << "two ops are named " << name;
    EXPECT_NE(MixrtOpClassOf(op), MIXRT_OP_CLASS_COUNT)
        << name << " has no capability class in op_class.h";
  }
}

// A launch without tensors reaches each plugin's op dispatch, which either
// knows the op (and refuses the call's arity) or answers UNIMPLEMENTED.
void ExpectDispatchKnowsEveryOp(const Device& device) {
  for (MixrtOp op : AllOps()) {
    const absl::Status status =
        device.backend()->Launch(device.index(), op, {}, {}, nullptr);
    EXPECT_FALSE(status.ok()) << MixrtOpName(op) << " ran without tensors";
    EXPECT_NE(status.code(), absl::StatusCode::kUnimplemented)
        << device.backend()->name() << " has no kernel for " << MixrtOpName(op)
        << ": " << status;
  }
}

TEST(OpPlacesTest, TheReferencePluginHasAKernelForEveryOp) {
  ExpectDispatchKnowsEveryOp(testing::ReferenceDevice());
}

TEST(OpPlacesTest, TheCpuPluginHasAKernelForEveryOp) {
  ExpectDispatchKnowsEveryOp(testing::CpuDevice());
}

// The op names a conformance case launched (the op profile's keys start
// with the op's name).
std::set<std::string> OpsLaunchedBy(const conformance::Case& c,
                                    const conformance::Devices& devices) {
  ResetOpProfile();
  c.run(devices);
  std::set<std::string> ops;
  for (const OpProfileEntry& e : OpProfileEntries()) {
    ops.insert(e.op.substr(0, e.op.find(' ')));
  }
  return ops;
}

// Cases run on the reference against itself, in the suite's order, until
// every op has been launched by one: a few seconds when all are covered.
TEST(OpPlacesTest, EveryOpHasAConformanceCase) {
  std::set<std::string> missing;
  for (MixrtOp op : AllOps()) missing.insert(MixrtOpName(op));
  const conformance::Devices devices{testing::ReferenceDevice(),
                                     testing::ReferenceDevice()};
  EnableOpProfile(true);
  for (const conformance::Case& c : conformance::AllCases()) {
    for (const std::string& op : OpsLaunchedBy(c, devices)) missing.erase(op);
    if (missing.empty() || HasFatalFailure()) break;
  }
  EnableOpProfile(false);
  EXPECT_TRUE(missing.empty())
      << "no conformance case (plugins/conformance/cases_*.cc) launches "
      << absl::StrJoin(missing, ", ");
}

}  // namespace
}  // namespace mixrt
