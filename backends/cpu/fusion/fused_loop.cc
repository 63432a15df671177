#include "backends/cpu/fusion/fused_loop.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backends/cpu/kernels/float_rows.h"
#include "backends/cpu/kernels/gelu_rows.h"
#include "backends/cpu/kernels/parallel.h"
#include "mixrt/status_macros.h"
#include "plugins/sdk/fusion_claim.h"
#include "plugins/sdk/loop_elements.h"
#include "plugins/sdk/plugin.h"
#include "plugins/sdk/reduction_order.h"
#include "plugins/sdk/tensor_ref.h"

namespace mixrt::cpu {
namespace {

using sdk::FusionGraph;
using sdk::FusionNode;
using sdk::LoopStepKind;
namespace element = sdk::element;

// Elements per chunk: every value of a chain gets one chunk-sized buffer,
// and a few dozen of them stay in L1. It is also the reduction order's
// column block, whose order of additions a fused sum repeats.
constexpr int64_t kChunk = element::kReduceColumnBlock;
// Reductions one loop ends in, at most (a chain's sum and its sum of
// squares, a loss and its count).
constexpr size_t kMaxReductions = 4;

}  // namespace

std::vector<int> ClaimFusedLoops(const FusionGraph& g,
                                 absl::Span<const int> taken) {
  sdk::LoopRules rules;
  rules.iteration_shape = [&g, taken](const FusionNode& n) {
    const size_t i = static_cast<size_t>(&n - g.nodes.data());
    if (i < taken.size() && taken[i] >= 0) return std::vector<int64_t>{};
    return sdk::LoopIterationShape(g, n);
  };
  rules.max_reductions = kMaxReductions;
  return sdk::ClaimLoops(g, rules);
}

namespace {

// ---- The interpreter of a sdk::LoopProgram

// The element function is a template argument, so each step's loop is
// its own instantiation with the call inlined (and vectorized).
template <float (*F)(float)>
void Map1(const float* a, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = F(a[i]);
}

template <float (*F)(float, float)>
void Map2(const float* a, const float* b, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = F(a[i], b[i]);
}

// For element functions that take the step's alpha and beta.
template <typename Fn>
void Map1With(const float* a, int64_t n, float* out, Fn&& f) {
  for (int64_t i = 0; i < n; ++i) out[i] = f(a[i]);
}

template <typename Fn>
void Map2With(const float* a, const float* b, int64_t n, float* out, Fn&& f) {
  for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], b[i]);
}

template <typename T, bool (*F)(T, T)>
void CompareChunk(const T* a, const T* b, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = element::mx_bool_as_float(F(a[i], b[i]));
}

class FusedLoop : public sdk::FusedKernel {
 public:
  explicit FusedLoop(sdk::LoopProgram program)
      : p_(std::move(program)),
        outer_(p_.split.outer),
        middle_(p_.split.middle),
        inner_(p_.split.inner) {}

  std::string Description() const override {
    return absl::StrCat("fused loop: ", absl::StrJoin(p_.op_names, ", "));
  }

  sdk::Status Run(sdk::Span<void* const> data,
                  sdk::Span<const int64_t> /*symbols*/) override {
    MIXRT_RETURN_IF_ERROR(CheckData(data));
    if (p_.reductions.empty()) {
      const int64_t numel = p_.numel;
      const int64_t chunks = (numel + kChunk - 1) / kChunk;
      ParallelFor(
          chunks, GrainFor(kChunk * static_cast<int64_t>(p_.steps.size())),
          [&](int64_t begin, int64_t end) {
            Scratch scratch(p_.locals);
            for (int64_t c = begin; c < end; ++c) {
              const int64_t start = c * kChunk;
              Chunk(data, start, std::min(kChunk, numel - start), scratch);
            }
          });
    } else if (inner_ > 1) {
      const int64_t blocks = (inner_ + kChunk - 1) / kChunk;
      ParallelFor(outer_ * blocks, GrainFor(middle_ * std::min(kChunk, inner_)),
                  [&](int64_t begin, int64_t end) {
                    Scratch scratch(p_.locals);
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
  absl::Status CheckData(absl::Span<void* const> data) const {
    if (p_.numel == 0) return absl::OkStatus();
    for (const sdk::LoopLoad& l : p_.loads) {
      if (data[l.value] == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("fused loop: no data for input value ", l.value));
      }
    }
    for (const sdk::LoopStore& s : p_.stores) {
      if (data[s.value] == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("fused loop: no data for stored value ", s.value));
      }
    }
    return absl::OkStatus();
  }

  // A thread's chunk buffers, kept between runs: allocating and zeroing
  // them per run cost as much as a small chain's arithmetic.
  struct Scratch {
    explicit Scratch(int locals) {
      thread_local std::vector<float> floats;
      thread_local std::vector<int64_t> ints;
      thread_local std::vector<const float*> at_storage;
      const size_t need = static_cast<size_t>(locals) * kChunk;
      if (floats.size() < need) floats.resize(need);
      if (ints.size() < need) ints.resize(need);
      if (at_storage.size() < static_cast<size_t>(locals))
        at_storage.resize(locals);
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

  // Runs the program over elements [start, start + n) of the iteration
  // shape (n <= kChunk, within one row of the innermost dim's blocks).
  void Chunk(absl::Span<void* const> data, int64_t start, int64_t n,
             Scratch& s) const {
    for (const sdk::LoopLoad& l : p_.loads)
      LoadChunk(l, data[l.value], start, n, s);
    for (const sdk::LoopStep& st : p_.steps) RunStep(st, n, s);
    for (const sdk::LoopStore& st : p_.stores) {
      StoreRow(s.at[st.local], n, data[st.value], st.dtype, start);
    }
  }

  void LoadChunk(const sdk::LoopLoad& l, const void* src, int64_t start,
                 int64_t n, Scratch& s) const {
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
    const std::vector<int64_t>& shape = p_.shape;
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
  void ForEachOffset(const sdk::LoopLoad& l, int64_t start, int64_t n,
                     Fn&& fn) const {
    const std::vector<int64_t>& shape = p_.shape;
    for (int64_t i = 0; i < n; ++i) {
      int64_t offset = 0, rem = start + i;
      for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
        offset += (rem % shape[d]) * l.strides[d];
        rem /= shape[d];
      }
      fn(i, offset);
    }
  }

  // One case per step kind, each the element function of loop_elements.h
  // over the chunk (GELU and its gradient through the row kernels the
  // op-by-op GELU uses).
  void RunStep(const sdk::LoopStep& st, int64_t n, Scratch& s) const {
    if (st.int_inputs) {
      RunIntegerStep(st, n, s);
      if (st.int_out) return;
    } else {
      RunFloatStep(st, n, s);
    }
    float* out = s.own(st.out);
    // A narrow result is what the next op reads, as in memory.
    RoundRowInPlace(out, n, st.out_dtype);
    s.at[st.out] = out;
  }

  void RunFloatStep(const sdk::LoopStep& st, int64_t n, Scratch& s) const {
    float* out = s.own(st.out);
    const float* x = s.at[st.in[0]];
    const float* y = st.in.size() > 1 ? s.at[st.in[1]] : nullptr;
    const float a = st.alpha, b = st.beta;
    using K = LoopStepKind;
    switch (st.kind) {
      case K::kAdd:
        return Map2<element::mx_add<float>>(x, y, n, out);
      case K::kSub:
        return Map2<element::mx_sub<float>>(x, y, n, out);
      case K::kMul:
        return Map2<element::mx_mul<float>>(x, y, n, out);
      case K::kDiv:
        return Map2<element::mx_div<float>>(x, y, n, out);
      case K::kPow:
        return Map2<element::mx_pow<float>>(x, y, n, out);
      case K::kMaximum:
        return Map2<element::mx_maximum<float>>(x, y, n, out);
      case K::kMinimum:
        return Map2<element::mx_minimum<float>>(x, y, n, out);
      case K::kNeg:
        return Map1<element::mx_neg<float>>(x, n, out);
      case K::kAbs:
        return Map1<element::mx_abs<float>>(x, n, out);
      case K::kRelu:
        return Map1<element::mx_relu<float>>(x, n, out);
      case K::kLeakyRelu:
        return Map1With(x, n, out,
                        [a](float v) { return element::mx_leaky_relu(v, a); });
      case K::kGelu:
        return GeluRow(x, n, out);
      case K::kClamp:
        return Map1With(x, n, out,
                        [a, b](float v) { return element::mx_clamp(v, a, b); });
      case K::kNegBackward:
        return Map2With(x, y, n, out, [](float g, float v) {
          return g * element::mx_neg_derivative(v);
        });
      case K::kAbsBackward:
        return Map2With(x, y, n, out, [](float g, float v) {
          return g * element::mx_abs_derivative(v);
        });
      case K::kReluBackward:
        return Map2With(x, y, n, out, [](float g, float v) {
          return g * element::mx_relu_derivative(v);
        });
      case K::kLeakyReluBackward:
        return Map2With(x, y, n, out, [a](float g, float v) {
          return g * element::mx_leaky_relu_derivative(v, a);
        });
      case K::kGeluBackward:
        return GeluGradRow(x, y, n, out);
      case K::kClampBackward:
        return Map2With(x, y, n, out, [a, b](float g, float v) {
          return g * element::mx_clamp_derivative(v, a, b);
        });
      case K::kEq:
        return CompareChunk<float, element::mx_eq<float>>(x, y, n, out);
      case K::kNe:
        return CompareChunk<float, element::mx_ne<float>>(x, y, n, out);
      case K::kLt:
        return CompareChunk<float, element::mx_lt<float>>(x, y, n, out);
      case K::kLe:
        return CompareChunk<float, element::mx_le<float>>(x, y, n, out);
      case K::kGt:
        return CompareChunk<float, element::mx_gt<float>>(x, y, n, out);
      case K::kGe:
        return CompareChunk<float, element::mx_ge<float>>(x, y, n, out);
      case K::kWhere: {
        const float* z = s.at[st.in[2]];
        for (int64_t i = 0; i < n; ++i)
          out[i] = element::mx_where(x[i], y[i], z[i]);
        return;
      }
      case K::kCopy:
        if (st.out_dtype == MIXRT_DTYPE_BOOL)
          return Map1<element::mx_to_bool>(x, n, out);
        std::copy(x, x + n, out);
        return;
    }
  }

  // Compares and copies of integer locals, exact in int64.
  void RunIntegerStep(const sdk::LoopStep& st, int64_t n, Scratch& s) const {
    const int64_t* x = s.ints_of(st.in[0]);
    float* out = s.own(st.out);
    using K = LoopStepKind;
    if (st.kind == K::kCopy && st.int_out) {
      int64_t* o = s.ints_of(st.out);
      for (int64_t i = 0; i < n; ++i) {
        o[i] =
            st.out_dtype == MIXRT_DTYPE_I32 ? static_cast<int32_t>(x[i]) : x[i];
      }
      s.at[st.out] = nullptr;
      return;
    }
    if (st.kind == K::kCopy) {
      for (int64_t i = 0; i < n; ++i) {
        out[i] = st.out_dtype == MIXRT_DTYPE_BOOL
                     ? element::mx_bool_as_float(x[i] != 0)
                     : static_cast<float>(x[i]);
      }
      return;
    }
    const int64_t* y = s.ints_of(st.in[1]);
    switch (st.kind) {
      case K::kEq:
        return CompareChunk<int64_t, element::mx_eq<int64_t>>(x, y, n, out);
      case K::kNe:
        return CompareChunk<int64_t, element::mx_ne<int64_t>>(x, y, n, out);
      case K::kLt:
        return CompareChunk<int64_t, element::mx_lt<int64_t>>(x, y, n, out);
      case K::kLe:
        return CompareChunk<int64_t, element::mx_le<int64_t>>(x, y, n, out);
      case K::kGt:
        return CompareChunk<int64_t, element::mx_gt<int64_t>>(x, y, n, out);
      case K::kGe:
        return CompareChunk<int64_t, element::mx_ge<int64_t>>(x, y, n, out);
      default:
        return;  // The program's dtype rule admits no other.
    }
  }

  // Columns [c0, c0 + n) of outer index o, over all middle rows: chunks of
  // whole rows when rows are short (a chunk per 64-wide row cost more than
  // the arithmetic), each row added to the column sums in row order, as
  // the reduce kernel adds them.
  void ColumnBlock(absl::Span<void* const> data, int64_t o, int64_t c0,
                   Scratch& s) const {
    const int64_t n = std::min(kChunk, inner_ - c0);
    const int64_t rows =
        n == inner_ ? std::max<int64_t>(1, kChunk / inner_) : 1;
    double acc[kMaxReductions][kChunk];
    for (size_t r = 0; r < p_.reductions.size(); ++r) {
      std::fill(acc[r], acc[r] + n, Initial(p_.reductions[r].kind));
    }
    for (int64_t m0 = 0; m0 < middle_; m0 += rows) {
      const int64_t count = std::min(rows, middle_ - m0);
      Chunk(data, (o * middle_ + m0) * inner_ + c0, count * n, s);
      for (size_t r = 0; r < p_.reductions.size(); ++r) {
        const float* x = s.at[p_.reductions[r].local];
        for (int64_t row = 0; row < count; ++row) {
          AccumulateColumns(p_.reductions[r].kind, x + row * n, n, acc[r]);
        }
      }
    }
    for (size_t r = 0; r < p_.reductions.size(); ++r) {
      const sdk::LoopReduction& red = p_.reductions[r];
      float result[kChunk];
      for (int64_t j = 0; j < n; ++j) result[j] = Finish(red.kind, acc[r][j]);
      if (data[red.value] == nullptr) continue;  // Nobody reads it.
      StoreRow(result, n, data[red.value], red.dtype, o * inner_ + c0);
    }
  }

  // Whole-row reductions, a task per piece of kReducePiece elements: each
  // piece starts from the initial value and the pieces combine in order
  // afterwards, as the reduce kernel adds them, so the threads share a
  // single row too (a loss's mean over the whole batch ran on one thread).
  void WholeRows(absl::Span<void* const> data) const {
    constexpr int64_t kPiece = element::kReducePiece;
    const size_t nr = p_.reductions.size();
    const int64_t pieces = (middle_ + kPiece - 1) / kPiece;
    std::vector<double> partial(outer_ * pieces * nr);
    ParallelFor(outer_ * pieces, GrainFor(std::min(middle_, kPiece)),
                [&](int64_t begin, int64_t end) {
                  Scratch scratch(p_.locals);
                  for (int64_t task = begin; task < end; ++task) {
                    const int64_t o = task / pieces,
                                  p0 = (task % pieces) * kPiece;
                    Piece(data, o, p0, std::min(middle_, p0 + kPiece), scratch,
                          &partial[task * nr]);
                  }
                });
    for (int64_t o = 0; o < outer_; ++o) {
      for (size_t r = 0; r < nr; ++r) {
        const sdk::LoopReduction& red = p_.reductions[r];
        double total = Initial(red.kind);
        for (int64_t p = 0; p < pieces; ++p) {
          total = Combine(red.kind, total, partial[(o * pieces + p) * nr + r]);
        }
        const float result = Finish(red.kind, total);
        if (data[red.value] == nullptr) continue;  // Nobody reads it.
        StoreRow(&result, 1, data[red.value], red.dtype, o);
      }
    }
  }

  // Middle rows [p0, p1) of outer index o, each reduction's from its
  // initial value into piece[r].
  void Piece(absl::Span<void* const> data, int64_t o, int64_t p0, int64_t p1,
             Scratch& s, double* piece) const {
    for (size_t r = 0; r < p_.reductions.size(); ++r)
      piece[r] = Initial(p_.reductions[r].kind);
    for (int64_t m0 = p0; m0 < p1; m0 += kChunk) {
      const int64_t n = std::min(kChunk, p1 - m0);
      Chunk(data, o * middle_ + m0, n, s);
      for (size_t r = 0; r < p_.reductions.size(); ++r) {
        const MixrtReduceKind kind = p_.reductions[r].kind;
        const float* x = s.at[p_.reductions[r].local];
        if (sdk::ReductionSums(kind)) {
          piece[r] += element::mx_sum_in_double(x, n);
        } else {
          for (int64_t j = 0; j < n; ++j)
            piece[r] = Combine(kind, piece[r], x[j]);
        }
      }
    }
  }

  static double Initial(MixrtReduceKind k) {
    return k == MIXRT_REDUCE_MAX   ? element::mx_max_initial()
           : k == MIXRT_REDUCE_MIN ? element::mx_min_initial()
                                   : element::mx_sum_initial();
  }
  static double Combine(MixrtReduceKind k, double acc, double v) {
    return k == MIXRT_REDUCE_MAX   ? element::mx_max_combine(acc, v)
           : k == MIXRT_REDUCE_MIN ? element::mx_min_combine(acc, v)
                                   : element::mx_sum_combine(acc, v);
  }
  // acc[j] takes x[j].
  static void AccumulateColumns(MixrtReduceKind k, const float* x, int64_t n,
                                double* acc) {
    if (sdk::ReductionSums(k)) {
      for (int64_t j = 0; j < n; ++j)
        acc[j] = element::mx_sum_combine(acc[j], x[j]);
      return;
    }
    for (int64_t j = 0; j < n; ++j) acc[j] = Combine(k, acc[j], x[j]);
  }
  float Finish(MixrtReduceKind k, double v) const {
    return static_cast<float>(
        k == MIXRT_REDUCE_MEAN ? v / static_cast<double>(middle_) : v);
  }

  const sdk::LoopProgram p_;
  const int64_t outer_, middle_, inner_;
};

}  // namespace

std::unique_ptr<sdk::FusedKernel> MakeFusedLoop(sdk::LoopProgram program) {
  return std::make_unique<FusedLoop>(std::move(program));
}

absl::StatusOr<std::unique_ptr<sdk::FusedKernel>> CompileFusedLoop(
    const FusionGraph& g, absl::Span<const int> group_of_node, int group) {
  MIXRT_ASSIGN_OR_RETURN(sdk::LoopProgram program,
                         sdk::BuildLoopProgram(g, group_of_node, group));
  return MakeFusedLoop(std::move(program));
}

}  // namespace mixrt::cpu
