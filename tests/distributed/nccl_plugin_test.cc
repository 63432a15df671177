// The NCCL collectives plugin, on a machine without a GPU: it loads beside
// the MPI group that would bootstrap it and refuses cleanly, naming why.
// (On a GPU machine the GPU kit runs it; this test then skips.)
#include "core/distributed/process_group.h"
#include "gtest/gtest.h"
#include "tests/distributed/mpi_group.h"

namespace mixrt {
namespace {

TEST(NcclPluginTest, WithoutAGpuItSaysSoInsteadOfFailingToLoad) {
  auto group = distributed::ProcessGroup::Create(
      {.backend = "nccl", .bootstrap = testing::Group()});
  if (group.ok()) {
    GTEST_SKIP() << "a GPU is present: " << (*group)->description()
                 << " (the GPU kit exercises it)";
  }
  EXPECT_EQ(group.status().code(), absl::StatusCode::kNotFound)
      << group.status();
  EXPECT_NE(group.status().message().find("nccl could not join the job: no "
                                          "CUDA device for NCCL"),
            std::string::npos)
      << group.status();
  // The MPI group that would have bootstrapped it still works.
  EXPECT_TRUE(testing::Group()->Barrier().ok());
}

}  // namespace
}  // namespace mixrt
