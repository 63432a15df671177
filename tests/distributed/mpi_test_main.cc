// main() of the tests run under mpirun: joins the job, runs the tests on
// every rank, and makes every rank exit with the job's verdict (a failure
// on one rank fails them all), leaving MPI cleanly.
#include <cstdio>

#include "core/distributed/process_group.h"
#include "core/tensor/factories.h"
#include "gtest/gtest.h"
#include "tests/distributed/mpi_group.h"
#include "tests/testing/test_plugins.h"

namespace mixrt::testing {

std::shared_ptr<distributed::ProcessGroup>& Group() {
  static auto* group = new std::shared_ptr<distributed::ProcessGroup>();
  return *group;
}

}  // namespace mixrt::testing

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto group = mixrt::distributed::ProcessGroup::Create();
  if (!group.ok()) {
    std::fprintf(stderr, "%s\n", group.status().ToString().c_str());
    return 2;
  }
  mixrt::testing::Group() = *group;
  int failed = RUN_ALL_TESTS();
  // Every rank returns the job's verdict; failing to exchange it fails.
  bool exchanged = false;
  auto verdict =
      mixrt::from_floats({static_cast<float>(failed != 0)}, {1},
                         mixrt::DType::kF32, mixrt::testing::CpuDevice());
  if (verdict.ok()) {
    auto work =
        (*group)->AllReduce(*verdict, mixrt::distributed::ReduceOp::kMax);
    if (work.ok() && work->Wait().ok()) {
      auto value = verdict->item();
      if (value.ok()) {
        failed = *value != 0;
        exchanged = true;
      }
    }
  }
  if (!exchanged) {
    std::fprintf(stderr, "could not exchange the test verdict between ranks\n");
    failed = 1;
  }
  mixrt::testing::Group().reset();
  group->reset();
  return failed ? 1 : 0;
}
