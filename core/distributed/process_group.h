// The collectives data parallelism runs on: one ProcessGroup per process,
// over a collectives plugin (include/mixrt/collectives_api.h) loaded at run
// time: MPI for host-memory devices, NCCL for CUDA (built, unrun here).
//
//   // mpirun -np 2 ./train
//   MIXRT_ASSIGN_OR_RETURN(auto group, distributed::ProcessGroup::Create());
//   MIXRT_ASSIGN_OR_RETURN(distributed::Work work,
//                          group->AllReduce(grad,
//                          distributed::ReduceOp::kAvg));
//   MIXRT_RETURN_IF_ERROR(work.Wait());
//
// Every collective is asynchronous: the caller keeps computing while the
// plugin's own thread moves the data, and Wait() returns the result or, after
// the timeout, an error naming the ranks that never arrived. A timed-out
// group is broken for good; destroying it then aborts the whole job (every
// rank ends), because peers stuck in a collective can never leave cleanly.
#ifndef MIXRT_CORE_DISTRIBUTED_PROCESS_GROUP_H_
#define MIXRT_CORE_DISTRIBUTED_PROCESS_GROUP_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "core/tensor/tensor.h"
#include "mixrt/collectives_api.h"

namespace mixrt::distributed {

enum class ReduceOp { kSum, kAvg, kMax };

// Overrides the default timeout of every collective, in seconds.
inline constexpr char kTimeoutEnv[] = "MIXRT_DIST_TIMEOUT_S";
// An explicit collectives plugin file (else the bundled or installed one).
inline constexpr char kCommPluginEnv[] = "MIXRT_COMM_PLUGIN";
// The number of ranks a job script expects (expected_world_size's default).
inline constexpr char kExpectedWorldSizeEnv[] = "MIXRT_EXPECTED_WORLD_SIZE";

struct ProcessGroupOptions {
  std::string backend = "mpi";  // Loads libmixrtcomm_<backend>.so.
  // How long a collective may wait for its peers; 0: MIXRT_DIST_TIMEOUT_S,
  // else 300 s (PyTorch's default is 30 minutes; a stuck job should not
  // hold a machine that long by default).
  double timeout_s = 0;
  // When set (else from MIXRT_EXPECTED_WORLD_SIZE), a launch with another
  // number of ranks is refused (the mismatch a hostfile or -np typo makes).
  std::optional<int> expected_world_size;
  std::string plugin_path;  // Explicit file; else kCommPluginEnv, else found.
  // Device-memory plugins (NCCL) learn their rank and exchange their
  // rendezvous data through a host group: this one (an MPI group the
  // program already has), else one created for the purpose.
  std::shared_ptr<class ProcessGroup> bootstrap;
};

// One collective in flight. Holds the tensors it reads and writes until it
// is waited for; waits on destruction if nobody did.
class Work {
 public:
  Work() = default;
  Work(Work&& other) noexcept;
  Work& operator=(Work&& other) noexcept;
  ~Work();

  // Blocks until done: OK, or the error (Unavailable, naming the ranks that
  // never arrived, after a timeout of `timeout_s`, else the group's). Later
  // calls return the same status.
  absl::Status Wait(double timeout_s = 0);
  bool pending() const { return work_ != nullptr; }

 private:
  friend class ProcessGroup;
  const MixrtCollectivesApi* api_ = nullptr;
  MixrtCollectiveWork* work_ = nullptr;
  std::vector<Tensor> keep_alive_;
  // Written by the collective: their storage versions are bumped when it
  // completes, so that nothing keyed by a version (autocast's cached weight
  // casts) outlives data that changed behind the runtime's back.
  std::vector<Tensor> written_;
  absl::Status status_;
};

class ProcessGroup {
 public:
  // Loads the plugin and joins the job this process was launched in. A
  // process not started by mpirun is a job of one.
  static absl::StatusOr<std::shared_ptr<ProcessGroup>> Create(
      ProcessGroupOptions options = {});
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  // "mpi (Open MPI v4.1.4)".
  std::string description() const;
  double timeout_s() const { return timeout_s_; }

  // In place, on a contiguous f32, bf16 or f16 tensor.
  absl::StatusOr<Work> AllReduce(const Tensor& tensor, ReduceOp op);
  // In place: rank `root`'s contents everywhere (any dtype).
  absl::StatusOr<Work> Broadcast(const Tensor& tensor, int root);
  // `output` holds world_size blocks the size of `input`, rank r's at r.
  absl::StatusOr<Work> AllGather(const Tensor& input, const Tensor& output);
  absl::Status Barrier();

  // Ends the job on every rank now, printing `reason` (what a rank does
  // when it cannot go on but its peers would wait for it forever).
  [[noreturn]] void Abort(const std::string& reason);

 private:
  ProcessGroup() = default;
  static int BootstrapBroadcast(void* group, void* data, size_t bytes);
  absl::StatusOr<Work> Finish(int code, MixrtCollectiveWork* work,
                              std::string what, std::vector<Tensor> keep,
                              std::vector<Tensor> written);
  absl::Status CheckTensor(const Tensor& t, const char* op) const;

  void* library_ = nullptr;
  const MixrtCollectivesApi* api_ = nullptr;
  MixrtCommunicator* comm_ = nullptr;
  int rank_ = 0;
  int world_size_ = 1;
  bool device_memory_ = false;
  std::string backend_, library_name_;
  std::shared_ptr<ProcessGroup> bootstrap_;
  double timeout_s_ = 300;
};

// Every rank returns the worst status any rank passed in: its own when it
// failed, else "`what` failed on another rank (its own error says why)"
// with the failing rank's code (the message stays with that rank). A
// collective: every rank calls it. For steps one rank does for all (rank
// 0 claims and writes a checkpoint) whose failure must not leave the
// others waiting until the collective timeout.
absl::Status AgreeOnOutcome(ProcessGroup& group, const Device& device,
                            const absl::Status& mine, const std::string& what);

}  // namespace mixrt::distributed

#endif  // MIXRT_CORE_DISTRIBUTED_PROCESS_GROUP_H_
