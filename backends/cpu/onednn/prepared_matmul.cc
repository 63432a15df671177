#include "backends/cpu/onednn/prepared_matmul.h"

#include <omp.h>

#include <cstring>
#include <memory>
#include <unordered_map>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "backends/cpu/onednn/onednn_compat.h"
#include "backends/cpu/onednn/onednn_context.h"

namespace mixrt::cpu {
namespace {

// Shapes a thread keeps before starting over (a causal attention's key
// extents give a few dozen; a model's layers a few dozen more).
constexpr size_t kMaxShapes = 512;

struct Prepared {
  dnnl::matmul primitive;
  dnnl::memory a, b, c, bias;
  std::vector<dnnl::memory> post_src;  // Per post-op (empty for eltwise).
  std::unordered_map<int, dnnl::memory> args;
};

void AppendOperand(const MatmulOperand& o, MatmulKey* key) {
  key->push_back(o.dtype);
  key->push_back(static_cast<int64_t>(o.dims.size()));
  key->insert(key->end(), o.dims.begin(), o.dims.end());
  key->insert(key->end(), o.strides.begin(), o.strides.end());
}

dnnl::memory::desc Desc(const MatmulOperand& o) {
  return dnnl::memory::desc(o.dims, *OneDnnType(o.dtype), o.strides);
}

void AppendPostOps(const MatmulShape& s, MatmulKey* key) {
  key->push_back(static_cast<int64_t>(s.post_ops.size()));
  for (const MatmulPostOp& op : s.post_ops) {
    int32_t alpha_bits, beta_bits;
    std::memcpy(&alpha_bits, &op.alpha, sizeof(alpha_bits));
    std::memcpy(&beta_bits, &op.beta, sizeof(beta_bits));
    key->insert(key->end(),
                {op.binary ? 1 : 0, static_cast<int64_t>(op.algorithm),
                 alpha_bits, beta_bits});
    if (op.binary) AppendOperand(op.operand, key);
  }
  key->push_back(s.packed_b ? 1 : 0);
}

dnnl::matmul::primitive_desc PrimitiveDesc(const MatmulShape& s) {
  const dnnl::memory::desc a_md = Desc(s.a), c_md = Desc(s.c);
  const dnnl::memory::desc b_md =
      s.packed_b ? dnnl::memory::desc(s.b.dims, *OneDnnType(s.b.dtype),
                                      dnnl::memory::format_tag::any)
                 : Desc(s.b);
  const bool has_bias = !s.bias.dims.empty();
  dnnl::memory::desc bias_md;
  if (has_bias) bias_md = Desc(s.bias);
  dnnl::post_ops ops;
  if (s.sum_beta != 0) ops.append_sum(s.sum_beta);
  for (const MatmulPostOp& op : s.post_ops) {
    if (op.binary) {
      ops.append_binary(op.algorithm, Desc(op.operand));
    } else {
      AppendEltwise(&ops, op.algorithm, op.alpha, op.beta);
    }
  }
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  return MatmulPd(a_md, b_md, has_bias ? &bias_md : nullptr, c_md, attr);
}

std::unique_ptr<Prepared> Prepare(const MatmulShape& s) {
  const dnnl::matmul::primitive_desc pd = PrimitiveDesc(s);
  const dnnl::memory::desc a_md = Desc(s.a), b_md = pd.weights_desc(),
                           c_md = Desc(s.c);
  const bool has_bias = !s.bias.dims.empty();
  auto p = std::make_unique<Prepared>();
  p->primitive = dnnl::matmul(pd);
  // No data until a call sets it.
  p->a = Memory(a_md, nullptr);
  p->b = Memory(b_md, nullptr);
  p->c = Memory(c_md, nullptr);
  p->args = {
      {DNNL_ARG_SRC, p->a}, {DNNL_ARG_WEIGHTS, p->b}, {DNNL_ARG_DST, p->c}};
  if (has_bias) {
    p->bias = Memory(Desc(s.bias), nullptr);
    p->args.emplace(DNNL_ARG_BIAS, p->bias);
  }
  // oneDNN numbers post-ops from 0 with the sum among them.
  const int first = s.sum_beta != 0 ? 1 : 0;
  p->post_src.resize(s.post_ops.size());
  for (size_t i = 0; i < s.post_ops.size(); ++i) {
    if (!s.post_ops[i].binary) continue;
    p->post_src[i] = Memory(Desc(s.post_ops[i].operand), nullptr);
    p->args.emplace(
        DNNL_ARG_ATTR_MULTIPLE_POST_OP(first + static_cast<int>(i)) |
            DNNL_ARG_SRC_1,
        p->post_src[i]);
  }
  return p;
}

}  // namespace

MatmulKey PreparedMatmulKey(const MatmulShape& shape) {
  MatmulKey key;
  AppendOperand(shape.a, &key);
  AppendOperand(shape.b, &key);
  AppendOperand(shape.c, &key);
  AppendOperand(shape.bias, &key);
  int32_t beta_bits;
  std::memcpy(&beta_bits, &shape.sum_beta, sizeof(beta_bits));
  key.push_back(beta_bits);
  AppendPostOps(shape, &key);
  key.push_back(omp_get_max_threads());  // Work is split for that many.
  return key;
}

dnnl::memory::desc PackedWeightsDesc(const MatmulShape& shape) {
  return PrimitiveDesc(shape).weights_desc();
}

void PackWeights(const MatmulShape& shape, const void* b,
                 const dnnl::memory& packed) {
  dnnl::memory src = Memory(Desc(shape.b), const_cast<void*>(b));
  dnnl::memory dst = packed;
  dnnl::reorder(src, dst).execute(ThreadStream(), src, dst);
  ThreadStream().wait();
}

std::string PreparedMatmulImplementation(const MatmulShape& shape) {
  try {
    return PrimitiveDesc(shape).impl_info_str();
  } catch (const dnnl::error&) {
    return "";
  }
}

bool RunPreparedMatmul(const MatmulShape& shape, const void* a, const void* b,
                       void* c, const void* bias,
                       const void* const* post_op_data,
                       const dnnl::memory::desc* packed_b) {
  // Per thread: oneDNN primitives run on the thread that created them (see
  // GetPrimitive), and under the thread count they were created with.
  thread_local absl::flat_hash_map<MatmulKey, std::unique_ptr<Prepared>> cache;
  MatmulKey key = PreparedMatmulKey(shape);
  auto it = cache.find(key);
  if (it == cache.end()) {
    if (cache.size() >= kMaxShapes) cache.clear();
    it = cache.emplace(std::move(key), Prepare(shape)).first;
  }
  Prepared& p = *it->second;
  if (shape.packed_b && (packed_b == nullptr || p.b.get_desc() != *packed_b))
    return false;
  p.a.set_data_handle(const_cast<void*>(a));
  p.b.set_data_handle(const_cast<void*>(b));
  p.c.set_data_handle(c);
  if (bias != nullptr) p.bias.set_data_handle(const_cast<void*>(bias));
  for (size_t i = 0; i < p.post_src.size(); ++i) {
    if (shape.post_ops[i].binary)
      p.post_src[i].set_data_handle(const_cast<void*>(post_op_data[i]));
  }
  p.primitive.execute(ThreadStream(), p.args);
  ThreadStream().wait();
  return true;
}

}  // namespace mixrt::cpu
