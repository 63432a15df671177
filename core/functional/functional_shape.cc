// Differentiable views and joins: permute, contiguous, narrow, split,
// chunk, unsqueeze, cat, stack; and the masking ops a causal transformer
// needs: masked_fill, triu, tril. Views share storage with their input;
// every backward returns dense gradients.
#include <numeric>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/amp/autocast/autocast.h"
#include "core/autograd/function_node.h"
#include "core/functional/ops.h"
#include "core/kernels/fill_copy.h"
#include "core/kernels/pointwise.h"
#include "core/tensor/factories.h"
#include "mixrt/status_macros.h"

namespace mixrt {
namespace {

using Grads = absl::StatusOr<std::vector<Tensor>>;

absl::StatusOr<int64_t> WrapDim(int64_t dim, int64_t ndim,
                                absl::string_view op) {
  if (dim < -ndim || dim >= ndim) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": dimension ", dim, " is out of range for a ", ndim,
                     "-dim tensor (expected ", -ndim, " to ", ndim - 1, ")"));
  }
  return dim < 0 ? dim + ndim : dim;
}

// Zeros shaped like `shape` with `g` copied into the part `view_of` selects
// (a view of those zeros taken the way the forward view was taken).
absl::StatusOr<Tensor> ScatterIntoZeros(
    const Tensor& g, const Shape& shape, DType dtype,
    const std::function<absl::StatusOr<Tensor>(const Tensor&)>& view_of) {
  MIXRT_ASSIGN_OR_RETURN(Tensor dx, zeros(shape, dtype, g.device()));
  MIXRT_ASSIGN_OR_RETURN(Tensor part, view_of(dx));
  MIXRT_RETURN_IF_ERROR(kernels::copy_(part, g));
  return dx;
}

// PyTorch's result type for joining tensors of these dtypes: one dtype
// stays; floats of two kinds widen to f32; integers join a float as it.
absl::StatusOr<DType> JoinedDType(const std::vector<Tensor>& ts,
                                  absl::string_view op) {
  DType floating = DType::kF32;
  int floating_kinds = 0;
  bool any_i64 = false, any_int = false;
  for (const Tensor& t : ts) {
    if (IsFloating(t.dtype())) {
      if (floating_kinds == 0 || t.dtype() != floating) ++floating_kinds;
      floating = t.dtype();
    } else {
      any_int |= t.dtype() != DType::kBool;
      any_i64 |= t.dtype() == DType::kI64;
    }
  }
  if (floating_kinds > 1) return DType::kF32;
  if (floating_kinds == 1) return floating;
  if (any_i64) return DType::kI64;
  if (any_int) return DType::kI32;
  if (ts.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": expected a non-empty list of tensors"));
  }
  return DType::kBool;
}

}  // namespace

absl::StatusOr<Tensor> permute(const Tensor& x,
                               absl::Span<const int64_t> dims) {
  MIXRT_RETURN_IF_ERROR(CheckDefined(x, "permute"));
  MIXRT_ASSIGN_OR_RETURN(Tensor y, x.permute(dims));
  std::vector<int64_t> inverse(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = dims[i] < 0 ? dims[i] + x.ndim() : dims[i];
    inverse[d] = static_cast<int64_t>(i);
  }
  Record("PermuteBackward", {x}, {&y}, {},
         [inverse](const std::vector<Tensor>& g,
                   const std::vector<Tensor>&) -> Grads {
           MIXRT_ASSIGN_OR_RETURN(Tensor dx, g[0].permute(inverse));
           return std::vector<Tensor>{dx};
         });
  return y;
}

absl::StatusOr<Tensor> contiguous(const Tensor& x) {
  MIXRT_RETURN_IF_ERROR(CheckDefined(x, "contiguous"));
  if (x.is_contiguous()) return x;
  MIXRT_ASSIGN_OR_RETURN(Tensor y, x.contiguous());
  Record("ContiguousBackward", {x}, {&y}, {},
         [](const std::vector<Tensor>& g, const std::vector<Tensor>&) -> Grads {
           return std::vector<Tensor>{g[0]};
         });
  return y;
}

absl::StatusOr<Tensor> narrow(const Tensor& x, int64_t dim, int64_t start,
                              int64_t length) {
  MIXRT_RETURN_IF_ERROR(CheckDefined(x, "narrow"));
  MIXRT_ASSIGN_OR_RETURN(dim, WrapDim(dim, x.ndim(), "narrow"));
  const int64_t size = x.shape()[dim];
  if (start < 0) start += size;
  if (start < 0 || length < 0 || start > size || length > size - start) {
    return absl::InvalidArgumentError(
        absl::StrCat("narrow: start ", start, " and length ", length,
                     " do not fit dimension ", dim, " of size ", size));
  }
  MIXRT_ASSIGN_OR_RETURN(Tensor y, x.slice(dim, start, start + length));
  const Shape shape = x.shape();
  const DType dtype = x.dtype();
  Record(
      "NarrowBackward", {x}, {&y}, {},
      [=](const std::vector<Tensor>& g, const std::vector<Tensor>&) -> Grads {
        MIXRT_ASSIGN_OR_RETURN(
            Tensor dx,
            ScatterIntoZeros(g[0], shape, dtype, [&](const Tensor& z) {
              return z.slice(dim, start, start + length);
            }));
        return std::vector<Tensor>{dx};
      });
  return y;
}

absl::StatusOr<std::vector<Tensor>> split(const Tensor& x, int64_t split_size,
                                          int64_t dim) {
  MIXRT_RETURN_IF_ERROR(CheckDefined(x, "split"));
  MIXRT_ASSIGN_OR_RETURN(dim, WrapDim(dim, x.ndim(), "split"));
  if (split_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "split: split_size is ", split_size, "; expected at least 1"));
  }
  // One backward node for all the parts: it writes each part's gradient
  // into one tensor (zeros where a part got none). A node per part, as
  // narrow records, would build a zero tensor of x's size per part and add
  // them up: ~9 passes over x instead of 1 for attention's q, k, v.
  std::vector<Tensor> parts;
  std::vector<Tensor*> outputs;
  std::vector<int64_t> starts;
  const int64_t size = x.shape()[dim];
  for (int64_t start = 0; start < size || (size == 0 && parts.empty());
       start += split_size) {
    MIXRT_ASSIGN_OR_RETURN(
        Tensor part,
        x.slice(dim, start, start + std::min(split_size, size - start)));
    parts.push_back(std::move(part));
    starts.push_back(start);
  }
  for (Tensor& part : parts) outputs.push_back(&part);
  const Shape shape = x.shape();
  const DType dtype = x.dtype();
  const Device device = x.device();
  std::vector<int64_t> lengths;
  for (const Tensor& part : parts) lengths.push_back(part.shape()[dim]);
  Record(
      "SplitBackward", {x}, outputs, {},
      [=](const std::vector<Tensor>& g, const std::vector<Tensor>&) -> Grads {
        MIXRT_ASSIGN_OR_RETURN(Tensor dx, empty(shape, dtype, device));
        for (size_t i = 0; i < starts.size(); ++i) {
          MIXRT_ASSIGN_OR_RETURN(
              Tensor slot, dx.slice(dim, starts[i], starts[i] + lengths[i]));
          if (i < g.size() && g[i].defined()) {
            MIXRT_RETURN_IF_ERROR(kernels::copy_(slot, g[i]));
          } else {
            MIXRT_RETURN_IF_ERROR(kernels::fill_(slot, 0));
          }
        }
        return std::vector<Tensor>{dx};
      });
  return parts;
}

absl::StatusOr<std::vector<Tensor>> chunk(const Tensor& x, int64_t chunks,
                                          int64_t dim) {
  MIXRT_RETURN_IF_ERROR(CheckDefined(x, "chunk"));
  if (chunks < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk: chunks is ", chunks, "; expected at least 1"));
  }
  MIXRT_ASSIGN_OR_RETURN(dim, WrapDim(dim, x.ndim(), "chunk"));
  // As torch.chunk: equal parts of ceil(size / chunks); maybe fewer parts.
  const int64_t size = x.shape()[dim];
  return split(x, std::max<int64_t>(1, (size + chunks - 1) / chunks), dim);
}

absl::StatusOr<Tensor> unsqueeze(const Tensor& x, int64_t dim) {
  MIXRT_RETURN_IF_ERROR(CheckDefined(x, "unsqueeze"));
  MIXRT_ASSIGN_OR_RETURN(dim, WrapDim(dim, x.ndim() + 1, "unsqueeze"));
  std::vector<int64_t> shape(x.shape().begin(), x.shape().end());
  shape.insert(shape.begin() + dim, 1);
  return reshape(x, shape);
}

absl::StatusOr<Tensor> cat(const std::vector<Tensor>& tensors_in, int64_t dim) {
  if (tensors_in.empty()) {
    return absl::InvalidArgumentError(
        "cat: expected a non-empty list of tensors");
  }
  for (const Tensor& t : tensors_in)
    MIXRT_RETURN_IF_ERROR(CheckDefined(t, "cat"));
  // Autocast's promote list: the widest input dtype (AutocastPromoteType).
  MIXRT_ASSIGN_OR_RETURN(
      std::vector<Tensor> tensors,
      AutocastInputs("cat", MIXRT_OP_CLASS_CAST, tensors_in));
  const Tensor& first = tensors[0];
  MIXRT_ASSIGN_OR_RETURN(dim, WrapDim(dim, first.ndim(), "cat"));
  MIXRT_ASSIGN_OR_RETURN(const DType dtype, JoinedDType(tensors, "cat"));
  std::vector<int64_t> shape(first.shape().begin(), first.shape().end());
  shape[dim] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    bool same = t.ndim() == first.ndim() && t.device() == first.device();
    for (int d = 0; same && d < t.ndim(); ++d) {
      same = d == dim || t.shape()[d] == first.shape()[d];
    }
    if (!same) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cat: tensor ", i, " is ", ShapeToString(t.shape()), " on ",
          t.device().ToString(), " but tensor 0 is ",
          ShapeToString(first.shape()), " on ", first.device().ToString(),
          "; all must match except in dimension ", dim));
    }
    shape[dim] += t.shape()[dim];
  }
  MIXRT_ASSIGN_OR_RETURN(Tensor y, empty(shape, dtype, first.device()));
  std::vector<int64_t> starts;
  std::vector<Shape> shapes;
  std::vector<DType> dtypes;
  int64_t at = 0;
  for (const Tensor& t : tensors) {
    MIXRT_ASSIGN_OR_RETURN(Tensor part, y.slice(dim, at, at + t.shape()[dim]));
    MIXRT_RETURN_IF_ERROR(kernels::copy_(part, t));
    starts.push_back(at);
    shapes.push_back(t.shape());
    dtypes.push_back(t.dtype());
    at += t.shape()[dim];
  }
  Record(
      "CatBackward", tensors, {&y}, {},
      [=](const std::vector<Tensor>& g, const std::vector<Tensor>&) -> Grads {
        std::vector<Tensor> grads;
        for (size_t i = 0; i < shapes.size(); ++i) {
          MIXRT_ASSIGN_OR_RETURN(
              Tensor part,
              g[0].slice(dim, starts[i], starts[i] + shapes[i][dim]));
          MIXRT_ASSIGN_OR_RETURN(Tensor dense, part.contiguous());
          MIXRT_ASSIGN_OR_RETURN(dense, dense.to(dtypes[i]));
          grads.push_back(std::move(dense));
        }
        return grads;
      });
  return y;
}

absl::StatusOr<Tensor> stack(const std::vector<Tensor>& tensors, int64_t dim) {
  if (tensors.empty()) {
    return absl::InvalidArgumentError(
        "stack: expected a non-empty list of tensors");
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    MIXRT_RETURN_IF_ERROR(CheckDefined(tensors[i], "stack"));
    if (tensors[i].shape() != tensors[0].shape()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "stack: tensor ", i, " is ", ShapeToString(tensors[i].shape()),
          " but tensor 0 is ", ShapeToString(tensors[0].shape()),
          "; stack expects each tensor to be equal size"));
    }
  }
  MIXRT_ASSIGN_OR_RETURN(dim, WrapDim(dim, tensors[0].ndim() + 1, "stack"));
  // Autocast's promote rule applies once, in cat, to the unsqueezed views.
  std::vector<Tensor> expanded;
  for (const Tensor& t : tensors) {
    MIXRT_ASSIGN_OR_RETURN(Tensor u, unsqueeze(t, dim));
    expanded.push_back(std::move(u));
  }
  return cat(expanded, dim);
}

absl::StatusOr<Tensor> masked_fill(const Tensor& x, const Tensor& mask,
                                   double value) {
  MIXRT_RETURN_IF_ERROR(CheckDefined(x, "masked_fill"));
  MIXRT_RETURN_IF_ERROR(CheckDefined(mask, "masked_fill"));
  if (mask.dtype() != DType::kBool) {
    return absl::InvalidArgumentError(absl::StrCat("masked_fill: the mask is ",
                                                   DTypeName(mask.dtype()),
                                                   "; expected bool"));
  }
  MIXRT_ASSIGN_OR_RETURN(Tensor fill, full({1}, value, x.dtype(), x.device()));
  MIXRT_ASSIGN_OR_RETURN(Tensor y, kernels::where(mask, fill, x));
  if (y.shape() != x.shape()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "masked_fill: the mask ", ShapeToString(mask.shape()),
        " broadcasts the input ", ShapeToString(x.shape()), " to ",
        ShapeToString(y.shape()), "; it must broadcast to the input's shape"));
  }
  Record("MaskedFillBackward", {x}, {&y}, {mask},
         [](const std::vector<Tensor>& g,
            const std::vector<Tensor>& saved) -> Grads {
           MIXRT_ASSIGN_OR_RETURN(Tensor zero,
                                  zeros({1}, g[0].dtype(), g[0].device()));
           MIXRT_ASSIGN_OR_RETURN(Tensor dx,
                                  kernels::where(saved[0], zero, g[0]));
           return std::vector<Tensor>{dx};
         });
  return y;
}

namespace {

// Keeps the elements of the last two dims with col - row >= diagonal
// (upper) or <= diagonal (lower); zeros the rest.
absl::StatusOr<Tensor> Triangle(const Tensor& x, int64_t diagonal, bool upper,
                                const char* op) {
  MIXRT_RETURN_IF_ERROR(CheckDefined(x, op));
  if (x.ndim() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": the input is ", ShapeToString(x.shape()),
                     "; expected at least 2 dimensions"));
  }
  const int64_t rows = x.shape()[x.ndim() - 2], cols = x.shape()[x.ndim() - 1];
  MIXRT_ASSIGN_OR_RETURN(Tensor r, arange(0, rows, 1, DType::kI64, x.device()));
  MIXRT_ASSIGN_OR_RETURN(r, r.reshape({rows, 1}));
  MIXRT_ASSIGN_OR_RETURN(Tensor c, arange(0, cols, 1, DType::kI64, x.device()));
  MIXRT_ASSIGN_OR_RETURN(Tensor offset, kernels::sub(c, r));  // [rows, cols]
  MIXRT_ASSIGN_OR_RETURN(Tensor d, full({1}, static_cast<double>(diagonal),
                                        DType::kI64, x.device()));
  MIXRT_ASSIGN_OR_RETURN(
      Tensor keep, upper ? kernels::ge(offset, d) : kernels::le(offset, d));
  MIXRT_ASSIGN_OR_RETURN(Tensor zero, zeros({1}, x.dtype(), x.device()));
  MIXRT_ASSIGN_OR_RETURN(Tensor y, kernels::where(keep, x, zero));
  Record(std::string(op) + "Backward", {x}, {&y}, {keep},
         [](const std::vector<Tensor>& g,
            const std::vector<Tensor>& saved) -> Grads {
           MIXRT_ASSIGN_OR_RETURN(Tensor zero,
                                  zeros({1}, g[0].dtype(), g[0].device()));
           MIXRT_ASSIGN_OR_RETURN(Tensor dx,
                                  kernels::where(saved[0], g[0], zero));
           return std::vector<Tensor>{dx};
         });
  return y;
}

}  // namespace

absl::StatusOr<Tensor> triu(const Tensor& x, int64_t diagonal) {
  return Triangle(x, diagonal, /*upper=*/true, "triu");
}

absl::StatusOr<Tensor> tril(const Tensor& x, int64_t diagonal) {
  return Triangle(x, diagonal, /*upper=*/false, "tril");
}

}  // namespace mixrt
