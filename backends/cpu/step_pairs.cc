#include "backends/cpu/step_pairs.h"

#include <immintrin.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "absl/functional/function_ref.h"
#include "backends/cpu/parallel.h"
#include "mixrt/status_macros.h"
#include "plugins/sdk/plugin.h"

namespace mixrt::cpu {
namespace {

// How long the helper spins after a pair before it sleeps: longer than the
// gap between one training step's pairs and the next step's.
constexpr auto kSpin = std::chrono::microseconds(200);

struct Extent {
  int32_t buffer;
  uint64_t begin, end;  // Bytes.
};

int64_t ElementBytes(uint32_t dtype) {
  switch (dtype) {
    case MIXRT_DTYPE_F32:
    case MIXRT_DTYPE_I32:
      return 4;
    case MIXRT_DTYPE_I64:
      return 8;
    case MIXRT_DTYPE_BOOL:
      return 1;
    default:
      return 2;
  }
}

Extent ExtentOf(const sdk::TensorRef& t, int32_t buffer, uint64_t offset) {
  int64_t last = 0;
  for (int d = 0; d < t.ndim(); ++d) {
    if (t.dim(d) == 0) return {buffer, offset, offset};
    last += (t.dim(d) - 1) * t.stride(d);
  }
  return {buffer, offset,
          offset + static_cast<uint64_t>((last + 1) * ElementBytes(t.dtype()))};
}

bool Overlap(const Extent& x, const Extent& y) {
  return x.buffer == y.buffer && x.begin < y.end && y.begin < x.end;
}

// Reads and writes of step i.
void Extents(const sdk::StepGraph& g, int i, std::vector<Extent>* reads,
             std::vector<Extent>* writes) {
  const sdk::StepGraph::StepView s = g.step(i);
  const size_t n_in = s.call->inputs.size();
  for (size_t k = 0; k < n_in; ++k) {
    reads->push_back(ExtentOf(s.call->inputs[k], s.buffers[k], s.offsets[k]));
  }
  for (size_t k = 0; k < s.call->outputs.size(); ++k) {
    writes->push_back(
        ExtentOf(s.call->outputs[k], s.buffers[n_in + k], s.offsets[n_in + k]));
  }
}

// A step that runs on the calling thread alone: a product below the work
// that forks threads, or a fused loop over fewer elements than one
// thread's range.
bool Small(const sdk::StepGraph& g, int i) {
  const sdk::StepGraph::StepView s = g.step(i);
  if (s.fused) {
    for (const sdk::TensorRef& t : s.call->inputs) {
      if (t.numel() > kParallelWork) return false;
    }
    for (const sdk::TensorRef& t : s.call->outputs) {
      if (t.numel() > kParallelWork) return false;
    }
    return true;
  }
  if (s.call->op != MIXRT_OP_MATMUL || s.call->inputs.size() < 2 ||
      s.call->outputs.empty()) {
    return false;
  }
  const sdk::TensorRef& a = s.call->inputs[0];
  const sdk::TensorRef& c = s.call->outputs[0];
  if (a.ndim() < 1) return false;
  int64_t work = a.dim(a.ndim() - 1);
  for (int d = 0; d < c.ndim(); ++d) work *= c.dim(d);
  return work <= kSerialWork;
}

// One helper thread for the process; a pair that finds it busy (another
// graph's pair on another thread) runs in order.
class Helper {
 public:
  static Helper& Get() {
    static Helper* helper = new Helper();  // Never destroyed: no join at exit.
    return *helper;
  }

  absl::Status RunPair(absl::FunctionRef<absl::Status()> mine,
                       absl::FunctionRef<absl::Status()> theirs) {
    bool expected = false;
    if (!busy_.compare_exchange_strong(expected, true)) {
      MIXRT_RETURN_IF_ERROR(mine());
      return theirs();
    }
    task_ = &theirs;
    state_.store(kPosted);
    if (sleeping_.load()) {
      std::lock_guard<std::mutex> lock(mutex_);
      wake_.notify_one();
    }
    absl::Status first = mine();
    int posted = kPosted;
    absl::Status second;
    if (state_.compare_exchange_strong(posted, kIdle)) {
      second = theirs();  // Not taken yet: run it here.
    } else {
      while (state_.load(std::memory_order_acquire) != kDone) _mm_pause();
      second = std::move(result_);
      state_.store(kIdle);
    }
    busy_.store(false);
    MIXRT_RETURN_IF_ERROR(first);
    return second;
  }

 private:
  enum { kIdle, kPosted, kTaken, kDone };

  Helper() { std::thread([this] { Loop(); }).detach(); }

  void Loop() {
    for (;;) {
      auto spin_until = std::chrono::steady_clock::now() + kSpin;
      for (int n = 0;; ++n) {
        int posted = kPosted;
        if (state_.load(std::memory_order_relaxed) == kPosted &&
            state_.compare_exchange_strong(posted, kTaken)) {
          result_ = (*task_)();
          state_.store(kDone, std::memory_order_release);
          spin_until = std::chrono::steady_clock::now() + kSpin;
          continue;
        }
        _mm_pause();
        if ((n & 255) == 0 && std::chrono::steady_clock::now() > spin_until) break;
      }
      std::unique_lock<std::mutex> lock(mutex_);
      sleeping_.store(true);
      wake_.wait(lock, [this] { return state_.load() == kPosted; });
      sleeping_.store(false);
    }
  }

  std::atomic<bool> busy_{false};
  std::atomic<int> state_{kIdle};
  std::atomic<bool> sleeping_{false};
  absl::FunctionRef<absl::Status()>* task_ = nullptr;
  absl::Status result_;
  std::mutex mutex_;
  std::condition_variable wake_;
};

bool PairsEnabled() {
  const char* env = std::getenv("MIXRT_CPU_STEP_PAIRS");
  return env == nullptr || std::string(env) != "0";
}

}  // namespace

bool StepsConflict(const sdk::StepGraph& graph, int a, int b) {
  std::vector<Extent> ra, wa, rb, wb;
  Extents(graph, a, &ra, &wa);
  Extents(graph, b, &rb, &wb);
  for (const Extent& w : wa) {
    for (const auto* list : {&rb, &wb}) {
      for (const Extent& x : *list) {
        if (Overlap(w, x)) return true;
      }
    }
  }
  for (const Extent& w : wb) {
    for (const Extent& r : ra) {
      if (Overlap(w, r)) return true;
    }
  }
  return false;
}

std::unique_ptr<sdk::KernelGraph> PairedStepGraph::Make(
    std::unique_ptr<sdk::StepGraph> steps) {
  if (!PairsEnabled() || std::thread::hardware_concurrency() < 2) return steps;
  const int n = steps->num_steps();
  std::vector<bool> paired(n, false);
  bool any = false;
  for (int i = 0; i + 1 < n; ++i) {
    if (Small(*steps, i) && Small(*steps, i + 1) && !StepsConflict(*steps, i, i + 1)) {
      paired[i] = true;
      any = true;
      ++i;  // Each step in one pair at most.
    }
  }
  if (!any) return steps;
  std::unique_ptr<PairedStepGraph> graph(new PairedStepGraph(std::move(steps)));
  graph->paired_with_next_ = std::move(paired);
  return graph;
}

int PairedStepGraph::pairs() const {
  int count = 0;
  for (bool p : paired_with_next_) count += p;
  return count;
}

absl::Status PairedStepGraph::Run(absl::Span<void* const> buffers) {
  if (static_cast<int>(buffers.size()) != steps_->num_buffers()) {
    return steps_->Run(buffers);  // Its error names the counts.
  }
  const int n = steps_->num_steps();
  for (int i = 0; i < n; ++i) {
    if (!paired_with_next_[i]) {
      MIXRT_RETURN_IF_ERROR(steps_->RunStep(i, buffers));
      continue;
    }
    MIXRT_RETURN_IF_ERROR(Helper::Get().RunPair(
        [&] { return steps_->RunStep(i, buffers); },
        [&] { return steps_->RunStep(i + 1, buffers); }));
    ++i;
  }
  return absl::OkStatus();
}

}  // namespace mixrt::cpu
