#include "backends/cpu/block_gemm.h"

#include <array>
#include <memory>
#include <unordered_map>

#include "absl/container/flat_hash_map.h"
#include "backends/cpu/onednn_compat.h"
#include "backends/cpu/onednn_context.h"

namespace mixrt::cpu {
namespace {

// Shapes a thread keeps before starting over (a causal attention's key
// extents give a few dozen).
constexpr size_t kMaxShapes = 256;

using ShapeKey = std::array<int64_t, 12>;

struct PreparedGemm {
  dnnl::matmul primitive;
  dnnl::memory a, b, c;
  std::unordered_map<int, dnnl::memory> args;
};

dnnl::memory::desc Desc(const MatrixShape& m) {
  dnnl::memory::dims dims = {m.rows, m.cols}, strides = {m.row_stride, m.col_stride};
  NormalizeUnitStrides(dims, &strides);
  return dnnl::memory::desc(dims, *OneDnnType(m.dtype), strides);
}

std::unique_ptr<PreparedGemm> Prepare(const MatrixShape& a, const MatrixShape& b,
                                      int64_t ldc, bool accumulate) {
  const dnnl::memory::desc a_md = Desc(a), b_md = Desc(b);
  const dnnl::memory::desc c_md = Desc({MIXRT_DTYPE_F32, a.rows, b.cols, ldc, 1});
  dnnl::post_ops ops;
  if (accumulate) ops.append_sum(1.0f);
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  auto g = std::make_unique<PreparedGemm>();
  g->primitive = dnnl::matmul(MatmulPd(a_md, b_md, nullptr, c_md, attr));
  // Placeholder handles until the first Run sets the real ones.
  g->a = Memory(a_md, nullptr);
  g->b = Memory(b_md, nullptr);
  g->c = Memory(c_md, nullptr);
  g->args = {{DNNL_ARG_SRC, g->a}, {DNNL_ARG_WEIGHTS, g->b}, {DNNL_ARG_DST, g->c}};
  return g;
}

}  // namespace

void BlockGemm(const MatrixShape& a, const void* a_data, const MatrixShape& b,
               const void* b_data, float* c, int64_t ldc, bool accumulate) {
  // Per thread: oneDNN primitives run on the thread that created them (see
  // GetPrimitive).
  thread_local absl::flat_hash_map<ShapeKey, std::unique_ptr<PreparedGemm>> cache;
  const ShapeKey key = {a.dtype, a.rows, a.cols, a.row_stride, a.col_stride,
                        b.dtype, b.rows, b.cols, b.row_stride, b.col_stride,
                        ldc,     accumulate};
  auto it = cache.find(key);
  if (it == cache.end()) {
    if (cache.size() >= kMaxShapes) cache.clear();
    it = cache.emplace(key, Prepare(a, b, ldc, accumulate)).first;
  }
  PreparedGemm& g = *it->second;
  g.a.set_data_handle(const_cast<void*>(a_data));
  g.b.set_data_handle(const_cast<void*>(b_data));
  g.c.set_data_handle(c);
  g.primitive.execute(ThreadStream(), g.args);
  ThreadStream().wait();
}

}  // namespace mixrt::cpu
