#include "plugins/sdk/loop_program.h"

#include <utility>

#include "mixrt/op_names.h"
#include "mixrt/status_macros.h"
#include "plugins/sdk/plugin.h"
#include "plugins/sdk/strings.h"

namespace mixrt::sdk {
namespace {

bool IsInt(MixrtDtype d) {
  return d == MIXRT_DTYPE_I32 || d == MIXRT_DTYPE_I64;
}

Status NoStep(const FusionNode& n, uint32_t kind) {
  return UnimplementedError(
      StrCat("a loop has no step for ", MixrtOpName(n.op), " of kind ", kind));
}

// Whether the reduction from `in` to `out` over `axes_mask` reduces one
// run of adjacent dims, each kept as 1 (keepdim).
bool ReducesOneKeptRun(const FusionValue& in, const FusionValue& out,
                       uint32_t axes_mask) {
  if (in.shape.empty() || in.shape.size() != out.shape.size() ||
      (axes_mask >> in.shape.size()) != 0) {
    return false;
  }
  int first = -1, last = -1;
  for (int d = 0; d < static_cast<int>(in.shape.size()); ++d) {
    if ((axes_mask >> d) & 1u) {
      if (last >= 0 && last != d - 1) return false;
      if (first < 0) first = d;
      last = d;
      if (out.shape[d] != 1) return false;
    } else if (out.shape[d] != in.shape[d]) {
      return false;
    }
  }
  return first >= 0;
}

// Whether the dtypes of pointwise node `n` are ones its step takes.
bool StepTakesDtypes(const FusionGraph& g, const FusionNode& n) {
  const MixrtDtype out = g.values[n.outputs[0]].dtype;
  const MixrtDtype first = g.values[n.inputs[0]].dtype;
  auto all_inputs = [&](MixrtDtype d) {
    for (int v : n.inputs) {
      if (g.values[v].dtype != d) return false;
    }
    return true;
  };
  switch (n.op) {
    case MIXRT_OP_COMPARE:
      return out == MIXRT_DTYPE_BOOL && all_inputs(first) &&
             first != MIXRT_DTYPE_BOOL;
    case MIXRT_OP_WHERE:
      return first == MIXRT_DTYPE_BOOL && IsFloatingDtype(out) &&
             g.values[n.inputs[1]].dtype == out &&
             g.values[n.inputs[2]].dtype == out;
    case MIXRT_OP_COPY:
      // Integers become floats exactly as the copy kernel converts them;
      // floats to integers (truncation rules) stay op by op.
      return IsFloatingDtype(out) || out == MIXRT_DTYPE_BOOL ||
             (IsInt(out) && IsInt(first));
    default:
      return IsFloatingDtype(out) && all_inputs(out);
  }
}

// Every kind listed (no default), so a new one that is missed here is a
// -Wswitch warning rather than a wrong arity.
size_t ArityOf(LoopStepKind kind) {
  using K = LoopStepKind;
  switch (kind) {
    case K::kNeg:
    case K::kAbs:
    case K::kRelu:
    case K::kLeakyRelu:
    case K::kGelu:
    case K::kClamp:
    case K::kCopy:
      return 1;
    case K::kAdd:
    case K::kSub:
    case K::kMul:
    case K::kDiv:
    case K::kPow:
    case K::kMaximum:
    case K::kMinimum:
    case K::kNegBackward:
    case K::kAbsBackward:
    case K::kReluBackward:
    case K::kLeakyReluBackward:
    case K::kGeluBackward:
    case K::kClampBackward:
    case K::kEq:
    case K::kNe:
    case K::kLt:
    case K::kLe:
    case K::kGt:
    case K::kGe:
      return 2;
    case K::kWhere:
      return 3;
  }
  return 0;
}

}  // namespace

StatusOr<LoopStepKind> StepKindOf(const FusionNode& n) {
  using K = LoopStepKind;
  if (n.op == MIXRT_OP_WHERE) return K::kWhere;
  if (n.op == MIXRT_OP_COPY) return K::kCopy;
  if (n.op != MIXRT_OP_BINARY && n.op != MIXRT_OP_UNARY &&
      n.op != MIXRT_OP_UNARY_BACKWARD && n.op != MIXRT_OP_COMPARE) {
    return UnimplementedError(
        StrCat("a loop has no step for ", MixrtOpName(n.op)));
  }
  MIXRT_ASSIGN_OR_RETURN(MixrtPointwiseAttrs a,
                         n.GetAttrs<MixrtPointwiseAttrs>());
  switch (n.op) {
    case MIXRT_OP_BINARY: {
      static constexpr K kBinary[] = {K::kAdd, K::kSub,     K::kMul,    K::kDiv,
                                      K::kPow, K::kMaximum, K::kMinimum};
      static_assert(sizeof(kBinary) / sizeof(kBinary[0]) == MIXRT_BINARY_COUNT);
      if (a.kind < MIXRT_BINARY_COUNT) return kBinary[a.kind];
      break;
    }
    case MIXRT_OP_COMPARE: {
      static constexpr K kCompare[] = {K::kEq, K::kNe, K::kLt,
                                       K::kLe, K::kGt, K::kGe};
      static_assert(sizeof(kCompare) / sizeof(kCompare[0]) ==
                    MIXRT_COMPARE_COUNT);
      if (a.kind < MIXRT_COMPARE_COUNT) return kCompare[a.kind];
      break;
    }
    default: {
      // Unary kinds whose op-by-op kernels compute exactly these element
      // functions at every size (those that switch to oneDNN's eltwise
      // above a size, whose polynomials differ, stay op by op).
      const bool backward = n.op == MIXRT_OP_UNARY_BACKWARD;
      switch (a.kind) {
        case MIXRT_UNARY_NEG:
          return backward ? K::kNegBackward : K::kNeg;
        case MIXRT_UNARY_ABS:
          return backward ? K::kAbsBackward : K::kAbs;
        case MIXRT_UNARY_RELU:
          return backward ? K::kReluBackward : K::kRelu;
        case MIXRT_UNARY_LEAKY_RELU:
          return backward ? K::kLeakyReluBackward : K::kLeakyRelu;
        case MIXRT_UNARY_GELU:
          return backward ? K::kGeluBackward : K::kGelu;
        case MIXRT_UNARY_CLAMP:
          return backward ? K::kClampBackward : K::kClamp;
        default:
          break;
      }
    }
  }
  return NoStep(n, a.kind);
}

std::vector<int64_t> LoopIterationShape(const FusionGraph& g,
                                        const FusionNode& n) {
  const std::vector<int64_t> none;
  for (int v : n.inputs) {
    if (!g.values[v].is_static()) return none;
  }
  for (int v : n.outputs) {
    if (!g.values[v].is_static() || !g.values[v].is_contiguous()) return none;
  }
  if (n.attrs_extended || n.outputs.size() != 1 || n.inputs.empty())
    return none;
  const FusionValue& out = g.values[n.outputs[0]];
  if (n.op == MIXRT_OP_REDUCE) {
    auto a = n.GetAttrs<MixrtReduceAttrs>();
    if (!a.ok() || n.inputs.size() != 1) return none;
    const FusionValue& in = g.values[n.inputs[0]];
    if ((a->kind != MIXRT_REDUCE_SUM && a->kind != MIXRT_REDUCE_MEAN &&
         a->kind != MIXRT_REDUCE_MAX && a->kind != MIXRT_REDUCE_MIN) ||
        !IsFloatingDtype(in.dtype) || !IsFloatingDtype(out.dtype) ||
        !ReducesOneKeptRun(in, out, a->axes_mask)) {
      return none;
    }
    return in.shape;
  }
  StatusOr<LoopStepKind> kind = StepKindOf(n);
  if (!kind.ok() || n.inputs.size() != ArityOf(*kind)) return none;
  for (int v : n.inputs) {
    if (g.values[v].shape != out.shape) return none;
  }
  if (!StepTakesDtypes(g, n)) return none;
  return out.shape;
}

namespace {

// Builds a program node by node: locals for values on first use.
class ProgramBuilder {
 public:
  explicit ProgramBuilder(const FusionGraph& g)
      : g_(g), local_of_(g.values.size(), -1) {}

  Status Add(int i) {
    const FusionNode& n = g_.nodes[i];
    const std::vector<int64_t> shape = LoopIterationShape(g_, n);
    if (shape.empty()) {
      return UnimplementedError(
          StrCat("loop program: node ", i, " (", MixrtOpName(n.op),
                 ") is no op a loop runs (symbolic, strided result, or kind)"));
    }
    if (p_.shape.empty()) p_.shape = shape;
    if (shape != p_.shape) {
      return UnimplementedError(
          "loop program: nodes of different iteration shapes");
    }
    p_.op_names.push_back(MixrtOpName(n.op));
    std::vector<int> in;
    for (int v : n.inputs) in.push_back(LocalFor(v));
    if (n.op == MIXRT_OP_REDUCE) return AddReduction(n, in[0]);
    MIXRT_ASSIGN_OR_RETURN(LoopStepKind kind, StepKindOf(n));
    LoopStep st;
    st.kind = kind;
    if (n.op != MIXRT_OP_WHERE && n.op != MIXRT_OP_COPY) {
      MIXRT_ASSIGN_OR_RETURN(MixrtPointwiseAttrs a,
                             n.GetAttrs<MixrtPointwiseAttrs>());
      st.alpha = static_cast<float>(a.alpha);
      st.beta = static_cast<float>(a.beta);
    }
    const FusionValue& out = g_.values[n.outputs[0]];
    st.out_dtype = out.dtype;
    st.in = std::move(in);
    st.int_inputs = p_.local_is_int[st.in[0]];
    st.int_out = IsInt(out.dtype);
    st.out = NewLocal(st.int_out);
    local_of_[n.outputs[0]] = st.out;
    p_.steps.push_back(std::move(st));
    return OkStatus();
  }

  StatusOr<LoopProgram> Finish(Span<const int> stores) {
    for (int64_t d : p_.shape) p_.numel *= d;
    for (int v : stores) {
      if (g_.nodes[g_.producer[v]].op == MIXRT_OP_REDUCE)
        continue;  // Stored at its end.
      if (p_.local_is_int[local_of_[v]]) {
        return UnimplementedError(
            "loop program: integer results stay op by op");
      }
      p_.stores.push_back({v, local_of_[v], g_.values[v].dtype});
    }
    return std::move(p_);
  }

 private:
  int NewLocal(bool integer) {
    p_.local_is_int.push_back(integer);
    return p_.locals++;
  }

  int LocalFor(int v) {
    if (local_of_[v] >= 0) return local_of_[v];
    const FusionValue& val = g_.values[v];
    const bool integer =
        !IsFloatingDtype(val.dtype) && val.dtype != MIXRT_DTYPE_BOOL;
    local_of_[v] = NewLocal(integer);
    p_.loads.push_back({v, local_of_[v], val.dtype, val.strides,
                        val.is_contiguous(), integer});
    return local_of_[v];
  }

  Status AddReduction(const FusionNode& n, int input) {
    MIXRT_ASSIGN_OR_RETURN(MixrtReduceAttrs a, n.GetAttrs<MixrtReduceAttrs>());
    if (!p_.reductions.empty() && a.axes_mask != axes_mask_) {
      return UnimplementedError("loop program: reductions over different dims");
    }
    axes_mask_ = a.axes_mask;
    if (!SplitAtReducedDims(p_.shape, a.axes_mask, &p_.split)) {
      return UnimplementedError(
          "loop program: reduced dims that are not one run");
    }
    const FusionValue& out = g_.values[n.outputs[0]];
    p_.reductions.push_back(
        {input, n.outputs[0], static_cast<MixrtReduceKind>(a.kind), out.dtype});
    return OkStatus();
  }

  const FusionGraph& g_;
  std::vector<int> local_of_;
  uint32_t axes_mask_ = 0;
  LoopProgram p_;
};

}  // namespace

StatusOr<LoopProgram> BuildLoopProgram(const FusionGraph& g,
                                       Span<const int> group_of_node,
                                       int group) {
  const std::vector<int> nodes = FusionGraph::GroupNodes(group_of_node, group);
  if (nodes.empty()) return InvalidArgumentError("loop program: empty group");
  ProgramBuilder builder(g);
  for (int i : nodes) MIXRT_RETURN_IF_ERROR(builder.Add(i));
  return builder.Finish(g.GroupStores(group_of_node, group));
}

}  // namespace mixrt::sdk
