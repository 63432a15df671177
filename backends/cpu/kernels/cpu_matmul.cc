// matmul on oneDNN: strided operands (transposed weights need no copy),
// broadcast batch dims, and the epilogue (bias, activation, accumulation)
// fused as oneDNN post-ops. f16 runs natively when this oneDNN build has an
// f16 matmul, or on the oneDNN 3.x companion where that has one
// (avx512_fp16), else as three bf16 products where oneDNN's bf16 runs on
// AMX, else through f32 (the capability table reports which).
#include "backends/cpu/kernels/cpu_matmul.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <memory>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "backends/cpu/fusion/fused_matmul.h"
#include "backends/cpu/gemm/amx_tiles.h"
#include "backends/cpu/gemm/small_gemm.h"
#include "backends/cpu/gemm/small_gemm_bf16.h"
#include "backends/cpu/kernels/bf16_pair.h"
#include "backends/cpu/kernels/dense_call.h"
#include "backends/cpu/kernels/epilogue.h"
#include "backends/cpu/kernels/float_rows.h"
#include "backends/cpu/kernels/operand_copies.h"
#include "backends/cpu/kernels/parallel.h"
#include "backends/cpu/onednn/onednn3_companion.h"
#include "backends/cpu/onednn/onednn_compat.h"
#include "backends/cpu/onednn/onednn_context.h"
#include "backends/cpu/onednn/prepared_matmul.h"
#include "mixrt/status_macros.h"
#include "plugins/sdk/pointwise_math.h"

namespace mixrt::cpu {
namespace {

using sdk::TensorRef;

// Dims and strides for oneDNN: batch dims with stride 0 (broadcast by the
// host) become size 1, which oneDNN broadcasts itself.
void Layout(const TensorRef& t, dnnl::memory::dims* dims,
            dnnl::memory::dims* strides) {
  dims->assign(t.shape(), t.shape() + t.ndim());
  strides->assign(t.strides(), t.strides() + t.ndim());
  for (int i = 0; i < t.ndim() - 2; ++i) {
    if ((*strides)[i] == 0) (*dims)[i] = 1;
  }
  NormalizeUnitStrides(*dims, strides);
}

// Whether dims [0, nd - 1) of (dims, strides) merge into one row dimension
// (each batch dim's stride spans the dims after it, or it has size 1).
bool RowsMerge(const dnnl::memory::dims& dims,
               const dnnl::memory::dims& strides) {
  const size_t nd = dims.size();
  for (size_t d = 0; d + 2 < nd; ++d) {
    if (dims[d] != 1 && strides[d] != dims[d + 1] * strides[d + 1]) {
      return false;
    }
  }
  return true;
}

// [batch..., M, K] x [1..., K, N] -> [batch..., M, N] as one 2-D product
// [batch x M, K] x [K, N] when b is broadcast over every batch dim and the
// rows of a and c merge. oneDNN 2.6 runs the batched form with transposed
// weights (every nn.Linear) on its older gemm:jit; the 2-D form gets the
// brgemm kernels (AMX, avx512_core_bf16).
void FoldBroadcastBatch(
    dnnl::memory::dims* a_dims, dnnl::memory::dims* a_strides,
    dnnl::memory::dims* b_dims, dnnl::memory::dims* b_strides,
    dnnl::memory::dims* c_dims, dnnl::memory::dims* c_strides,
    dnnl::memory::dims* bias_dims, dnnl::memory::dims* bias_strides) {
  const size_t nd = a_dims->size();
  if (nd <= 2) return;
  for (size_t d = 0; d + 2 < nd; ++d) {
    if ((*b_dims)[d] != 1) return;
  }
  if (!RowsMerge(*a_dims, *a_strides) || !RowsMerge(*c_dims, *c_strides))
    return;
  const auto fold = [nd](dnnl::memory::dims* dims,
                         dnnl::memory::dims* strides) {
    dnnl::memory::dim rows = 1;
    for (size_t d = 0; d + 1 < nd; ++d) rows *= (*dims)[d];
    *dims = {rows, (*dims)[nd - 1]};
    *strides = {(*strides)[nd - 2], (*strides)[nd - 1]};
  };
  fold(a_dims, a_strides);
  fold(c_dims, c_strides);
  *b_dims = {(*b_dims)[nd - 2], (*b_dims)[nd - 1]};
  *b_strides = {(*b_strides)[nd - 2], (*b_strides)[nd - 1]};
  if (!bias_dims->empty()) {
    *bias_dims = {1, (*bias_dims)[nd - 1]};
    *bias_strides = {1, (*bias_strides)[nd - 1]};
  }
}

// The number of elements of the dense block that the tensor's elements fill
// in some dimension order, broadcast (stride 0) dimensions aside: numel for
// a contiguous tensor or a transpose of one, one weight's size for a weight
// expanded over a batch; -1 when there is no such block.
int64_t DenseBlock(const TensorRef& t) {
  std::vector<int> order;
  for (int i = 0; i < t.ndim(); ++i) {
    if (t.dim(i) != 1 && t.stride(i) != 0) order.push_back(i);
  }
  std::sort(order.begin(), order.end(),
            [&](int x, int y) { return t.stride(x) < t.stride(y); });
  int64_t expected = 1;
  for (int i : order) {
    if (t.stride(i) != expected) return -1;
    expected *= t.dim(i);
  }
  return expected;
}

bool IsDensePermutation(const TensorRef& t) {
  return DenseBlock(t) == t.numel();
}

// out = act(c) + beta * out, where c holds the product (f32, or out itself).
void FinishEpilogue(const TensorRef& c, const TensorRef& out,
                    MixrtActivation act, float beta) {
  const bool in_place = c.data() == out.data();
  if (in_place && out.is_contiguous()) {
    ActivateInPlace(out, act);
    return;
  }
  if (!in_place && c.dtype() == MIXRT_DTYPE_F32 && IsDensePermutation(out) &&
      std::equal(c.strides(), c.strides() + c.ndim(), out.strides())) {
    // The widened product lies as `out` does: one pass over the block,
    // vectorized, instead of element by element.
    constexpr int64_t kChunk = 1024;
    const auto* product = static_cast<const float*>(c.data());
    ParallelFor(out.numel(), 1 << 15, [&](int64_t begin, int64_t end) {
      float v[kChunk], old[kChunk];
      for (int64_t b = begin; b < end; b += kChunk) {
        const int64_t n = std::min(kChunk, end - b);
        std::copy(product + b, product + b + n, v);
        if (act != MIXRT_ACTIVATION_NONE) {
          for (int64_t i = 0; i < n; ++i) v[i] = Activate(act, v[i]);
        }
        if (beta != 0) {
          LoadRow(out.data(), out.dtype(), b, n, old);
          for (int64_t i = 0; i < n; ++i) v[i] += beta * old[i];
        }
        StoreRow(v, n, out.data(), out.dtype(), b);
      }
    });
    return;
  }
  sdk::ForEachElement<2>(out.ndim(), out.shape(), {c.strides(), out.strides()},
                         [&](const std::array<int64_t, 2>& o) {
                           float v = Activate(act, c.LoadFloat(o[0]));
                           if (!in_place && beta != 0) {
                             v += beta * out.LoadFloat(o[1]);
                           }
                           out.StoreFloat(o[1], v);
                         });
}

// Converted copies of operands: t's own strides over its elements' dense
// block when they fill one (a transposed weight stays a transposed view, a
// weight broadcast over the batch a broadcast, with no gather), else
// row-major.
struct CopyLayout {
  std::vector<int64_t> strides;
  int64_t elements = 0;
  bool in_place_order = false;  // t's strides kept.
};

CopyLayout LayoutForCopy(const TensorRef& t) {
  CopyLayout l;
  if (const int64_t block = DenseBlock(t); block >= 0) {
    l.strides.assign(t.strides(), t.strides() + t.ndim());
    l.elements = block;
    l.in_place_order = true;
    return l;
  }
  l.strides.assign(t.ndim(), 1);
  for (int i = t.ndim() - 2; i >= 0; --i) {
    l.strides[i] = l.strides[i + 1] * t.dim(i + 1);
  }
  l.elements = t.numel();
  return l;
}

// Calls row(src_offset, src_col_stride, n, dst_offset) over rows covering
// t's elements, in parallel, for a copy laid out as `l`.
template <typename RowFn>
void ForEachCopyRow(const TensorRef& t, const CopyLayout& l, RowFn&& row) {
  if (l.in_place_order) {
    ParallelFor(l.elements, 1 << 16,
                [&](int64_t b, int64_t e) { row(b, int64_t{1}, e - b, b); });
    return;
  }
  const int nd = t.ndim();
  const int64_t cols = nd > 0 ? t.dim(nd - 1) : 1;
  const int64_t col_stride = nd > 0 ? t.stride(nd - 1) : 1;
  const int64_t rows = cols > 0 ? l.elements / cols : 0;
  ParallelFor(rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(cols, 1)),
              [&](int64_t begin, int64_t end) {
                for (int64_t r = begin; r < end; ++r) {
                  int64_t offset = 0;
                  for (int64_t d = nd - 2, rem = r; d >= 0; --d) {
                    offset += (rem % t.dim(d)) * t.stride(d);
                    rem /= t.dim(d);
                  }
                  row(offset, col_stride, cols, r * cols);
                }
              });
}

MixrtTensorDesc CopyDesc(const TensorRef& t, const CopyLayout& l, void* data,
                         MixrtDtype dtype) {
  MixrtTensorDesc d{};
  d.struct_size = sizeof(d);
  d.data = data;
  d.dtype = dtype;
  d.ndim = t.ndim();
  d.shape = t.shape();
  d.strides = l.strides.data();
  return d;
}

// n elements of t from offset, col_stride apart, into f32 at dst.
void LoadStrided(const TensorRef& t, int64_t offset, int64_t col_stride,
                 int64_t n, float* dst) {
  if (col_stride == 1) {
    LoadRow(t.data(), t.dtype(), offset, n, dst);
  } else {
    for (int64_t j = 0; j < n; ++j)
      dst[j] = t.LoadFloat(offset + j * col_stride);
  }
}

// An f32 copy of an f16 operand, for oneDNN builds without f16 matmul.
struct WidenedOperand {
  std::unique_ptr<float[]> data;
  CopyLayout layout;
  MixrtTensorDesc desc{};
};

// The values are converted unless `values` is false (an output that
// beta = 0 overwrites needs only the buffer).
void Widen(const TensorRef& t, WidenedOperand* w, bool values = true) {
  w->layout = LayoutForCopy(t);
  w->data.reset(new float[std::max<int64_t>(w->layout.elements, 1)]);
  w->desc = CopyDesc(t, w->layout, w->data.get(), MIXRT_DTYPE_F32);
  if (!values) return;
  float* out = w->data.get();
  ForEachCopyRow(t, w->layout,
                 [&](int64_t src, int64_t stride, int64_t n, int64_t dst) {
                   LoadStrided(t, src, stride, n, out + dst);
                 });
}

// An f16 operand as two bf16 operands, hi + lo (bf16_pair.h).
struct SplitOperand {
  std::unique_ptr<uint16_t[]> hi, lo;
  CopyLayout layout;
  MixrtTensorDesc hi_desc{}, lo_desc{};
};

// Returns whether every element was finite (else the split is unusable:
// bf16_pair.h).
bool Split(const TensorRef& t, SplitOperand* s) {
  s->layout = LayoutForCopy(t);
  const int64_t n = std::max<int64_t>(s->layout.elements, 1);
  s->hi.reset(new uint16_t[n]);
  s->lo.reset(new uint16_t[n]);
  s->hi_desc = CopyDesc(t, s->layout, s->hi.get(), MIXRT_DTYPE_BF16);
  s->lo_desc = CopyDesc(t, s->layout, s->lo.get(), MIXRT_DTYPE_BF16);
  std::atomic<bool> finite{true};
  ForEachCopyRow(t, s->layout,
                 [&](int64_t src, int64_t stride, int64_t n, int64_t dst) {
                   constexpr int64_t kChunk = 1024;
                   float buf[kChunk];
                   bool f = true;
                   for (int64_t j = 0; j < n; j += kChunk) {
                     const int64_t m = std::min(kChunk, n - j);
                     LoadStrided(t, src + j * stride, stride, m, buf);
                     f &= SplitIntoBf16Pairs(buf, m, s->hi.get() + dst + j,
                                             s->lo.get() + dst + j);
                   }
                   if (!f) finite.store(false, std::memory_order_relaxed);
                 });
  return finite.load();
}

// The oneDNN shape of c = a x b (+ bias) (+ sum_beta c), then `steps`
// (binary ones' addresses into post_data); a bias in neither f32 nor a's
// dtype is described as the dense f32 copy Product makes of it.
void DescribeProduct(const TensorRef& a, const TensorRef& b,
                     const TensorRef* bias_in, const TensorRef& c,
                     float sum_beta, absl::Span<const EpilogueStep> steps,
                     MatmulShape* out, std::vector<const void*>* post_data) {
  MatmulShape& shape = *out;
  const bool has_bias = bias_in != nullptr;
  const int nd = c.ndim();
  Layout(a, &shape.a.dims, &shape.a.strides);
  Layout(b, &shape.b.dims, &shape.b.strides);
  Layout(c, &shape.c.dims, &shape.c.strides);
  dnnl::memory::dims& bias_dims = shape.bias.dims;
  dnnl::memory::dims& bias_strides = shape.bias.strides;
  bias_dims.clear();
  bias_strides.clear();
  if (has_bias) {
    const TensorRef& bias = *bias_in;
    bias_dims.assign(nd, 1);
    bias_strides.assign(nd, 1);
    bias_dims[nd - 1] = bias.dim(0);
    bias_strides[nd - 1] = bias.stride(0) == 0 ? 1 : bias.stride(0);
  }
  FoldBroadcastBatch(&shape.a.dims, &shape.a.strides, &shape.b.dims,
                     &shape.b.strides, &shape.c.dims, &shape.c.strides,
                     &bias_dims, &bias_strides);
  shape.a.dtype = a.dtype();
  shape.b.dtype = b.dtype();
  shape.c.dtype = c.dtype();
  shape.bias.dtype = MIXRT_DTYPE_F32;
  if (has_bias) {
    if (bias_in->dtype() == MIXRT_DTYPE_F32 || bias_in->dtype() == a.dtype()) {
      shape.bias.dtype = bias_in->dtype();
    } else {
      bias_strides.back() = 1;  // Widened or split operands: a dense f32 copy.
    }
  }
  shape.sum_beta = sum_beta;
  shape.post_ops.resize(steps.size());
  post_data->assign(steps.size(), nullptr);
  for (size_t i = 0; i < steps.size(); ++i) {
    MatmulPostOp& op = shape.post_ops[i];
    op.binary = steps[i].operand != nullptr;
    op.algorithm = steps[i].algorithm;
    op.alpha = steps[i].alpha;
    op.beta = steps[i].beta;
    if (!op.binary) continue;
    // The claim allowed three layouts: c's own, a row broadcast over the
    // other dims, and one element broadcast everywhere.
    const TensorRef& t = *steps[i].operand;
    op.operand.dtype = t.dtype();
    if (std::equal(t.strides(), t.strides() + nd, c.strides())) {
      op.operand.dims = shape.c.dims;
      op.operand.strides = shape.c.strides;
    } else {
      op.operand.dims.assign(shape.c.dims.size(), 1);
      op.operand.strides.assign(shape.c.dims.size(), 1);
      if (t.stride(nd - 1) != 0) op.operand.dims.back() = shape.c.dims.back();
    }
    (*post_data)[i] = t.data();
  }
}

// Whether a product of this shape runs on one thread (it is created and
// run under the same thread count).
bool SerialProduct(const MatmulShape& shape) {
  int64_t work = shape.a.dims.back();  // K times every output element.
  for (int64_t d : shape.c.dims) work *= d;
  return work <= kSerialWork;
}

// Thrown when b comes packed in a layout the product no longer wants.
struct PackedLayoutChanged {};

// c = a x b (+ bias), or c = sum_beta c + a x b (+ bias) when sum_beta is
// not 0, on oneDNN or the small f32 tiles, then `steps` as oneDNN
// post-ops; c is f32 or a's dtype. Returns whether it also applied `act`
// (the tiles apply a relu when sum_beta is 0; otherwise the caller's
// epilogue does).

bool Product(const TensorRef& a, const TensorRef& b, const TensorRef* bias_in,
             const TensorRef& c, float sum_beta,
             MixrtActivation act = MIXRT_ACTIVATION_NONE,
             absl::Span<const EpilogueStep> steps = {},
             const dnnl::memory* packed_b = nullptr) {
  const bool has_bias = bias_in != nullptr;
  // Reused per thread: its vectors keep their capacity, so a call in the
  // steady state allocates nothing (eight vector allocations and frees a
  // call were a tenth of a small MLP's compiled train step).
  thread_local MatmulShape shape;
  thread_local std::vector<const void*> post_data;
  DescribeProduct(a, b, bias_in, c, sum_beta, steps, &shape, &post_data);
  shape.packed_b = packed_b != nullptr;
  const void* bias_data = has_bias ? bias_in->data() : nullptr;
  std::unique_ptr<float[]> wide_bias;
  if (has_bias && bias_in->dtype() != shape.bias.dtype) {
    const TensorRef& bias = *bias_in;
    wide_bias.reset(new float[bias.dim(0)]);
    for (int64_t i = 0; i < bias.dim(0); ++i) {
      wide_bias[i] = bias.LoadFloat(i * bias.stride(0));
    }
    bias_data = wide_bias.get();
  }
  // The plugin's own tiles for small 2-D products (f32, or bf16 on
  // avx512_bf16), their epilogue a bias, a relu and beta c.
  const bool tiles = steps.empty() && packed_b == nullptr &&
                     shape.c.dims.size() == 2 && shape.c.strides[1] == 1;
  const auto describe = [&](auto& g, auto element) {
    using T = decltype(element);
    g.m = shape.c.dims[0];
    g.n = shape.c.dims[1];
    g.k = shape.a.dims[1];
    g.a = static_cast<const T*>(a.data());
    g.a_rows = shape.a.strides[0];
    g.a_cols = shape.a.strides[1];
    g.b = static_cast<const T*>(b.data());
    g.b_rows = shape.b.strides[0];
    g.b_cols = shape.b.strides[1];
    g.ldc = shape.c.strides[0];
    g.bias_stride = wide_bias != nullptr ? 1
                    : has_bias           ? bias_in->stride(0)
                                         : 0;
    g.beta = sum_beta;
    g.relu = act == MIXRT_ACTIVATION_RELU && sum_beta == 0;
  };
  if (tiles && a.dtype() == MIXRT_DTYPE_F32 && c.dtype() == MIXRT_DTYPE_F32 &&
      shape.bias.dtype == MIXRT_DTYPE_F32 &&
      SmallGemmApplies(shape.c.dims[0], shape.c.dims[1], shape.a.dims[1])) {
    SmallGemm g;
    describe(g, float{});
    g.c = static_cast<float*>(c.data());
    g.bias = static_cast<const float*>(bias_data);
    RunSmallGemm(g);
    return g.relu;
  }
  if (tiles && a.dtype() == MIXRT_DTYPE_BF16 && b.dtype() == MIXRT_DTYPE_BF16 &&
      (c.dtype() == MIXRT_DTYPE_F32 || c.dtype() == MIXRT_DTYPE_BF16) &&
      SmallGemmBf16Applies(shape.c.dims[0], shape.c.dims[1], shape.a.dims[1])) {
    SmallGemmBf16 g;
    describe(g, uint16_t{});
    g.c = c.data();
    g.c_dtype = c.dtype();
    g.bias = bias_data;
    g.bias_dtype = shape.bias.dtype;
    RunSmallGemmBf16(g);
    return g.relu;
  }
  const SerialScope serial(SerialProduct(shape));
  if (packed_b == nullptr) {
    const void* a_data = a.data();
    const void* b_data = b.data();
    OperandCopies copies;
    CopyOperandsWhereFaster(&shape, &a_data, &b_data, &copies);
    RunProductOnChosenOneDnn(shape, a_data, b_data, c.data(), bias_data,
                             post_data.data());
  } else {
    const dnnl::memory::desc packed = packed_b->get_desc();
    if (!RunPreparedMatmul(shape, a.data(), packed_b->get_data_handle(),
                           c.data(), bias_data, post_data.data(), &packed)) {
      throw PackedLayoutChanged{};
    }
  }
  return false;
}

// out = act(bias) + beta * out when the inner dimension is empty (oneDNN
// does not take K = 0).
void EmptyInnerProduct(const sdk::KernelCall& call, MixrtActivation act,
                       float beta) {
  const TensorRef& out = call.outputs[0];
  const int nd = out.ndim();
  const bool has_bias = call.inputs.size() == 3;
  std::vector<int64_t> index(nd, 0);
  const int64_t total = out.numel();
  for (int64_t i = 0; i < total; ++i) {
    int64_t rem = i, offset = 0;
    for (int d = nd - 1; d >= 0; --d) {
      index[d] = rem % out.dim(d);
      rem /= out.dim(d);
      offset += index[d] * out.stride(d);
    }
    float v =
        has_bias
            ? call.inputs[2].LoadFloat(index[nd - 1] * call.inputs[2].stride(0))
            : 0.0f;
    if (act == MIXRT_ACTIVATION_RELU) {
      v = sdk::ApplyUnary<float>(MIXRT_UNARY_RELU, v, 0, 0);
    } else if (act == MIXRT_ACTIVATION_GELU) {
      v = sdk::ApplyUnary<float>(MIXRT_UNARY_GELU, v, 0, 0);
    } else if (act == MIXRT_ACTIVATION_GELU_TANH) {
      v = sdk::ApplyUnary<float>(MIXRT_UNARY_GELU_TANH, v, 0, 0);
    }
    if (beta != 0) v += beta * out.LoadFloat(offset);
    out.StoreFloat(offset, v);
  }
}

absl::Status CheckShapes(const sdk::KernelCall& call) {
  if (call.inputs.size() < 2 || call.inputs.size() > 3 ||
      call.outputs.size() != 1) {
    return absl::InvalidArgumentError(
        "matmul takes (a, b[, bias]) and one output");
  }
  const TensorRef& a = call.inputs[0];
  const TensorRef& b = call.inputs[1];
  const TensorRef& out = call.outputs[0];
  const int nd = out.ndim();
  if (nd < 2 || a.ndim() != nd || b.ndim() != nd ||
      a.dim(nd - 1) != b.dim(nd - 2) || out.dim(nd - 2) != a.dim(nd - 2) ||
      out.dim(nd - 1) != b.dim(nd - 1)) {
    return absl::InvalidArgumentError("matmul shapes do not chain");
  }
  for (int d = 0; d < nd - 2; ++d) {
    if (a.dim(d) != out.dim(d) || b.dim(d) != out.dim(d)) {
      return absl::InvalidArgumentError("matmul batch dims differ");
    }
  }
  if (a.dtype() != b.dtype() || !OneDnnType(a.dtype()) ||
      (out.dtype() != a.dtype() && out.dtype() != MIXRT_DTYPE_F32)) {
    return absl::InvalidArgumentError(
        "matmul needs floating inputs of one dtype and an output of that "
        "dtype or f32");
  }
  if (call.inputs.size() == 3 && (call.inputs[2].ndim() != 1 ||
                                  call.inputs[2].dim(0) != out.dim(nd - 1))) {
    return absl::InvalidArgumentError("matmul bias must be [N]");
  }
  return absl::OkStatus();
}

}  // namespace

std::string OneDnnMatmulImplementation(MixrtDtype dtype) {
  try {
    const dnnl::memory::desc md({64, 64}, *OneDnnType(dtype),
                                dnnl::memory::dims{64, 1});
    const dnnl::memory::desc out({64, 64}, dnnl::memory::data_type::f32,
                                 dnnl::memory::dims{64, 1});
    return MatmulPd(md, md, nullptr, out).impl_info_str();
  } catch (const dnnl::error&) {
    return "";
  }
}

bool OneDnnHasMatmul(MixrtDtype dtype) {
  static const bool has[3] = {
      !OneDnnMatmulImplementation(MIXRT_DTYPE_F32).empty(),
      !OneDnnMatmulImplementation(MIXRT_DTYPE_F16).empty(),
      !OneDnnMatmulImplementation(MIXRT_DTYPE_BF16).empty()};
  return dtype <= MIXRT_DTYPE_BF16 && has[dtype];
}

bool MatmulOnCompanion(MixrtDtype dtype) {
  if (OneDnnHasMatmul(dtype)) return false;
  const std::string& implementation = OneDnn3CompanionImplementation(dtype);
  return !implementation.empty() && !absl::StartsWith(implementation, "ref");
}

std::string MatmulImplementation(MixrtDtype dtype) {
  if (!MatmulOnCompanion(dtype)) return OneDnnMatmulImplementation(dtype);
  return absl::StrCat(OneDnn3CompanionImplementation(dtype), " (oneDNN ",
                      OneDnn3CompanionVersion(), " companion)");
}

namespace {
std::atomic<bool> g_f16_pairs_chosen{true};
}  // namespace

bool F16MatmulByBf16PairsPossible() {
  static const bool possible = !OneDnnHasMatmul(MIXRT_DTYPE_F16) &&
                               !MatmulOnCompanion(MIXRT_DTYPE_F16) &&
                               OneDnnHasMatmul(MIXRT_DTYPE_BF16) &&
                               AmxTilesUsable();
  return possible;
}

bool F16MatmulByBf16Pairs() {
  return F16MatmulByBf16PairsPossible() &&
         g_f16_pairs_chosen.load(std::memory_order_relaxed);
}

void SetF16MatmulByBf16Pairs(bool use) {
  g_f16_pairs_chosen.store(use, std::memory_order_relaxed);
}

absl::Status RunMatmulWithEpilogue(const TensorRef& a, const TensorRef& b,
                                   const TensorRef* bias, const TensorRef& out,
                                   absl::Span<const EpilogueStep> steps,
                                   const dnnl::memory* packed_b) {
  try {
    Product(a, b, bias, out, 0, MIXRT_ACTIVATION_NONE, steps, packed_b);
  } catch (const dnnl::error& e) {
    return absl::InternalError(
        absl::StrCat("oneDNN matmul with post-ops: ", e.what()));
  } catch (const PackedLayoutChanged&) {
    return absl::FailedPreconditionError(
        "the packed weights' layout is not the product's");
  }
  return absl::OkStatus();
}

namespace {

// The oneDNN shape of the product RunMatmulWithEpilogue runs.
MatmulShape EpilogueShape(const TensorRef& a, const TensorRef& b,
                          const TensorRef* bias, const TensorRef& out,
                          absl::Span<const EpilogueStep> steps, bool packed_b) {
  MatmulShape shape;
  std::vector<const void*> post_data;
  DescribeProduct(a, b, bias, out, 0, steps, &shape, &post_data);
  shape.packed_b = packed_b;
  return shape;
}

}  // namespace

std::string MatmulWithEpilogueImplementation(
    const TensorRef& a, const TensorRef& b, const TensorRef* bias,
    const TensorRef& out, absl::Span<const EpilogueStep> steps, bool packed_b) {
  return PreparedMatmulImplementation(
      EpilogueShape(a, b, bias, out, steps, packed_b));
}

absl::Status PackMatmulWeights(const TensorRef& a, const TensorRef& b,
                               const TensorRef* bias, const TensorRef& out,
                               absl::Span<const EpilogueStep> steps,
                               dnnl::memory* packed) {
  try {
    const MatmulShape shape = EpilogueShape(a, b, bias, out, steps, true);
    const SerialScope serial(SerialProduct(shape));  // As Product runs it.
    const dnnl::memory::desc desc = PackedWeightsDesc(shape);
    if (!*packed || packed->get_desc() != desc)
      *packed = dnnl::memory(desc, Engine());
    PackWeights(shape, b.data(), *packed);
  } catch (const dnnl::error& e) {
    return absl::InternalError(
        absl::StrCat("packing a matmul's weights: ", e.what()));
  }
  return absl::OkStatus();
}

absl::Status RepackMatmulWeights(const TensorRef& a, const TensorRef& b,
                                 const TensorRef* bias, const TensorRef& out,
                                 absl::Span<const EpilogueStep> steps,
                                 const dnnl::memory& from,
                                 dnnl::memory* packed) {
  try {
    const MatmulShape shape = EpilogueShape(a, b, bias, out, steps, true);
    const dnnl::memory::desc desc = PackedWeightsDesc(shape);
    *packed = dnnl::memory(desc, Engine());
    Reorder(from, *packed);
    ThreadStream().wait();
  } catch (const dnnl::error& e) {
    return absl::InternalError(
        absl::StrCat("repacking a matmul's weights: ", e.what()));
  }
  return absl::OkStatus();
}

absl::Status RunMatmul(const sdk::KernelCall& call) {
  MIXRT_RETURN_IF_ERROR(CheckShapes(call));
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtMatmulAttrs>());
  const auto act = static_cast<MixrtActivation>(attrs->activation);
  const float beta = attrs->beta;
  const TensorRef& out = call.outputs[0];
  const int nd = out.ndim();
  if (call.inputs[0].dim(nd - 1) == 0) {
    EmptyInnerProduct(call, act, beta);
    return absl::OkStatus();
  }

  const TensorRef* bias = call.inputs.size() == 3 ? &call.inputs[2] : nullptr;
  SplitOperand sa, sb;
  // (ah + al)(bh + bl) in f32, al bl (< 2^-18 of the product) left out; the
  // products accumulate in f32 (an f32 out directly when nothing follows),
  // then the epilogue rounds once. Operands holding inf or NaN (overflowed
  // activations under the GradScaler) go through f32 instead.
  if (call.inputs[0].dtype() == MIXRT_DTYPE_F16 && F16MatmulByBf16Pairs() &&
      Split(call.inputs[0], &sa) && Split(call.inputs[1], &sb)) {
    WidenedOperand wc;
    TensorRef c = out;
    if (out.dtype() != MIXRT_DTYPE_F32 || beta != 0) {
      Widen(out, &wc, /*values=*/false);
      c = TensorRef(wc.desc);
    }
    Product(TensorRef(sa.hi_desc), TensorRef(sb.hi_desc), bias, c, 0);
    Product(TensorRef(sa.hi_desc), TensorRef(sb.lo_desc), nullptr, c, 1);
    Product(TensorRef(sa.lo_desc), TensorRef(sb.hi_desc), nullptr, c, 1);
    if (c.data() != out.data() || act != MIXRT_ACTIVATION_NONE) {
      FinishEpilogue(c, out, act, beta);
    }
    return absl::OkStatus();
  }
  // Operands in a dtype this oneDNN build cannot multiply (f16 in 2.6, bf16
  // below avx512_core) are widened to f32 first, unless the oneDNN 3.x
  // companion multiplies them (f16 on avx512_fp16).
  TensorRef a = call.inputs[0];
  TensorRef b = call.inputs[1];
  WidenedOperand wa, wb;
  if (!OneDnnHasMatmul(a.dtype()) && !MatmulOnCompanion(a.dtype())) {
    Widen(a, &wa);
    Widen(b, &wb);
    a = TensorRef(wa.desc);
    b = TensorRef(wb.desc);
  }
  // A widened product is computed into an f32 buffer and rounded into
  // `out` afterwards (oneDNN has no f16 destination either).
  // The activation runs as a separate pass (see epilogue.h), so the
  // accumulation (beta) cannot be a fused sum either when there is one.
  const bool separate_activation = act != MIXRT_ACTIVATION_NONE;
  const bool fused_sum = beta != 0 && !separate_activation;
  WidenedOperand wc;
  TensorRef c = out;
  if ((a.dtype() == MIXRT_DTYPE_F32 && out.dtype() != MIXRT_DTYPE_F32) ||
      (separate_activation && beta != 0)) {
    Widen(out, &wc, /*values=*/beta != 0);  // Old values when accumulating.
    c = TensorRef(wc.desc);
  }
  // Product applies a relu itself where it can (c = relu(a x b + bias)
  // before any accumulation): what is left of the epilogue follows.
  const MixrtActivation rest = Product(a, b, bias, c, fused_sum ? beta : 0, act)
                                   ? MIXRT_ACTIVATION_NONE
                                   : act;
  if (c.data() != out.data() || rest != MIXRT_ACTIVATION_NONE) {
    FinishEpilogue(c, out, rest, fused_sum ? 0.0f : beta);
  }
  return absl::OkStatus();
}

}  // namespace mixrt::cpu
