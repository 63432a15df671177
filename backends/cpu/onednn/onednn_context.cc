#include "backends/cpu/onednn/onednn_context.h"

#include <omp.h>

#include <atomic>
#include <mutex>

#include "absl/container/flat_hash_set.h"
#include "absl/container/node_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backends/cpu/onednn/onednn_compat.h"

namespace mixrt::cpu {
namespace {

// Enough for every layer shape of a large model; past it the cache restarts
// rather than growing without bound.
constexpr size_t kMaxCachedPrimitives = 4096;

std::atomic<int64_t> g_created{0};

}  // namespace

dnnl::engine& Engine() {
  static dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

dnnl::stream& ThreadStream() {
  thread_local dnnl::stream stream(Engine());
  return stream;
}

std::optional<dnnl::memory::data_type> OneDnnType(MixrtDtype dtype) {
  switch (dtype) {
    case MIXRT_DTYPE_F32:
      return dnnl::memory::data_type::f32;
    case MIXRT_DTYPE_BF16:
      return dnnl::memory::data_type::bf16;
    case MIXRT_DTYPE_F16:
      return dnnl::memory::data_type::f16;
    default:
      return std::nullopt;
  }
}

dnnl::memory::desc MemoryDesc(const sdk::TensorRef& t,
                              const dnnl::memory::dims& dims,
                              const dnnl::memory::dims& strides) {
  return dnnl::memory::desc(dims, *OneDnnType(t.dtype()), strides);
}

void NormalizeUnitStrides(const dnnl::memory::dims& dims,
                          dnnl::memory::dims* strides) {
  int64_t inner = 1;  // Row-major stride of the current dim.
  for (int i = static_cast<int>(dims.size()) - 1; i >= 0; --i) {
    if (dims[i] == 1) (*strides)[i] = inner;
    inner = (*strides)[i] * dims[i];
  }
}

dnnl::memory::desc MemoryDesc(const sdk::TensorRef& t) {
  if (t.ndim() == 0) return MemoryDesc(t, {1}, {1});
  dnnl::memory::dims dims(t.shape(), t.shape() + t.ndim());
  dnnl::memory::dims strides(t.strides(), t.strides() + t.ndim());
  NormalizeUnitStrides(dims, &strides);  // Also removes oneDNN-illegal 0s.
  return MemoryDesc(t, dims, strides);
}

dnnl::memory Memory(const dnnl::memory::desc& desc, void* data) {
  return dnnl::memory(desc, Engine(), data);
}

std::string DescKey(const sdk::TensorRef& t) {
  return absl::StrCat(
      t.dtype(), "[", absl::StrJoin(t.shape(), t.shape() + t.ndim(), ","), "]{",
      absl::StrJoin(t.strides(), t.strides() + t.ndim(), ","), "}");
}

std::shared_ptr<const CachedPrimitive> GetPrimitive(
    const std::string& key, const std::function<CachedPrimitive()>& make) {
  // One cache per thread: Debian's oneDNN (DNNL_ENABLE_CONCURRENT_EXEC=OFF)
  // gives a primitive the library scratchpad of the thread that created it,
  // so a primitive run from another thread shares (or outlives) that
  // buffer, and concurrent host threads read each other's partial results:
  // "each primitive should be executed in the same thread it was created
  // in" (dnnl_scratchpad_mode_library). Seen as garbage bf16 matmul outputs
  // in tests/concurrency_test. Threads that run the same shapes compile
  // them once each.
  // Keyed by the thread count too: a primitive splits its work for the
  // threads it was created under (see load_aware_threads.h, which changes
  // the count when other processes load the machine).
  thread_local absl::node_hash_map<std::string,
                                   std::shared_ptr<const CachedPrimitive>>
      cache;
  std::string full_key = absl::StrCat(key, "|threads=", omp_get_max_threads());
  auto it = cache.find(full_key);
  if (it != cache.end()) return it->second;
  auto made = std::make_shared<const CachedPrimitive>(make());
  ++g_created;
  if (cache.size() >= kMaxCachedPrimitives) cache.clear();
  return cache.try_emplace(std::move(full_key), std::move(made)).first->second;
}

std::shared_ptr<const CachedPrimitive> TryGetPrimitive(
    const std::string& key, const std::function<CachedPrimitive()>& make) {
  static std::mutex mu;
  static auto* unavailable = new absl::flat_hash_set<std::string>();
  {
    std::lock_guard<std::mutex> lock(mu);
    if (unavailable->contains(key)) return nullptr;
  }
  try {
    return GetPrimitive(key, make);
  } catch (const dnnl::error& e) {
    if (e.status != dnnl_unimplemented) throw;
    std::lock_guard<std::mutex> lock(mu);
    if (unavailable->size() >= kMaxCachedPrimitives) unavailable->clear();
    unavailable->insert(key);
    return nullptr;
  }
}

int64_t PrimitivesCreated() { return g_created.load(); }

void Reorder(const dnnl::memory& from, const dnnl::memory& to) {
  auto prim = GetPrimitive(
      absl::StrCat("reorder|", DescIdentity(from.get_desc()), "|",
                   DescIdentity(to.get_desc())),
      [&] {
        const dnnl::reorder::primitive_desc pd(from, to);
        return CachedPrimitive{dnnl::reorder(pd), pd.impl_info_str(), {}};
      });
  prim->primitive.execute(ThreadStream(),
                          {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}});
}

namespace {

// Per-thread scratch memory: blocked copies of activations are reused from
// call to call instead of being allocated (and page-faulted) each time.
void* Scratch(int slot, size_t bytes) {
  thread_local std::vector<std::pair<size_t, std::unique_ptr<char[]>>> pool;
  if (pool.size() <= static_cast<size_t>(slot)) pool.resize(slot + 1);
  auto& [size, buffer] = pool[slot];
  if (size < bytes) {
    buffer.reset(new char[bytes + 64]);
    size = bytes;
  }
  // 64-byte alignment for the vector loads of oneDNN's kernels.
  const auto address = reinterpret_cast<uintptr_t>(buffer.get());
  return reinterpret_cast<void*>((address + 63) & ~uintptr_t{63});
}

}  // namespace

dnnl::memory LayoutBinder::Internal(const dnnl::memory::desc& want) {
  return dnnl::memory(want, Engine(),
                      Scratch(scratch_slot_++, want.get_size()));
}

void LayoutBinder::Input(int arg, const dnnl::memory::desc& user, void* data) {
  const dnnl::memory mem = Memory(user, data);
  auto it = primitive_.layouts.find(arg);
  if (it == primitive_.layouts.end() || it->second == user) {
    args_.emplace(arg, mem);
    return;
  }
  dnnl::memory internal = Internal(it->second);
  Reorder(mem, internal);
  args_.emplace(arg, internal);
}

void LayoutBinder::Output(int arg, const dnnl::memory::desc& user, void* data,
                          bool read) {
  const dnnl::memory mem = Memory(user, data);
  auto it = primitive_.layouts.find(arg);
  if (it == primitive_.layouts.end() || it->second == user) {
    args_.emplace(arg, mem);
    return;
  }
  dnnl::memory internal = Internal(it->second);
  if (read) Reorder(mem, internal);
  args_.emplace(arg, internal);
  copy_back_.emplace_back(internal, mem);
}

void LayoutBinder::Execute() {
  primitive_.primitive.execute(ThreadStream(), args_);
  for (const auto& [internal, user] : copy_back_) Reorder(internal, user);
  ThreadStream().wait();
}

}  // namespace mixrt::cpu
