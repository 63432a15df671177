// oneDNN engine, per-thread streams and a primitive cache keyed on shape,
// strides, dtypes and attributes (creating a primitive costs far more than
// running a small one).
#ifndef MIXRT_BACKENDS_CPU_ONEDNN_ONEDNN_CONTEXT_H_
#define MIXRT_BACKENDS_CPU_ONEDNN_ONEDNN_CONTEXT_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "oneapi/dnnl/dnnl.hpp"
#include "plugins/sdk/tensor_ref.h"

namespace mixrt::cpu {

dnnl::engine& Engine();
dnnl::stream& ThreadStream();

// The oneDNN data type of a float dtype; nullopt for others.
std::optional<dnnl::memory::data_type> OneDnnType(MixrtDtype dtype);

// A memory descriptor with the tensor's dims and strides (0-d as [1]).
dnnl::memory::desc MemoryDesc(const sdk::TensorRef& t);
dnnl::memory::desc MemoryDesc(const sdk::TensorRef& t,
                              const dnnl::memory::dims& dims,
                              const dnnl::memory::dims& strides);
dnnl::memory Memory(const dnnl::memory::desc& desc, void* data);

// The stride of a size-1 dim does not matter to the data, but oneDNN's GEMM
// derives leading dimensions from it: a transposed [1, K] view with strides
// (1, 1) gave an invalid lda. Size-1 dims get the row-major stride instead.
void NormalizeUnitStrides(const dnnl::memory::dims& dims,
                          dnnl::memory::dims* strides);

// "f32[2,3]{3,1}" — a cache key part.
std::string DescKey(const sdk::TensorRef& t);

struct CachedPrimitive {
  dnnl::primitive primitive;
  std::string implementation;  // e.g. "brg:avx512_core_bf16"
  // Layouts the primitive chose for its arguments (DNNL_ARG_* -> desc) when
  // created with format_tag::any; see LayoutBinder.
  std::unordered_map<int, dnnl::memory::desc> layouts;
};

// Binds a primitive's arguments to caller memory, reordering into (inputs)
// and out of (outputs) the layout the primitive chose where it differs, with
// cached reorder primitives and per-thread scratch buffers.
class LayoutBinder {
 public:
  explicit LayoutBinder(const CachedPrimitive& primitive)
      : primitive_(primitive) {}
  void Input(int arg, const dnnl::memory::desc& user, void* data);
  // With `read` the output's old contents are reordered in too.
  void Output(int arg, const dnnl::memory::desc& user, void* data,
              bool read = false);
  // Runs the primitive, copies outputs back, and waits.
  void Execute();

 private:
  dnnl::memory Internal(const dnnl::memory::desc& want);

  const CachedPrimitive& primitive_;
  std::unordered_map<int, dnnl::memory> args_;
  std::vector<std::pair<dnnl::memory, dnnl::memory>> copy_back_;
  int scratch_slot_ = 0;
};

// The primitive for `key`, created by `make` on first use in this thread
// (each thread has its own cache: oneDNN primitives must run on the thread
// that created them). `make` throws dnnl::error when oneDNN cannot create
// it; that propagates. Shared so a cache reset never frees a primitive the
// caller is still running.
std::shared_ptr<const CachedPrimitive> GetPrimitive(
    const std::string& key, const std::function<CachedPrimitive()>& make);

// Like GetPrimitive, but nullptr when oneDNN has no implementation (for
// example bf16 below avx512_core); the failure is remembered, so callers
// fall back to their own loops at no further cost.
std::shared_ptr<const CachedPrimitive> TryGetPrimitive(
    const std::string& key, const std::function<CachedPrimitive()>& make);

// Copies `from` into `to`'s layout with a cached reorder primitive on this
// thread's stream (ThreadStream().wait() before reading `to`).
void Reorder(const dnnl::memory& from, const dnnl::memory& to);

// Number of primitives created so far (for tests of the cache).
int64_t PrimitivesCreated();

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_ONEDNN_ONEDNN_CONTEXT_H_
