// A 2-rank DDP training loop in which rank 1 fails at step 3, for
// fault_mpi_test.sh and multihost_mpi_test.sh:
// `fault_worker kill|hang|stop|linkdown|nojoin|none`. linkdown runs the command
// in $MIXRT_FAULT_LINK_DOWN (taking the network link between the hosts down)
// and carries on. The surviving rank must end the job with an error naming
// rank 1 within the timeout. With $MIXRT_FAULT_LOG_DIR, a failing rank
// also writes its error to rank<N>.log there.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "core/distributed/distributed_data_parallel.h"
#include "core/functional/ops.h"
#include "core/nn/module.h"
#include "core/tensor/factories.h"
#include "tests/testing/test_plugins.h"

int main(int argc, char** argv) {
  using namespace mixrt;
  const char* fault = argc > 1 ? argv[1] : "none";
  // nojoin: rank 1 never joins the job (stuck before its process group).
  const char* env_rank = std::getenv("OMPI_COMM_WORLD_RANK");
  if (std::strcmp(fault, "nojoin") == 0 && env_rank != nullptr &&
      std::strcmp(env_rank, "1") == 0) {
    std::fprintf(stderr, "rank 1: never joining\n");
    std::fflush(stderr);
    for (;;) pause();
  }
  auto group = distributed::ProcessGroup::Create();
  if (!group.ok()) {
    std::fprintf(stderr, "%s\n", group.status().ToString().c_str());
    std::fflush(stderr);
    std::_Exit(2);  // Its MPI_Init may still be waiting in another thread.
  }
  const int rank = (*group)->rank();
  const Device device = testing::CpuDevice();
  Generator g(1);
  auto model = *nn::MLP({8, 16, 2}, device, &g);
  auto ddp = distributed::DistributedDataParallel::Create(model, *group);
  if (!ddp.ok()) {
    std::fprintf(stderr, "%s\n", ddp.status().ToString().c_str());
    return 2;
  }
  for (int step = 0; step < 6; ++step) {
    if (step == 3 && rank == 1) {
      std::fprintf(stderr, "rank 1: injecting '%s' at step 3\n", fault);
      std::fflush(stderr);
      if (std::strcmp(fault, "kill") == 0) raise(SIGKILL);
      if (std::strcmp(fault, "stop") == 0) raise(SIGSTOP);
      if (std::strcmp(fault, "linkdown") == 0) {
        const char* command = std::getenv("MIXRT_FAULT_LINK_DOWN");
        if (command == nullptr || std::system(command) != 0) {
          std::fprintf(stderr, "rank 1: could not take the link down\n");
          return 3;
        }
      }
      if (std::strcmp(fault, "hang") == 0) {
        for (;;) pause();
      }
    }
    Tensor x = *randn({4, 8}, DType::kF32, device, 0, 1, &g);
    Tensor y = *randn({4, 2}, DType::kF32, device, 0, 1, &g);
    absl::Status status = (*mse_loss(*(*ddp)->forward(x), y)).backward();
    if (!status.ok()) {
      std::fprintf(stderr, "rank %d: step %d failed: %s\n", rank, step,
                   status.ToString().c_str());
      // A rank on a host cut off from mpirun cannot send it its output:
      // it leaves its error where the test can read it too.
      if (const char* dir = std::getenv("MIXRT_FAULT_LOG_DIR")) {
        const std::string path =
            std::string(dir) + "/rank" + std::to_string(rank) + ".log";
        if (FILE* f = std::fopen(path.c_str(), "w")) {
          std::fprintf(f, "rank %d: step %d failed: %s\n", rank, step,
                       status.ToString().c_str());
          std::fclose(f);
        }
      }
      // Peers stuck in the collective can never leave: end the job.
      (*group)->Abort(std::string(status.message()));
    }
  }
  std::printf("rank %d: done\n", rank);
  return 0;
}
