// libmixrtcomm_mpi.so: the collectives ABI (include/mixrt/collectives_api.h)
// on MPI, for buffers in host memory.
//
// Two threads own MPI (MPI_THREAD_MULTIPLE), so the caller's thread never
// blocks in it and a bucket's all-reduce proceeds while backward computes
// the next one:
//   - the worker runs the collectives one at a time, in issue order, with
//     MPI's own blocking calls: its tuned algorithms move large buffers
//     twice as fast here as the non-blocking ones (MPI_Iallreduce, from
//     libnbc), measured at 64-256 MiB;
//   - the monitor initializes and finalizes MPI, answers its peers' status
//     requests on a second communicator, and watches the running
//     collective's deadline. When it passes, it asks every peer where it
//     is, which names the culprit: a peer that answers but has not reached
//     the collective (its training thread hangs), or one that does not
//     answer at all (its process is stopped or gone). The worker stays
//     blocked in MPI; leaving the job then aborts it.
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backends/mpi/sixteen_bit_reduce.h"
#include "mixrt/collectives_api.h"

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kTagStatusRequest = 1;
constexpr int kTagStatusReply = 2;
// How long a timed-out rank waits for its peers' answers.
constexpr double kStatusAnswerSeconds = 2.0;
// How long a rank waits for MPI_Abort to end the job before exiting.
constexpr int kAbortSeconds = 5;

int Fail(char* error, size_t error_size, int code, const std::string& text) {
  if (error != nullptr && error_size > 0) {
    std::snprintf(error, error_size, "%s", text.c_str());
  }
  return code;
}

std::string MpiErrorString(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) {
    return "MPI error " + std::to_string(code);
  }
  return std::string(text, length);
}

// 16-bit floats have no MPI type: they travel as MPI_UINT16_T and are
// reduced by these user operations, which round each pairwise result to
// nearest even like the device kernels do.
template <mixrt::mpi::Float16Kind kKind, bool kMax>
void Reduce16(void* in, void* inout, int* len, MPI_Datatype*) {
  const uint16_t* a = static_cast<const uint16_t*>(in);
  uint16_t* b = static_cast<uint16_t*>(inout);
  if (kMax) {
    mixrt::mpi::MaxInto16(kKind, a, b, static_cast<size_t>(*len));
  } else {
    mixrt::mpi::SumInto16(kKind, a, b, static_cast<size_t>(*len));
  }
}

// MPI_MAX on floats drops a NaN on one side (a > b ? a : b); a reduction
// must not hide one, so f32 max is ours too.
void MaxF32(void* in, void* inout, int* len, MPI_Datatype*) {
  const float* a = static_cast<const float*>(in);
  float* b = static_cast<float*>(inout);
  for (int i = 0; i < *len; ++i) {
    if (a[i] != a[i] || a[i] > b[i]) b[i] = a[i];
  }
}

struct WorkState {
  enum class Kind { kAllReduce, kBroadcast, kAllGather, kBarrier };
  Kind kind;
  uint64_t sequence = 0;
  void* data = nullptr;
  const void* send = nullptr;
  size_t count = 0;  // Elements (all-reduce) or bytes.
  MixrtDtype dtype = MIXRT_DTYPE_F32;
  MixrtCollectiveOp op = MIXRT_COLLECTIVE_SUM;
  int root = 0;
  // Set by a caller whose own wait timeout is shorter than the
  // communicator's; read by the worker.
  std::atomic<double> timeout_s{0};

  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;
  int code = MIXRT_ERROR_CODE_OK;
  std::string error;

  std::string Name() const {
    static const char* const kNames[] = {"all_reduce", "broadcast",
                                         "all_gather", "barrier"};
    return std::string(kNames[static_cast<int>(kind)]) + " #" +
           std::to_string(sequence);
  }
};

}  // namespace

struct MixrtCollectiveWork {
  std::shared_ptr<WorkState> state;
};

struct MixrtCommunicator {
  int rank = 0;
  int world_size = 1;
  // Each rank's host (MPI_Get_processor_name), exchanged at start, so a
  // failure names the machine as well as the rank.
  std::vector<std::string> hosts;
  double timeout_s = 300;
  std::string library = "Open MPI";
  // MIXRT_MPI_ALLREDUCE_CHUNK_BYTES, checked at start to be one byte count
  // every rank shares (ChunkBytesProblem).
  size_t chunk_bytes = size_t{4} << 20;

  std::thread worker;
  std::mutex mutex;
  std::condition_variable queue_cv;
  std::deque<std::shared_ptr<WorkState>> queue;
  bool stopping = false;
  std::string stop_reason;
  uint64_t issued = 0;
  // Set once a collective has timed out or failed: later calls fail at
  // once, and leaving the job aborts it.
  std::atomic<bool> broken{false};
  std::string broken_reason;

  std::thread monitor;
  // Read by the monitor while the worker runs a collective.
  std::atomic<uint64_t> completed{0};  // Last completed collective.
  std::atomic<uint64_t> in_flight{0};  // The running one, 0 when idle.
  std::atomic<int64_t> in_flight_since_ns{0};
  std::shared_ptr<WorkState> running;  // Guarded by mutex.

  MPI_Comm collectives = MPI_COMM_NULL;
  MPI_Comm control = MPI_COMM_NULL;
  MPI_Op sum_bf16 = MPI_OP_NULL, sum_f16 = MPI_OP_NULL;
  MPI_Op max_bf16 = MPI_OP_NULL, max_f16 = MPI_OP_NULL, max_f32 = MPI_OP_NULL;
  // Monitor-only state.
  std::vector<MPI_Request> replies;
  uint64_t reply_buffer[64][2];
  int next_reply = 0;

  // Initialization handshake with the caller.
  bool started = false;
  int start_code = MIXRT_ERROR_CODE_OK;
  std::string start_error;
};

namespace {

void Complete(WorkState& work, int code, std::string error) {
  std::lock_guard<std::mutex> lock(work.mutex);
  work.done = true;
  work.code = code;
  work.error = std::move(error);
  work.done_cv.notify_all();
}

// Answers every status request that has arrived: {last completed, running}.
void AnswerStatusRequests(MixrtCommunicator& c) {
  for (;;) {
    int flag = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kTagStatusRequest, c.control, &flag,
                   &status) != MPI_SUCCESS ||
        !flag) {
      return;
    }
    uint64_t ignored = 0;
    MPI_Recv(&ignored, 1, MPI_UINT64_T, status.MPI_SOURCE, kTagStatusRequest,
             c.control, MPI_STATUS_IGNORE);
    uint64_t* reply = c.reply_buffer[c.next_reply];
    c.next_reply = (c.next_reply + 1) % 64;
    reply[0] = c.completed;
    reply[1] = c.in_flight;
    MPI_Request request;
    MPI_Isend(reply, 2, MPI_UINT64_T, status.MPI_SOURCE, kTagStatusReply,
              c.control, &request);
    c.replies.push_back(request);
  }
}

void ReapReplies(MixrtCommunicator& c) {
  auto& r = c.replies;
  r.erase(std::remove_if(r.begin(), r.end(),
                         [](MPI_Request& q) {
                           int flag = 0;
                           MPI_Test(&q, &flag, MPI_STATUS_IGNORE);
                           return flag != 0;
                         }),
          r.end());
}

// Every rank's host name into c.hosts (one fixed-size slot each).
void ExchangeHosts(MixrtCommunicator& c) {
  char mine[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  MPI_Get_processor_name(mine, &length);
  std::vector<char> all(static_cast<size_t>(c.world_size) *
                        MPI_MAX_PROCESSOR_NAME);
  MPI_Allgather(mine, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(),
                MPI_MAX_PROCESSOR_NAME, MPI_CHAR, c.control);
  c.hosts.clear();
  for (int r = 0; r < c.world_size; ++r) {
    const char* name =
        all.data() + static_cast<size_t>(r) * MPI_MAX_PROCESSOR_NAME;
    c.hosts.emplace_back(name, strnlen(name, MPI_MAX_PROCESSOR_NAME));
  }
}

// "rank 1 (on host-b)".
std::string RankOnHost(const MixrtCommunicator& c, int r) {
  std::string s = "rank " + std::to_string(r);
  if (r < static_cast<int>(c.hosts.size()) && !c.hosts[r].empty()) {
    s += " (on " + c.hosts[r] + ")";
  }
  return s;
}

// Asks every peer where it is, for the message of a timed-out collective.
std::string DiagnoseTimeout(MixrtCommunicator& c, const WorkState& work,
                            double waited_s) {
  const int n = c.world_size;
  std::vector<uint64_t> answers(2 * n, 0);
  std::vector<MPI_Request> receives(n, MPI_REQUEST_NULL);
  std::vector<MPI_Request> sends(n, MPI_REQUEST_NULL);
  uint64_t ask = work.sequence;
  for (int r = 0; r < n; ++r) {
    if (r == c.rank) continue;
    MPI_Irecv(&answers[2 * r], 2, MPI_UINT64_T, r, kTagStatusReply, c.control,
              &receives[r]);
    MPI_Isend(&ask, 1, MPI_UINT64_T, r, kTagStatusRequest, c.control,
              &sends[r]);
  }
  std::vector<bool> answered(n, false);
  const Clock::time_point until =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(kStatusAnswerSeconds));
  int pending = n - 1;
  while (pending > 0 && Clock::now() < until) {
    AnswerStatusRequests(c);
    for (int r = 0; r < n; ++r) {
      if (r == c.rank || answered[r]) continue;
      int flag = 0;
      MPI_Test(&receives[r], &flag, MPI_STATUS_IGNORE);
      if (flag) {
        answered[r] = true;
        --pending;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::string culprits, reached;
  for (int r = 0; r < n; ++r) {
    if (r == c.rank) continue;
    if (!answered[r]) {
      culprits += "; " + RankOnHost(c, r) + " does not answer (its " +
                  "process crashed, was stopped or is unreachable)";
      continue;
    }
    const uint64_t last = answers[2 * r], running = answers[2 * r + 1];
    if (running == work.sequence || last >= work.sequence) {
      reached += (reached.empty() ? "" : ", ") + std::to_string(r);
    } else {
      culprits += "; " + RankOnHost(c, r) +
                  " has not reached it (its last completed collective is #" +
                  std::to_string(last) +
                  (running != 0 ? ", it is in #" + std::to_string(running)
                                : ", and it is not in any") +
                  ": its training loop is stuck or took another path)";
    }
  }
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%.1f", waited_s);
  std::string message = RankOnHost(c, c.rank) + ": " + work.Name() +
                        " did not complete within " + seconds + " s" + culprits;
  if (!reached.empty()) message += "; ranks that reached it: " + reached;
  if (culprits.empty()) {
    message +=
        "; every rank reached it (the network or MPI itself is "
        "stalled)";
  }
  // The requests' buffers go out of scope: cancel what is still pending.
  for (int r = 0; r < n; ++r) {
    if (receives[r] != MPI_REQUEST_NULL && !answered[r]) {
      MPI_Cancel(&receives[r]);
      MPI_Request_free(&receives[r]);
    }
    if (sends[r] != MPI_REQUEST_NULL) MPI_Request_free(&sends[r]);
  }
  return message;
}

// Divides data[0, count) by the world size in place.
void Average(const MixrtCommunicator& c, MixrtDtype dtype, void* data,
             size_t count) {
  const float inv = 1.0f / static_cast<float>(c.world_size);
  if (dtype == MIXRT_DTYPE_F32) {
    float* p = static_cast<float*>(data);
    for (size_t i = 0; i < count; ++i) p[i] *= inv;
    return;
  }
  mixrt::mpi::Divide16(
      dtype == MIXRT_DTYPE_BF16 ? mixrt::mpi::Float16Kind::kBF16
                                : mixrt::mpi::Float16Kind::kF16,
      static_cast<uint16_t*>(data), count, static_cast<float>(c.world_size));
}

// Bytes per MPI_Allreduce call. Open MPI 4.1's shared-memory all-reduce
// fell from 10 GB/s at 4 MiB to 2.3 GB/s at 64 MiB and beyond (measured on
// 2 ranks of these machines: a large call cycles buffers far past the
// caches), so a large all-reduce runs as pieces of this size, each averaged
// while it is still in cache. MIXRT_MPI_ALLREDUCE_CHUNK_BYTES overrides it
// (0: one call, as MPI alone does), from 0 to 1 GiB. Every rank must use the
// same value, or their calls no longer match: the ranks compare theirs when
// the communicator starts (ChunkBytesProblem).
constexpr int64_t kMaxChunkBytes = int64_t{1} << 30;

// This rank's value, or -1 when it is not a whole number of bytes from 0
// to kMaxChunkBytes ("abc", "-1" and "1e9" are refused, not read as
// something else).
int64_t ChunkBytesFromEnv() {
  const char* env = std::getenv("MIXRT_MPI_ALLREDUCE_CHUNK_BYTES");
  if (env == nullptr || *env == '\0') return int64_t{4} << 20;
  int64_t v = 0;
  for (const char* p = env; *p != '\0'; ++p) {
    if (*p < '0' || *p > '9' || v > kMaxChunkBytes) return -1;
    v = v * 10 + (*p - '0');
  }
  return v <= kMaxChunkBytes ? v : -1;
}

// Why the ranks' values (`all`, by rank) cannot run ("" when they agree).
std::string ChunkBytesProblem(const std::vector<int64_t>& all, int rank) {
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r] < 0) {
      const char* mine = std::getenv("MIXRT_MPI_ALLREDUCE_CHUNK_BYTES");
      return "rank " + std::to_string(r) +
             "'s MIXRT_MPI_ALLREDUCE_CHUNK_BYTES is not a byte count from 0 "
             "to " +
             std::to_string(kMaxChunkBytes) +
             (static_cast<int>(r) == rank && mine != nullptr
                  ? std::string(" (it is '") + mine + "')"
                  : std::string());
    }
  }
  for (size_t r = 1; r < all.size(); ++r) {
    if (all[r] != all[0]) {
      return "the ranks' MIXRT_MPI_ALLREDUCE_CHUNK_BYTES differ: rank " +
             std::to_string(r) + " has " + std::to_string(all[r]) +
             ", rank 0 " + std::to_string(all[0]) +
             " (every rank must use the same, or their calls stop matching)";
    }
  }
  return "";
}

// Runs `w` with MPI's blocking collectives.
int Execute(MixrtCommunicator& c, WorkState& w) {
  switch (w.kind) {
    case WorkState::Kind::kAllReduce: {
      MPI_Datatype type = MPI_FLOAT;
      MPI_Op op = MPI_SUM;
      const bool max = w.op == MIXRT_COLLECTIVE_MAX;
      switch (w.dtype) {
        case MIXRT_DTYPE_F32:
          op = max ? c.max_f32 : MPI_SUM;
          break;
        case MIXRT_DTYPE_BF16:
          type = MPI_UINT16_T;
          op = max ? c.max_bf16 : c.sum_bf16;
          break;
        default:
          type = MPI_UINT16_T;
          op = max ? c.max_f16 : c.sum_f16;
          break;
      }
      const size_t element = w.dtype == MIXRT_DTYPE_F32 ? 4 : 2;
      const size_t chunk_bytes = c.chunk_bytes;
      const size_t chunk = chunk_bytes == 0
                               ? std::max<size_t>(w.count, 1)
                               : std::max<size_t>(chunk_bytes / element, 1);
      char* base = static_cast<char*>(w.data);
      for (size_t begin = 0; begin < w.count; begin += chunk) {
        const size_t n = std::min(chunk, w.count - begin);
        void* piece = base + begin * element;
        const int code = MPI_Allreduce(MPI_IN_PLACE, piece, static_cast<int>(n),
                                       type, op, c.collectives);
        if (code != MPI_SUCCESS) return code;
        if (w.op == MIXRT_COLLECTIVE_AVG) Average(c, w.dtype, piece, n);
      }
      return MPI_SUCCESS;
    }
    case WorkState::Kind::kBroadcast:
      return MPI_Bcast(w.data, static_cast<int>(w.count), MPI_BYTE, w.root,
                       c.collectives);
    case WorkState::Kind::kAllGather:
      return MPI_Allgather(w.send, static_cast<int>(w.count), MPI_BYTE, w.data,
                           static_cast<int>(w.count), MPI_BYTE, c.collectives);
    case WorkState::Kind::kBarrier:
      return MPI_Barrier(c.collectives);
  }
  return MPI_ERR_OTHER;
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             Clock::now().time_since_epoch())
      .count();
}

// The worker: runs queued collectives until told to stop.
void WorkerMain(MixrtCommunicator* c) {
  for (;;) {
    std::shared_ptr<WorkState> w;
    {
      std::unique_lock<std::mutex> lock(c->mutex);
      c->queue_cv.wait(lock, [c] { return c->stopping || !c->queue.empty(); });
      if (c->queue.empty()) return;
      w = c->queue.front();
      c->queue.pop_front();
      if (c->broken) {
        Complete(*w, MIXRT_ERROR_CODE_FAILED_PRECONDITION,
                 "the communicator is broken: " + c->broken_reason);
        continue;
      }
      c->running = w;
      c->in_flight_since_ns = NowNs();
      c->in_flight = w->sequence;
    }
    const int code = Execute(*c, *w);
    std::lock_guard<std::mutex> lock(c->mutex);
    c->running = nullptr;
    c->in_flight = 0;
    if (code == MPI_SUCCESS) c->completed = w->sequence;
    // The monitor may have failed it already (a timeout that resolved
    // late): the first verdict stands.
    {
      std::lock_guard<std::mutex> work_lock(w->mutex);
      if (w->done) continue;
    }
    if (code != MPI_SUCCESS) {
      c->broken = true;
      c->broken_reason = w->Name() + " failed: " + MpiErrorString(code);
      Complete(*w, MIXRT_ERROR_CODE_INTERNAL, c->broken_reason);
    } else {
      Complete(*w, MIXRT_ERROR_CODE_OK, "");
    }
  }
}

// Fails the running collective when its deadline has passed.
void CheckDeadline(MixrtCommunicator& c) {
  std::shared_ptr<WorkState> w;
  double elapsed = 0;
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    if (c.running == nullptr || c.broken) return;
    w = c.running;
    elapsed = (NowNs() - c.in_flight_since_ns) * 1e-9;
    double timeout = c.timeout_s;
    const double asked = w->timeout_s.load();
    if (asked > 0 && asked < timeout) timeout = asked;
    if (elapsed <= timeout) return;
    c.broken = true;  // No new collective starts from here on.
  }
  std::string message = DiagnoseTimeout(c, *w, elapsed);
  std::lock_guard<std::mutex> lock(c.mutex);
  c.broken_reason = message;
  Complete(*w, MIXRT_ERROR_CODE_UNAVAILABLE, message);
  for (auto& queued : c.queue) {
    Complete(*queued, MIXRT_ERROR_CODE_FAILED_PRECONDITION,
             "the communicator is broken: " + message);
  }
  c.queue.clear();
}

[[noreturn]] void AbortJob(MixrtCommunicator& c, const std::string& why) {
  std::fprintf(stderr, "mixrt: rank %d aborts the job: %s\n", c.rank,
               why.c_str());
  std::fflush(stderr);
  // MPI_Abort asks mpirun to end the job; when mpirun cannot be reached
  // (the link to its host is down) it may never return. The rank exits
  // regardless after kAbortSeconds.
  const int rank = c.rank;
  std::thread([rank] {
    std::this_thread::sleep_for(std::chrono::seconds(kAbortSeconds));
    std::fprintf(stderr,
                 "mixrt: rank %d: MPI_Abort did not end the job within %d s "
                 "(mpirun unreachable?): exiting\n",
                 rank, kAbortSeconds);
    std::fflush(stderr);
    std::_Exit(1);
  }).detach();
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);  // MPI_Abort does not return; in case it does.
}

void MonitorMain(MixrtCommunicator* c) {
  // Oversubscribed ranks (more threads than cores) should yield while they
  // wait in MPI rather than spin; mpirun sets this itself only when it
  // knows the machine is oversubscribed.
  setenv("OMPI_MCA_mpi_yield_when_idle", "1", /*overwrite=*/0);
  int provided = 0;
  int code = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  std::string failure;
  if (code != MPI_SUCCESS) {
    failure = "MPI_Init_thread failed: " + MpiErrorString(code);
  } else if (provided < MPI_THREAD_MULTIPLE) {
    failure =
        "this MPI library does not support MPI_THREAD_MULTIPLE (Open MPI "
        "must be built with it; Debian's is)";
  }
  if (failure.empty()) {
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c->world_size);
    MPI_Comm_dup(MPI_COMM_WORLD, &c->collectives);
    MPI_Comm_dup(MPI_COMM_WORLD, &c->control);
    MPI_Comm_set_errhandler(c->collectives, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(c->control, MPI_ERRORS_RETURN);
    using mixrt::mpi::Float16Kind;
    MPI_Op_create(&Reduce16<Float16Kind::kBF16, false>, 1, &c->sum_bf16);
    MPI_Op_create(&Reduce16<Float16Kind::kF16, false>, 1, &c->sum_f16);
    MPI_Op_create(&Reduce16<Float16Kind::kBF16, true>, 1, &c->max_bf16);
    MPI_Op_create(&Reduce16<Float16Kind::kF16, true>, 1, &c->max_f16);
    MPI_Op_create(&MaxF32, 1, &c->max_f32);
    // Settings every rank must share, compared now: a mismatch found later
    // is a collective that never completes (or MPI_ERR_TRUNCATE).
    const int64_t mine = ChunkBytesFromEnv();
    std::vector<int64_t> all(c->world_size, 0);
    MPI_Allgather(&mine, 1, MPI_INT64_T, all.data(), 1, MPI_INT64_T,
                  c->control);
    failure = ChunkBytesProblem(all, c->rank);
    if (mine >= 0) c->chunk_bytes = static_cast<size_t>(mine);
    ExchangeHosts(*c);
  }
  if (failure.empty()) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int length = 0;
    if (MPI_Get_library_version(version, &length) == MPI_SUCCESS) {
      std::string v(version, length);
      c->library = v.substr(0, v.find(','));
    }
    c->worker = std::thread(WorkerMain, c);
  }
  {
    std::lock_guard<std::mutex> lock(c->mutex);
    c->started = true;
    if (!failure.empty()) {
      c->start_code = MIXRT_ERROR_CODE_UNAVAILABLE;
      c->start_error = failure;
    }
    c->queue_cv.notify_all();
  }
  if (!failure.empty()) return;

  for (;;) {
    AnswerStatusRequests(*c);
    ReapReplies(*c);
    CheckDeadline(*c);
    {
      std::unique_lock<std::mutex> lock(c->mutex);
      if (c->stopping && c->queue.empty() && c->running == nullptr) break;
      if (c->stopping && c->broken) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (c->broken) {
    AbortJob(*c, c->stop_reason.empty() ? c->broken_reason : c->stop_reason);
  }
  {
    std::lock_guard<std::mutex> lock(c->mutex);
    c->queue_cv.notify_all();
  }
  c->worker.join();
  // Every rank leaves together; peers' late status requests are answered
  // until then (a rank that left cannot be asked).
  MPI_Request barrier;
  MPI_Ibarrier(c->control, &barrier);
  const Clock::time_point begin = Clock::now();
  for (int flag = 0; !flag;) {
    MPI_Test(&barrier, &flag, MPI_STATUS_IGNORE);
    AnswerStatusRequests(*c);
    if (!flag) std::this_thread::sleep_for(std::chrono::microseconds(200));
    if (!flag && std::chrono::duration<double>(Clock::now() - begin).count() >
                     c->timeout_s) {
      AbortJob(*c, "not every rank left the job within " +
                       std::to_string(c->timeout_s) + " s of this one");
    }
  }
  for (MPI_Request& r : c->replies) MPI_Wait(&r, MPI_STATUS_IGNORE);
  for (MPI_Op* op :
       {&c->sum_bf16, &c->sum_f16, &c->max_bf16, &c->max_f16, &c->max_f32}) {
    MPI_Op_free(op);
  }
  MPI_Comm_free(&c->collectives);
  MPI_Comm_free(&c->control);
  MPI_Finalize();
}

// MPI may be initialized once per process, and finalized never to return.
// Which rank and host this is, from mpirun's environment (MPI cannot say
// before MPI_Init returns).
std::string JoinTimeoutMessage(double timeout_s) {
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%.1f", timeout_s);
  return std::string("rank ") + (rank != nullptr ? rank : "?") + " (on " +
         host + ") waited " + seconds + " s for the " +
         (size != nullptr ? size : "?") +
         " ranks of the job to join (MPI_Init) and some never did: a rank "
         "stuck before it creates its process group, or a host this one "
         "cannot reach (mpirun's output names the ranks it started)";
}

std::mutex g_create_mutex;
bool g_created = false;

int Create(const MixrtCommunicatorOptions* options, MixrtCommunicator** out,
           char* error, size_t error_size) {
  if (options == nullptr || out == nullptr ||
      options->struct_size < sizeof(MixrtCommunicatorOptions)) {
    return Fail(error, error_size, MIXRT_ERROR_CODE_INVALID_ARGUMENT,
                "create: options and out are required");
  }
  {
    std::lock_guard<std::mutex> lock(g_create_mutex);
    if (g_created) {
      return Fail(error, error_size, MIXRT_ERROR_CODE_FAILED_PRECONDITION,
                  "create: MPI can be initialized once per process, and "
                  "this process already did (keep one process group)");
    }
    g_created = true;
  }
  auto* c = new MixrtCommunicator;
  if (options->timeout_s > 0) c->timeout_s = options->timeout_s;
  c->monitor = std::thread(MonitorMain, c);
  std::unique_lock<std::mutex> lock(c->mutex);
  // MPI_Init waits for every rank of the job to join; a rank that never
  // does (stuck before it, or on a host it cannot reach) would keep this
  // one waiting forever. The collective timeout bounds it too.
  if (!c->queue_cv.wait_for(lock, std::chrono::duration<double>(c->timeout_s),
                            [c] { return c->started; })) {
    // The monitor is inside MPI_Init and cannot be stopped: it and the
    // communicator are left to the process's exit.
    c->monitor.detach();
    return Fail(error, error_size, MIXRT_ERROR_CODE_UNAVAILABLE,
                JoinTimeoutMessage(c->timeout_s));
  }
  if (c->start_code != MIXRT_ERROR_CODE_OK) {
    const int code = c->start_code;
    const std::string message = c->start_error;
    lock.unlock();
    c->monitor.join();
    delete c;
    return Fail(error, error_size, code, message);
  }
  *out = c;
  return MIXRT_ERROR_CODE_OK;
}

int GetInfo(MixrtCommunicator* c, MixrtCommunicatorInfo* info, char* error,
            size_t error_size) {
  if (c == nullptr || info == nullptr ||
      info->struct_size < sizeof(MixrtCommunicatorInfo)) {
    return Fail(error, error_size, MIXRT_ERROR_CODE_INVALID_ARGUMENT,
                "get_info: communicator and info are required");
  }
  info->rank = c->rank;
  info->world_size = c->world_size;
  info->library = c->library.c_str();
  info->device_memory = 0;
  return MIXRT_ERROR_CODE_OK;
}

int Enqueue(MixrtCommunicator* c, std::shared_ptr<WorkState> w,
            MixrtCollectiveWork** work, char* error, size_t error_size) {
  if (c == nullptr || work == nullptr) {
    return Fail(error, error_size, MIXRT_ERROR_CODE_INVALID_ARGUMENT,
                "a communicator and a work pointer are required");
  }
  std::lock_guard<std::mutex> lock(c->mutex);
  if (c->broken) {
    return Fail(error, error_size, MIXRT_ERROR_CODE_FAILED_PRECONDITION,
                "the communicator is broken: " + c->broken_reason);
  }
  w->sequence = ++c->issued;
  c->queue.push_back(w);
  c->queue_cv.notify_all();
  *work = new MixrtCollectiveWork{std::move(w)};
  return MIXRT_ERROR_CODE_OK;
}

int AllReduce(MixrtCommunicator* c, void* data, size_t count, MixrtDtype dtype,
              MixrtCollectiveOp op, MixrtCollectiveWork** work, char* error,
              size_t error_size) {
  if (dtype != MIXRT_DTYPE_F32 && dtype != MIXRT_DTYPE_BF16 &&
      dtype != MIXRT_DTYPE_F16) {
    return Fail(error, error_size, MIXRT_ERROR_CODE_INVALID_ARGUMENT,
                "all_reduce: dtype must be f32, bf16 or f16");
  }
  if (op != MIXRT_COLLECTIVE_SUM && op != MIXRT_COLLECTIVE_AVG &&
      op != MIXRT_COLLECTIVE_MAX) {
    return Fail(error, error_size, MIXRT_ERROR_CODE_INVALID_ARGUMENT,
                "all_reduce: op must be sum, avg or max");
  }
  if (count > static_cast<size_t>(INT32_MAX) || (data == nullptr && count)) {
    return Fail(error, error_size, MIXRT_ERROR_CODE_INVALID_ARGUMENT,
                "all_reduce: at most 2^31-1 elements, with a buffer");
  }
  auto w = std::make_shared<WorkState>();
  w->kind = WorkState::Kind::kAllReduce;
  w->data = data;
  w->count = count;
  w->dtype = dtype;
  w->op = op;
  return Enqueue(c, std::move(w), work, error, error_size);
}

int Broadcast(MixrtCommunicator* c, void* data, size_t bytes, int root,
              MixrtCollectiveWork** work, char* error, size_t error_size) {
  if (c != nullptr && (root < 0 || root >= c->world_size)) {
    return Fail(error, error_size, MIXRT_ERROR_CODE_INVALID_ARGUMENT,
                "broadcast: root " + std::to_string(root) +
                    " is not a rank of this job of " +
                    std::to_string(c->world_size));
  }
  if (bytes > static_cast<size_t>(INT32_MAX)) {
    return Fail(error, error_size, MIXRT_ERROR_CODE_INVALID_ARGUMENT,
                "broadcast: at most 2^31-1 bytes at once");
  }
  auto w = std::make_shared<WorkState>();
  w->kind = WorkState::Kind::kBroadcast;
  w->data = data;
  w->count = bytes;
  w->root = root;
  return Enqueue(c, std::move(w), work, error, error_size);
}

int AllGather(MixrtCommunicator* c, const void* send, void* recv, size_t bytes,
              MixrtCollectiveWork** work, char* error, size_t error_size) {
  if (bytes > static_cast<size_t>(INT32_MAX)) {
    return Fail(error, error_size, MIXRT_ERROR_CODE_INVALID_ARGUMENT,
                "all_gather: at most 2^31-1 bytes per rank");
  }
  auto w = std::make_shared<WorkState>();
  w->kind = WorkState::Kind::kAllGather;
  w->send = send;
  w->data = recv;
  w->count = bytes;
  return Enqueue(c, std::move(w), work, error, error_size);
}

int Barrier(MixrtCommunicator* c, MixrtCollectiveWork** work, char* error,
            size_t error_size) {
  auto w = std::make_shared<WorkState>();
  w->kind = WorkState::Kind::kBarrier;
  return Enqueue(c, std::move(w), work, error, error_size);
}

int Wait(MixrtCollectiveWork* work, double timeout_s, char* error,
         size_t error_size) {
  if (work == nullptr) {
    return Fail(error, error_size, MIXRT_ERROR_CODE_INVALID_ARGUMENT,
                "wait: no work");
  }
  WorkState& w = *work->state;
  if (timeout_s > 0) w.timeout_s = timeout_s;
  std::unique_lock<std::mutex> lock(w.mutex);
  w.done_cv.wait(lock, [&w] { return w.done; });
  if (w.code != MIXRT_ERROR_CODE_OK) {
    return Fail(error, error_size, w.code, w.error);
  }
  return MIXRT_ERROR_CODE_OK;
}

void ReleaseWork(MixrtCollectiveWork* work) { delete work; }

void Destroy(MixrtCommunicator* c, const char* reason) {
  if (c == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(c->mutex);
    c->stopping = true;
    if (reason != nullptr && reason[0] != '\0') {
      c->broken = true;
      c->stop_reason = reason;
    }
    c->queue_cv.notify_all();
  }
  c->monitor.join();
  // A broken job was aborted (the process ended); reaching here means MPI
  // finished cleanly.
  delete c;
}

}  // namespace

MIXRT_DEFINE_COLLECTIVES_PLUGIN("mpi", Create, GetInfo, AllReduce, Broadcast,
                                AllGather, Barrier, Wait, ReleaseWork, Destroy)
