#include "backends/cpu/onednn_context.h"

#include <atomic>
#include <mutex>

#include "absl/container/flat_hash_set.h"
#include "absl/container/node_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

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

dnnl::memory::desc MemoryDesc(const sdk::TensorRef& t) {
  if (t.ndim() == 0) return MemoryDesc(t, {1}, {1});
  dnnl::memory::dims dims(t.shape(), t.shape() + t.ndim());
  dnnl::memory::dims strides(t.strides(), t.strides() + t.ndim());
  // oneDNN rejects stride 0; a size-1 dim's stride never matters.
  for (int i = 0; i < t.ndim(); ++i) {
    if (dims[i] == 1) strides[i] = 1;
  }
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
  static std::mutex mu;
  static auto* cache =
      new absl::node_hash_map<std::string,
                              std::shared_ptr<const CachedPrimitive>>();
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache->find(key);
    if (it != cache->end()) return it->second;
  }
  // Outside the lock: creation is slow.
  auto made = std::make_shared<const CachedPrimitive>(make());
  ++g_created;
  std::lock_guard<std::mutex> lock(mu);
  if (cache->size() >= kMaxCachedPrimitives) cache->clear();
  return cache->try_emplace(key, std::move(made)).first->second;
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

}  // namespace mixrt::cpu
