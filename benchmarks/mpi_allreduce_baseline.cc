// MPI's own blocking MPI_Allreduce (f32 sum) at the sizes ddp_benchmark
// --mode=allreduce uses: the baseline ddp_benchmark.sh compares with.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int reps = 8;
  for (long mib : {1, 4, 16, 64, 256}) {
    std::vector<float> data(mib * 1048576 / 4, 1.0f);
    std::vector<double> ms;
    for (int i = 0; i <= reps; ++i) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double start = MPI_Wtime();
      MPI_Allreduce(MPI_IN_PLACE, data.data(), static_cast<int>(data.size()),
                    MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      if (i > 0) ms.push_back((MPI_Wtime() - start) * 1000);
    }
    std::sort(ms.begin(), ms.end());
    if (rank == 0) {
      std::printf("allreduce MPI   %4ld MiB: %8.2f ms  %6.2f GB/s\n", mib,
                  ms[ms.size() / 2], mib * 1.048576 / ms[ms.size() / 2]);
    }
  }
  MPI_Finalize();
  return 0;
}
