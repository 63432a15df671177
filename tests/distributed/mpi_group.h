// The one process group of a test binary run under mpirun (MPI joins a job
// once per process), for every test in it.
#ifndef MIXRT_TESTS_DISTRIBUTED_MPI_GROUP_H_
#define MIXRT_TESTS_DISTRIBUTED_MPI_GROUP_H_

#include <memory>

#include "core/distributed/process_group.h"

namespace mixrt::testing {

// Joined by mpi_test_main.cc before the tests run, left after them.
std::shared_ptr<distributed::ProcessGroup>& Group();

}  // namespace mixrt::testing

#endif  // MIXRT_TESTS_DISTRIBUTED_MPI_GROUP_H_
