#include "backends/cpu/fusion/fused_loop.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backends/cpu/kernels/float_rows.h"
#include "backends/cpu/kernels/gelu_rows.h"
#include "backends/cpu/kernels/lane_sums.h"
#include "backends/cpu/kernels/parallel.h"
#include "mixrt/op_names.h"
#include "plugins/sdk/fusion_claim.h"
#include "plugins/sdk/plugin.h"
#include "plugins/sdk/pointwise_math.h"
#include "plugins/sdk/tensor_ref.h"

namespace mixrt::cpu {
namespace {

using sdk::FusionGraph;
using sdk::FusionNode;
using sdk::FusionValue;

// Elements per chunk: every value of a chain gets one chunk-sized buffer,
// and a few dozen of them stay in L1. 256 is also the column block of the
// reduce kernel, whose order of additions a fused sum repeats.
constexpr int64_t kChunk = 256;
// Reductions one loop ends in, at most (a chain's sum and its sum of
// squares, a loss and its count).
constexpr size_t kMaxReductions = 4;
// Rows of a whole-row sum the reduce kernel adds up separately first.
constexpr int64_t kPiece = 1 << 16;

bool IsInt(MixrtDtype d) {
  return d == MIXRT_DTYPE_I32 || d == MIXRT_DTYPE_I64;
}

// What the chain computes exactly as the op-by-op kernels do for every
// size (those that switch to oneDNN's eltwise above a size, whose
// polynomials differ, stay op by op).
bool FusesUnary(MixrtUnaryKind kind) {
  switch (kind) {
    case MIXRT_UNARY_NEG:
    case MIXRT_UNARY_ABS:
    case MIXRT_UNARY_RELU:
    case MIXRT_UNARY_LEAKY_RELU:
    case MIXRT_UNARY_GELU:
    case MIXRT_UNARY_CLAMP:
      return true;
    default:
      return false;
  }
}

// The shape a node iterates over, or empty when the chain cannot run it.
std::vector<int64_t> IterationShape(const FusionGraph& g, const FusionNode& n) {
  const std::vector<int64_t> none;
  for (int v : n.inputs) {
    if (!g.values[v].is_static()) return none;
  }
  for (int v : n.outputs) {
    if (!g.values[v].is_static() || !g.values[v].is_contiguous()) return none;
  }
  if (n.attrs_extended || n.outputs.size() != 1) return none;
  const FusionValue& out = g.values[n.outputs[0]];
  auto same_shape = [&](size_t inputs) {
    if (n.inputs.size() != inputs) return false;
    for (int v : n.inputs) {
      if (g.values[v].shape != out.shape) return false;
    }
    return true;
  };
  auto float_io = [&](MixrtDtype d) {
    for (int v : n.inputs) {
      if (g.values[v].dtype != d) return false;
    }
    return sdk::IsFloatingDtype(d);
  };
  switch (n.op) {
    case MIXRT_OP_BINARY: {
      auto a = n.GetAttrs<MixrtPointwiseAttrs>();
      if (!a.ok() || a->kind >= MIXRT_BINARY_COUNT || !same_shape(2) ||
          !float_io(out.dtype)) {
        return none;
      }
      return out.shape;
    }
    case MIXRT_OP_UNARY:
    case MIXRT_OP_UNARY_BACKWARD: {
      auto a = n.GetAttrs<MixrtPointwiseAttrs>();
      const bool backward = n.op == MIXRT_OP_UNARY_BACKWARD;
      if (!a.ok() || a->kind >= MIXRT_UNARY_COUNT ||
          !FusesUnary(static_cast<MixrtUnaryKind>(a->kind)) ||
          !same_shape(backward ? 2 : 1) || !float_io(out.dtype)) {
        return none;
      }
      return out.shape;
    }
    case MIXRT_OP_COMPARE: {
      auto a = n.GetAttrs<MixrtPointwiseAttrs>();
      const MixrtDtype in = g.values[n.inputs.empty() ? 0 : n.inputs[0]].dtype;
      if (!a.ok() || a->kind >= MIXRT_COMPARE_COUNT || !same_shape(2) ||
          out.dtype != MIXRT_DTYPE_BOOL || g.values[n.inputs[1]].dtype != in ||
          in == MIXRT_DTYPE_BOOL) {
        return none;
      }
      return out.shape;
    }
    case MIXRT_OP_WHERE:
      if (!same_shape(3) || g.values[n.inputs[0]].dtype != MIXRT_DTYPE_BOOL ||
          g.values[n.inputs[1]].dtype != out.dtype ||
          g.values[n.inputs[2]].dtype != out.dtype ||
          !sdk::IsFloatingDtype(out.dtype)) {
        return none;
      }
      return out.shape;
    case MIXRT_OP_COPY: {
      if (!same_shape(1)) return none;
      const MixrtDtype in = g.values[n.inputs[0]].dtype;
      // Integers become floats exactly as the copy kernel converts them;
      // floats to integers (truncation rules) stay op by op.
      if (!(sdk::IsFloatingDtype(out.dtype) || out.dtype == MIXRT_DTYPE_BOOL) &&
          !(IsInt(out.dtype) && IsInt(in))) {
        return none;
      }
      return out.shape;
    }
    case MIXRT_OP_REDUCE: {
      auto a = n.GetAttrs<MixrtReduceAttrs>();
      if (!a.ok() || n.inputs.size() != 1) return none;
      const FusionValue& in = g.values[n.inputs[0]];
      if ((a->kind != MIXRT_REDUCE_SUM && a->kind != MIXRT_REDUCE_MEAN &&
           a->kind != MIXRT_REDUCE_MAX && a->kind != MIXRT_REDUCE_MIN) ||
          !sdk::IsFloatingDtype(in.dtype) || !sdk::IsFloatingDtype(out.dtype) ||
          in.shape.empty() || in.shape.size() != out.shape.size()) {
        return none;
      }
      // The reduced axes: one run, each reduced to 1 in the output.
      int first = -1, last = -1;
      for (int d = 0; d < static_cast<int>(in.shape.size()); ++d) {
        const bool reduced = (a->axes_mask >> d) & 1u;
        if (reduced) {
          if (last >= 0 && last != d - 1) return none;
          if (first < 0) first = d;
          last = d;
          if (out.shape[d] != 1) return none;
        } else if (out.shape[d] != in.shape[d]) {
          return none;
        }
      }
      if (first < 0 || (a->axes_mask >> in.shape.size()) != 0) return none;
      return in.shape;
    }
    default:
      return none;
  }
}

}  // namespace

std::vector<int> ClaimFusedLoops(const FusionGraph& g,
                                 absl::Span<const int> taken) {
  sdk::LoopRules rules;
  rules.iteration_shape = [&g, taken](const FusionNode& n) {
    const size_t i = static_cast<size_t>(&n - g.nodes.data());
    if (i < taken.size() && taken[i] >= 0) return std::vector<int64_t>{};
    return IterationShape(g, n);
  };
  rules.max_reductions = kMaxReductions;
  return sdk::ClaimLoops(g, rules);
}

namespace {

// ---- The kernel
// --------------------------------------------------------------

// A value the loop reads from memory.
struct Load {
  int value;  // Fusion value, whose data the run gives.
  int local;
  MixrtDtype dtype;
  std::vector<int64_t> strides;  // Over the iteration shape.
  bool contiguous;
  bool integer;
};

struct Step {
  MixrtOp op;
  uint32_t kind = 0;
  float alpha = 0, beta = 0;
  std::vector<int> in;  // Locals.
  int out = -1;
  MixrtDtype out_dtype;
  bool int_inputs = false;  // compare/copy of integers.
};

struct Store {
  int value;
  int local;
  MixrtDtype dtype;
};

struct Reduction {
  int local;  // The chunk it reduces.
  int value;  // Where its result goes.
  MixrtReduceKind kind;
  MixrtDtype dtype;
};

template <typename Fn>
void Map2(const float* a, const float* b, int64_t n, float* out, Fn&& f) {
  for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], b[i]);
}

template <MixrtBinaryKind kKind>
void BinaryChunk(const float* a, const float* b, int64_t n, float* out) {
  Map2(a, b, n, out,
       [](float x, float y) { return sdk::ApplyBinary<float>(kKind, x, y); });
}

template <size_t... kKinds>
void Binary(uint32_t kind, const float* a, const float* b, int64_t n,
            float* out, std::index_sequence<kKinds...>) {
  ((kind == kKinds
        ? (BinaryChunk<static_cast<MixrtBinaryKind>(kKinds)>(a, b, n, out),
           true)
        : false) ||
   ...);
}

void Unary(const Step& s, const float* x, int64_t n, float* out) {
  const auto kind = static_cast<MixrtUnaryKind>(s.kind);
  if (kind == MIXRT_UNARY_GELU) {
    GeluRow(x, n, out);
    return;
  }
  if (kind == MIXRT_UNARY_RELU) {
    for (int64_t i = 0; i < n; ++i)
      out[i] = sdk::ApplyUnary<float>(MIXRT_UNARY_RELU, x[i], 0.f, 0.f);
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    out[i] = sdk::ApplyUnary<float>(kind, x[i], s.alpha, s.beta);
}

void UnaryBackward(const Step& s, const float* g, const float* x, int64_t n,
                   float* out) {
  const auto kind = static_cast<MixrtUnaryKind>(s.kind);
  if (kind == MIXRT_UNARY_GELU) {
    GeluGradRow(g, x, n, out);
    return;
  }
  if (kind == MIXRT_UNARY_RELU) {
    // As the relu-backward kernel: factors, then products (no branch).
    float factor[kChunk];
    for (int64_t i = 0; i < n; ++i) factor[i] = x[i] > 0.0f ? 1.0f : 0.0f;
    for (int64_t i = 0; i < n; ++i) out[i] = g[i] * factor[i];
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    out[i] = g[i] * sdk::UnaryDerivative<float>(kind, x[i], s.alpha, s.beta);
  }
}

class FusedLoop : public sdk::FusedKernel {
 public:
  std::string description;
  std::vector<int64_t> shape;
  int64_t numel = 1;
  int locals = 0;
  std::vector<bool> local_is_int;
  std::vector<Load> loads;
  std::vector<Step> steps;
  std::vector<Store> stores;
  std::vector<Reduction> reductions;
  // With reductions: the iteration shape as [outer, middle, inner].
  int64_t outer = 1, middle = 1, inner = 1;

  std::string Description() const override { return description; }

  absl::Status Run(absl::Span<void* const> data,
                   absl::Span<const int64_t> /*symbols*/) override {
    for (const Load& l : loads) {
      if (data[l.value] == nullptr && numel > 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("fused loop: no data for input value ", l.value));
      }
    }
    for (const Store& s : stores) {
      if (data[s.value] == nullptr && numel > 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("fused loop: no data for stored value ", s.value));
      }
    }
    if (reductions.empty()) {
      const int64_t chunks = (numel + kChunk - 1) / kChunk;
      ParallelFor(chunks, GrainFor(kChunk * static_cast<int64_t>(steps.size())),
                  [&](int64_t begin, int64_t end) {
                    Scratch scratch(*this);
                    for (int64_t c = begin; c < end; ++c) {
                      const int64_t start = c * kChunk;
                      Chunk(data, start, std::min(kChunk, numel - start),
                            scratch);
                    }
                  });
      return absl::OkStatus();
    }
    if (inner > 1) {
      const int64_t blocks = (inner + kChunk - 1) / kChunk;
      ParallelFor(outer * blocks, GrainFor(middle * std::min(kChunk, inner)),
                  [&](int64_t begin, int64_t end) {
                    Scratch scratch(*this);
                    for (int64_t task = begin; task < end; ++task) {
                      ColumnBlock(data, task / blocks, (task % blocks) * kChunk,
                                  scratch);
                    }
                  });
    } else {
      WholeRows(data);
    }
    return absl::OkStatus();
  }

 private:
  // A thread's chunk buffers, kept between runs: allocating and zeroing
  // them per run cost as much as a small chain's arithmetic.
  struct Scratch {
    explicit Scratch(const FusedLoop& k) {
      thread_local std::vector<float> floats;
      thread_local std::vector<int64_t> ints;
      thread_local std::vector<const float*> at_storage;
      const size_t need = static_cast<size_t>(k.locals) * kChunk;
      if (floats.size() < need) floats.resize(need);
      if (ints.size() < need) ints.resize(need);
      if (at_storage.size() < static_cast<size_t>(k.locals))
        at_storage.resize(k.locals);
      float_base = floats.data();
      int_base = ints.data();
      at = at_storage.data();
    }
    float* float_base;
    int64_t* int_base;
    const float** at;  // Per local: its chunk's floats.
    float* own(int local) {
      return float_base + static_cast<size_t>(local) * kChunk;
    }
    int64_t* ints_of(int local) {
      return int_base + static_cast<size_t>(local) * kChunk;
    }
  };

  // Runs the chain over elements [start, start + n) of the iteration
  // shape (n <= kChunk, within one row of the innermost dim's blocks).
  void Chunk(absl::Span<void* const> data, int64_t start, int64_t n,
             Scratch& s) const {
    for (const Load& l : loads) LoadChunk(l, data[l.value], start, n, s);
    for (const Step& st : steps) RunStep(st, n, s);
    for (const Store& st : stores) {
      StoreRow(s.at[st.local], n, data[st.value], st.dtype, start);
    }
  }

  void LoadChunk(const Load& l, const void* src, int64_t start, int64_t n,
                 Scratch& s) const {
    if (l.integer) {
      int64_t* dst = s.ints_of(l.local);
      MixrtTensorDesc desc{};
      desc.data = const_cast<void*>(src);
      desc.dtype = l.dtype;
      const sdk::TensorRef t(desc);
      ForEachOffset(l, start, n,
                    [&](int64_t i, int64_t off) { dst[i] = t.LoadInt(off); });
      return;
    }
    if (l.contiguous) {
      s.at[l.local] = FloatsAt(src, l.dtype, start, n, s.own(l.local));
      return;
    }
    float* dst = s.own(l.local);
    // Runs along the innermost dim load as rows; a broadcast repeats.
    const int last = static_cast<int>(shape.size()) - 1;
    int64_t i = 0;
    while (i < n) {
      int64_t offset = 0, rem = start + i;
      int64_t in_row = 0;
      for (int d = last; d >= 0; --d) {
        const int64_t idx = rem % shape[d];
        rem /= shape[d];
        offset += idx * l.strides[d];
        if (d == last) in_row = idx;
      }
      const int64_t run = std::min(n - i, shape[last] - in_row);
      if (l.strides[last] == 1) {
        LoadRow(src, l.dtype, offset, run, dst + i);
      } else if (l.strides[last] == 0) {
        float v;
        LoadRow(src, l.dtype, offset, 1, &v);
        std::fill(dst + i, dst + i + run, v);
      } else {
        for (int64_t k = 0; k < run; ++k) {
          LoadRow(src, l.dtype, offset + k * l.strides[last], 1, dst + i + k);
        }
      }
      i += run;
    }
    s.at[l.local] = dst;
  }

  template <typename Fn>
  void ForEachOffset(const Load& l, int64_t start, int64_t n, Fn&& fn) const {
    for (int64_t i = 0; i < n; ++i) {
      int64_t offset = 0, rem = start + i;
      for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
        offset += (rem % shape[d]) * l.strides[d];
        rem /= shape[d];
      }
      fn(i, offset);
    }
  }

  void RunStep(const Step& st, int64_t n, Scratch& s) const {
    float* out = s.own(st.out);
    auto in = [&](int k) { return s.at[st.in[k]]; };
    switch (st.op) {
      case MIXRT_OP_BINARY:
        Binary(st.kind, in(0), in(1), n, out,
               std::make_index_sequence<MIXRT_BINARY_COUNT>());
        break;
      case MIXRT_OP_UNARY:
        Unary(st, in(0), n, out);
        break;
      case MIXRT_OP_UNARY_BACKWARD:
        UnaryBackward(st, in(0), in(1), n, out);
        break;
      case MIXRT_OP_COMPARE: {
        const auto kind = static_cast<MixrtCompareKind>(st.kind);
        if (st.int_inputs) {
          const int64_t* a = s.ints_of(st.in[0]);
          const int64_t* b = s.ints_of(st.in[1]);
          for (int64_t i = 0; i < n; ++i)
            out[i] = sdk::ApplyCompare<int64_t>(kind, a[i], b[i]) ? 1.f : 0.f;
        } else {
          const float* a = in(0);
          const float* b = in(1);
          for (int64_t i = 0; i < n; ++i)
            out[i] = sdk::ApplyCompare<float>(kind, a[i], b[i]) ? 1.f : 0.f;
        }
        break;
      }
      case MIXRT_OP_WHERE: {
        const float* c = in(0);
        const float* x = in(1);
        const float* y = in(2);
        for (int64_t i = 0; i < n; ++i) out[i] = c[i] != 0.f ? x[i] : y[i];
        break;
      }
      case MIXRT_OP_COPY:
        if (st.int_inputs) {
          const int64_t* a = s.ints_of(st.in[0]);
          if (local_is_int[st.out]) {
            int64_t* o = s.ints_of(st.out);
            for (int64_t i = 0; i < n; ++i) {
              o[i] = st.out_dtype == MIXRT_DTYPE_I32
                         ? static_cast<int32_t>(a[i])
                         : a[i];
            }
            s.at[st.out] = nullptr;
            return;
          }
          for (int64_t i = 0; i < n; ++i) {
            out[i] = st.out_dtype == MIXRT_DTYPE_BOOL
                         ? (a[i] != 0 ? 1.f : 0.f)
                         : static_cast<float>(a[i]);
          }
        } else if (st.out_dtype == MIXRT_DTYPE_BOOL) {
          const float* a = in(0);
          for (int64_t i = 0; i < n; ++i) out[i] = a[i] != 0.f ? 1.f : 0.f;
        } else {
          std::copy(in(0), in(0) + n, out);
        }
        break;
      default:
        break;
    }
    // A narrow result is what the next op reads, as in memory.
    RoundRowInPlace(out, n, st.out_dtype);
    s.at[st.out] = out;
  }

  // Columns [c0, c0 + n) of outer index o, over all middle rows: chunks of
  // whole rows when rows are short (a chunk per 64-wide row cost more than
  // the arithmetic), each row added to the column sums in row order, as
  // the reduce kernel adds them.
  void ColumnBlock(absl::Span<void* const> data, int64_t o, int64_t c0,
                   Scratch& s) const {
    const int64_t n = std::min(kChunk, inner - c0);
    const int64_t rows = n == inner ? std::max<int64_t>(1, kChunk / inner) : 1;
    double acc[kMaxReductions][kChunk];
    for (size_t r = 0; r < reductions.size(); ++r) {
      std::fill(acc[r], acc[r] + n, Initial(reductions[r].kind));
    }
    for (int64_t m0 = 0; m0 < middle; m0 += rows) {
      const int64_t count = std::min(rows, middle - m0);
      Chunk(data, (o * middle + m0) * inner + c0, count * n, s);
      for (size_t r = 0; r < reductions.size(); ++r) {
        const float* x = s.at[reductions[r].local];
        for (int64_t row = 0; row < count; ++row) {
          Accumulate(reductions[r].kind, x + row * n, n, acc[r]);
        }
      }
    }
    for (size_t r = 0; r < reductions.size(); ++r) {
      float result[kChunk];
      for (int64_t j = 0; j < n; ++j)
        result[j] = Finish(reductions[r].kind, acc[r][j]);
      if (data[reductions[r].value] == nullptr) continue;  // Nobody reads it.
      StoreRow(result, n, data[reductions[r].value], reductions[r].dtype,
               o * inner + c0);
    }
  }

  // Whole-row reductions, a task per piece of kPiece elements: each piece
  // starts from the initial value and the pieces combine in order
  // afterwards, as the reduce kernel adds them, so the threads share a
  // single row too (a loss's mean over the whole batch ran on one thread).
  void WholeRows(absl::Span<void* const> data) const {
    const size_t nr = reductions.size();
    const int64_t pieces = (middle + kPiece - 1) / kPiece;
    std::vector<double> partial(outer * pieces * nr);
    ParallelFor(outer * pieces, GrainFor(std::min(middle, kPiece)),
                [&](int64_t begin, int64_t end) {
                  Scratch scratch(*this);
                  for (int64_t task = begin; task < end; ++task) {
                    const int64_t o = task / pieces,
                                  p0 = (task % pieces) * kPiece;
                    Piece(data, o, p0, std::min(middle, p0 + kPiece), scratch,
                          &partial[task * nr]);
                  }
                });
    for (int64_t o = 0; o < outer; ++o) {
      for (size_t r = 0; r < nr; ++r) {
        const MixrtReduceKind kind = reductions[r].kind;
        double total = Initial(kind);
        for (int64_t p = 0; p < pieces; ++p) {
          const double piece = partial[(o * pieces + p) * nr + r];
          total = Sums(kind) ? total + piece : Combine(kind, total, piece);
        }
        const float result = Finish(kind, total);
        if (data[reductions[r].value] == nullptr) continue;  // Nobody reads it.
        StoreRow(&result, 1, data[reductions[r].value], reductions[r].dtype, o);
      }
    }
  }

  // Middle rows [p0, p1) of outer index o, each reduction's from its
  // initial value into piece[r].
  void Piece(absl::Span<void* const> data, int64_t o, int64_t p0, int64_t p1,
             Scratch& s, double* piece) const {
    for (size_t r = 0; r < reductions.size(); ++r)
      piece[r] = Initial(reductions[r].kind);
    for (int64_t m0 = p0; m0 < p1; m0 += kChunk) {
      const int64_t n = std::min(kChunk, p1 - m0);
      Chunk(data, o * middle + m0, n, s);
      for (size_t r = 0; r < reductions.size(); ++r) {
        const float* x = s.at[reductions[r].local];
        if (Sums(reductions[r].kind)) {
          piece[r] += SumInDouble(x, n);
        } else {
          Accumulate(reductions[r].kind, x, n, &piece[r], /*single=*/true);
        }
      }
    }
  }

  static bool Sums(MixrtReduceKind k) {
    return k == MIXRT_REDUCE_SUM || k == MIXRT_REDUCE_MEAN;
  }
  static double Initial(MixrtReduceKind k) {
    const double inf = std::numeric_limits<double>::infinity();
    return k == MIXRT_REDUCE_MAX ? -inf : k == MIXRT_REDUCE_MIN ? inf : 0.0;
  }
  static double Combine(MixrtReduceKind k, double r, double v) {
    if (v != v || r != r) return v + r;  // NaN propagates.
    return k == MIXRT_REDUCE_MAX ? std::max(r, v) : std::min(r, v);
  }
  // acc[j] (or acc[0] for all j when single) takes x[j].
  static void Accumulate(MixrtReduceKind k, const float* x, int64_t n,
                         double* acc, bool single = false) {
    if (Sums(k) && !single) {
      for (int64_t j = 0; j < n; ++j) acc[j] += x[j];
      return;
    }
    for (int64_t j = 0; j < n; ++j) {
      double& a = acc[single ? 0 : j];
      a = Sums(k) ? a + x[j] : Combine(k, a, x[j]);
    }
  }
  float Finish(MixrtReduceKind k, double v) const {
    return static_cast<float>(
        k == MIXRT_REDUCE_MEAN ? v / static_cast<double>(middle) : v);
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<sdk::FusedKernel>> CompileFusedLoop(
    const FusionGraph& g, absl::Span<const int> group_of_node, int group) {
  auto k = std::make_unique<FusedLoop>();
  const std::vector<int> nodes = FusionGraph::GroupNodes(group_of_node, group);
  if (nodes.empty()) return absl::InvalidArgumentError("empty fused loop");
  std::vector<int> local_of(g.values.size(), -1);
  auto new_local = [&](bool integer) {
    k->local_is_int.push_back(integer);
    return k->locals++;
  };
  std::vector<std::string> ops;
  for (int i : nodes) {
    const FusionNode& n = g.nodes[i];
    const std::vector<int64_t> shape = IterationShape(g, n);
    if (shape.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("fused loop: node ", i,
                                                     " (", MixrtOpName(n.op),
                                                     ") is not a loop op"));
    }
    if (k->shape.empty()) k->shape = shape;
    if (shape != k->shape) {
      return absl::InvalidArgumentError(
          "fused loop: nodes of different shapes");
    }
    ops.push_back(MixrtOpName(n.op));
    Step st;
    st.op = n.op;
    for (int v : n.inputs) {
      if (local_of[v] < 0) {
        const FusionValue& val = g.values[v];
        const bool integer =
            !sdk::IsFloatingDtype(val.dtype) && val.dtype != MIXRT_DTYPE_BOOL;
        local_of[v] = new_local(integer);
        Load l{v,           local_of[v],         val.dtype,
               val.strides, val.is_contiguous(), integer};
        k->loads.push_back(std::move(l));
      }
      st.in.push_back(local_of[v]);
    }
    const FusionValue& out = g.values[n.outputs[0]];
    st.out_dtype = out.dtype;
    if (n.op == MIXRT_OP_REDUCE) {
      auto a = n.GetAttrs<MixrtReduceAttrs>();
      k->reductions.push_back({st.in[0], n.outputs[0],
                               static_cast<MixrtReduceKind>(a->kind),
                               out.dtype});
      sdk::ReducedSplit split;
      if (!sdk::SplitAtReducedDims(shape, a->axes_mask, &split)) {
        return absl::InvalidArgumentError(
            "fused loop: reduced dims are not one run");
      }
      k->outer = split.outer;
      k->middle = split.middle;
      k->inner = split.inner;
      continue;
    }
    if (n.op == MIXRT_OP_BINARY || n.op == MIXRT_OP_UNARY ||
        n.op == MIXRT_OP_UNARY_BACKWARD || n.op == MIXRT_OP_COMPARE) {
      auto a = n.GetAttrs<MixrtPointwiseAttrs>();
      st.kind = a->kind;
      st.alpha = static_cast<float>(a->alpha);
      st.beta = static_cast<float>(a->beta);
    }
    st.int_inputs = !n.inputs.empty() && k->local_is_int[st.in[0]];
    const bool int_out = IsInt(out.dtype);
    st.out = new_local(int_out);
    local_of[n.outputs[0]] = st.out;
    k->steps.push_back(std::move(st));
  }
  for (int64_t d : k->shape) k->numel *= d;
  for (int v : g.GroupStores(group_of_node, group)) {
    if (g.nodes[g.producer[v]].op == MIXRT_OP_REDUCE)
      continue;  // Stored at its end.
    if (k->local_is_int[local_of[v]]) {
      return absl::UnimplementedError(
          "fused loop: integer results stay op by op");
    }
    k->stores.push_back({v, local_of[v], g.values[v].dtype});
  }
  k->description = absl::StrCat("fused loop: ", absl::StrJoin(ops, ", "));
  return k;
}

}  // namespace mixrt::cpu
