// mixrt.Tensor: the core's Tensor with PyTorch's Python surface (shape,
// dtype, requires_grad, grad, backward, item, tolist, numpy, operators,
// indexing as views), the dtypes, and the factories.
#include <cstring>
#include <string>
#include <vector>

#include "core/autograd/differentiable_cast.h"
#include "core/autograd/grad_mode.h"
#include "core/functional/ops.h"
#include "core/kernels/fill_copy.h"
#include "core/kernels/memory_overlap.h"
#include "core/kernels/pointwise.h"
#include "core/tensor/factories.h"
#include "core/tensor/tensor.h"
#include "nanobind/nanobind.h"
#include "nanobind/ndarray.h"
#include "nanobind/stl/optional.h"
#include "nanobind/stl/string.h"
#include "nanobind/stl/vector.h"
#include "python/src/bindings.h"
#include "python/src/current_device.h"
#include "python/src/scoped_guard.h"
#include "python/src/status_to_python.h"

namespace nb = nanobind;

namespace mixrt::python {
namespace {

using Release = nb::call_guard<nb::gil_scoped_release>;

nb::tuple ShapeTuple(const Tensor& t) {
  nb::list dims;
  for (int64_t d : t.shape()) dims.append(d);
  return nb::tuple(dims);
}

// Python scalars meet tensors as PyTorch's do: an int keeps an integer
// tensor's dtype, a float turns one into float32; a float tensor keeps
// its dtype either way.
Tensor Scalar(const Tensor& like, double value, bool integral) {
  const DType dtype =
      IsFloating(like.dtype()) || integral ? like.dtype() : DType::kF32;
  return ValueOrThrow(full({}, value, dtype, like.device()));
}

// Integer and bool tensors keep their dtype in +, -, *; division gives
// float32 (true division).
Tensor Divide(const Tensor& a, const Tensor& b) {
  if (!IsFloating(a.dtype()) && !IsFloating(b.dtype())) {
    return ValueOrThrow(
        div(ValueOrThrow(a.to(DType::kF32)), ValueOrThrow(b.to(DType::kF32))));
  }
  return ValueOrThrow(div(a, b));
}

std::vector<int64_t> DimsOf(const nb::args& args) {
  // reshape(2, 3) and reshape((2, 3)) both.
  if (args.size() == 1 && (nb::isinstance<nb::tuple>(args[0]) ||
                           nb::isinstance<nb::list>(args[0]))) {
    return nb::cast<std::vector<int64_t>>(args[0]);
  }
  return nb::cast<std::vector<int64_t>>(args);
}

// sum(dim=None | int | sequence of ints): the dims to reduce (none: all).
std::vector<int64_t> ReducedDims(nb::handle dim) {
  if (dim.is_none()) return {};
  if (nb::isinstance<nb::int_>(dim)) return {nb::cast<int64_t>(dim)};
  return nb::cast<std::vector<int64_t>>(dim);
}

int64_t NormalizeDim(int64_t dim, int64_t rank, const char* what) {
  if (dim < -rank || dim >= rank) {
    throw nb::index_error(
        (std::string(what) +
         ": dimension out of range (expected to be in range of [" +
         std::to_string(-rank) + ", " + std::to_string(rank - 1) +
         "], but got " + std::to_string(dim) + ")")
            .c_str());
  }
  return dim < 0 ? dim + rank : dim;
}

// x[i]: the view without dimension `dim`, at index i.
Tensor Select(const Tensor& x, int64_t dim, int64_t index) {
  const int64_t size = x.shape()[dim];
  if (index < -size || index >= size) {
    throw nb::index_error(
        ("index " + std::to_string(index) + " is out of bounds for dimension " +
         std::to_string(dim) + " with size " + std::to_string(size))
            .c_str());
  }
  if (index < 0) index += size;
  Tensor narrowed = ValueOrThrow(narrow(x, dim, index, 1));
  std::vector<int64_t> shape(x.shape().begin(), x.shape().end());
  shape.erase(shape.begin() + dim);
  return ValueOrThrow(reshape(narrowed, shape));
}

// x[a:b:c] along `dim`, a view (step 1 keeps autograd; a larger step is a
// view autograd cannot follow, refused on a tensor that requires grad).
Tensor SliceDim(const Tensor& x, int64_t dim, const nb::slice& s) {
  const auto [start, stop, step, length] = s.compute(x.shape()[dim]);
  if (step <= 0) throw nb::value_error("slice step must be positive");
  if (step == 1) return ValueOrThrow(narrow(x, dim, start, length));
  if (x.requires_grad()) {
    throw nb::value_error(
        "slicing with a step > 1 a tensor that requires grad is not "
        "supported yet (autograd follows step-1 slices); .detach() first");
  }
  return ValueOrThrow(x.slice(dim, start, start + length * step, step));
}

Tensor Index(const Tensor& x, const nb::handle& index) {
  std::vector<nb::handle> items;
  if (nb::isinstance<nb::tuple>(index)) {
    for (nb::handle h : nb::borrow<nb::tuple>(index)) items.push_back(h);
  } else {
    items.push_back(index);
  }
  // An Ellipsis stands for the dimensions the other items do not name.
  int64_t named = 0;
  for (nb::handle h : items) {
    if (!h.is_none() && !h.is(nb::ellipsis())) ++named;
  }
  if (named > x.ndim()) {
    throw nb::index_error(
        ("too many indices for tensor of dimension " + std::to_string(x.ndim()))
            .c_str());
  }
  Tensor out = x;
  int64_t dim = 0;
  for (nb::handle h : items) {
    if (h.is(nb::ellipsis())) {
      dim += x.ndim() - named;
    } else if (h.is_none()) {
      out = ValueOrThrow(unsqueeze(out, dim));
      ++dim;
    } else if (nb::isinstance<nb::slice>(h)) {
      out = SliceDim(out, dim, nb::borrow<nb::slice>(h));
      ++dim;
    } else if (nb::isinstance<nb::int_>(h) && !nb::isinstance<nb::bool_>(h)) {
      out = Select(out, dim, nb::cast<int64_t>(h));
    } else {
      throw nb::type_error(
          "only integers, slices (`:`), ellipsis (`...`) and None are valid "
          "indices (tensor and boolean indices are not supported yet)");
    }
  }
  return out;
}

// Every in-place write from Python (copy_, t[i] = x, and so +=, which
// writes through copy_): refused where autograd would not see it, as
// PyTorch refuses a leaf that requires grad (a non-leaf one it could
// record; mixrt cannot yet, and a silent write would leave its gradients
// wrong).
void CheckWritableInPlace(const Tensor& t) {
  if (!GradModeEnabled() || !t.requires_grad()) return;
  throw std::runtime_error(
      t.is_leaf() ? "a leaf Variable that requires grad is being used in an "
                    "in-place operation."
                  : "in-place writes into a tensor that requires grad are "
                    "not supported yet (autograd would not see them); write "
                    "x = x + y");
}

// t[index] = value: the view's elements written in place (a number fills,
// a tensor is broadcast to the view's shape and converted to its dtype).
void SetItem(const Tensor& t, nb::handle index, nb::handle value) {
  CheckWritableInPlace(t);
  const Tensor view = Index(t, index);
  if (nb::isinstance<Tensor>(value)) {
    Tensor src = nb::cast<Tensor>(value);
    if (src.shape() != view.shape()) {
      src = ValueOrThrow(src.expand(view.shape()));
    }
    nb::gil_scoped_release release;
    ThrowIfError(kernels::copy_(view, src));
    return;
  }
  if (nb::isinstance<nb::bool_>(value) || nb::isinstance<nb::int_>(value) ||
      nb::isinstance<nb::float_>(value)) {
    const double v = nb::cast<double>(value);
    nb::gil_scoped_release release;
    ThrowIfError(kernels::fill_(view, v));
    return;
  }
  throw nb::type_error(
      "can only assign a Tensor or a number to a tensor's elements");
}

nb::object ToList(const Tensor& t) {
  const std::vector<double> values = ValueOrThrow(t.to_double_vector());
  const bool integral = !IsFloating(t.dtype());
  const bool boolean = t.dtype() == DType::kBool;
  auto scalar = [&](double v) -> nb::object {
    if (boolean) return nb::bool_(v != 0);
    if (integral) return nb::int_(static_cast<int64_t>(v));
    return nb::float_(v);
  };
  if (t.ndim() == 0) return scalar(values[0]);
  // Nested lists, innermost dimension last.
  std::function<nb::object(int, size_t&)> build = [&](int d, size_t& at) {
    nb::list out;
    for (int64_t i = 0; i < t.shape()[d]; ++i) {
      if (d + 1 == t.ndim()) {
        out.append(scalar(values[at++]));
      } else {
        out.append(build(d + 1, at));
      }
    }
    return nb::object(out);
  };
  size_t at = 0;
  return build(0, at);
}

}  // namespace

nb::class_<Tensor> BindTensor(nb::module_& m) {
  nb::enum_<DType>(m, "dtype")
      .value("float32", DType::kF32)
      .value("float16", DType::kF16)
      .value("bfloat16", DType::kBF16)
      .value("int32", DType::kI32)
      .value("int64", DType::kI64)
      .value("bool", DType::kBool)
      .def_prop_ro("is_floating_point", [](DType d) { return IsFloating(d); })
      .def_prop_ro("itemsize", [](DType d) { return DTypeSize(d); });

  // dynamic_attr: Python code may mark a tensor (nn.Parameter does).
  nb::class_<Tensor> tensor(m, "Tensor", nb::dynamic_attr());
  tensor.def_prop_ro("shape", &ShapeTuple)
      .def(
          "size",
          [](const Tensor& t, std::optional<int64_t> dim) -> nb::object {
            if (!dim.has_value()) return ShapeTuple(t);
            return nb::int_(t.shape()[NormalizeDim(*dim, t.ndim(), "size")]);
          },
          nb::arg("dim") = nb::none())
      .def(
          "stride",
          [](const Tensor& t, std::optional<int64_t> dim) -> nb::object {
            if (dim.has_value()) {
              return nb::int_(
                  t.strides()[NormalizeDim(*dim, t.ndim(), "stride")]);
            }
            nb::list s;
            for (int64_t v : t.strides()) s.append(v);
            return nb::tuple(s);
          },
          nb::arg("dim") = nb::none())
      .def_prop_ro("dtype", &Tensor::dtype)
      .def_prop_ro("ndim", &Tensor::ndim)
      .def("dim", &Tensor::ndim)
      .def("numel", &Tensor::numel)
      .def("__len__",
           [](const Tensor& t) {
             if (t.ndim() == 0) throw nb::type_error("len() of a 0-d tensor");
             return t.shape()[0];
           })
      .def_prop_ro("device",
                   [](const Tensor& t) { return t.device().ToString(); })
      .def_prop_ro("is_leaf", &Tensor::is_leaf)
      .def("is_contiguous", &Tensor::is_contiguous)
      .def("data_ptr",
           [](const Tensor& t) {
             return reinterpret_cast<uintptr_t>(t.const_data_ptr());
           })
      .def_prop_rw(
          "requires_grad", &Tensor::requires_grad,
          [](Tensor& t, bool on) { ThrowIfError(t.set_requires_grad(on)); })
      .def(
          "requires_grad_",
          [](Tensor& t, bool on) {
            ThrowIfError(t.set_requires_grad(on));
            return t;
          },
          nb::arg("requires_grad") = true)
      .def_prop_rw(
          "grad",
          [](const Tensor& t) -> std::optional<Tensor> {
            Tensor g = t.grad();
            if (!g.defined()) return std::nullopt;
            return g;
          },
          [](Tensor& t, std::optional<Tensor> g) {
            t.set_grad(g.has_value() ? *g : Tensor());
          },
          nb::arg("grad").none())
      .def(
          "backward",
          [](const Tensor& t, std::optional<Tensor> gradient,
             bool retain_graph) {
            if (!gradient.has_value() && t.numel() != 1) {
              // PyTorch's kind and words (the core says InvalidArgument).
              throw std::runtime_error(
                  "grad can be implicitly created only for scalar outputs");
            }
            if (!gradient.has_value() && !retain_graph) {
              ThrowIfError(t.backward());
              return;
            }
            const Tensor g =
                gradient.has_value()
                    ? *gradient
                    : ValueOrThrow(ones(t.shape(), t.dtype(), t.device()));
            ThrowIfError(t.backward(g, retain_graph));
          },
          nb::arg("gradient") = nb::none(), nb::arg("retain_graph") = false,
          Release())
      .def("detach", &Tensor::detach)
      .def(
          "clone", [](const Tensor& t) { return ValueOrThrow(t.clone()); },
          Release())
      .def(
          "contiguous",
          [](const Tensor& t) { return ValueOrThrow(contiguous(t)); },
          Release())
      .def(
          "to",
          [](const Tensor& t, DType dtype) {
            if (t.dtype() == dtype) return t;
            return ValueOrThrow(cast(t, dtype));
          },
          nb::arg("dtype"), Release())
      .def("float",
           [](const Tensor& t) { return ValueOrThrow(cast(t, DType::kF32)); })
      .def("item",
           [](const Tensor& t) -> nb::object {
             if (t.numel() != 1) {
               throw std::runtime_error(
                   "a Tensor with " + std::to_string(t.numel()) +
                   " elements cannot be converted to Scalar");
             }
             const double v = ValueOrThrow(t.item());
             if (t.dtype() == DType::kBool) return nb::bool_(v != 0);
             if (!IsFloating(t.dtype()))
               return nb::int_(static_cast<int64_t>(v));
             return nb::float_(v);
           })
      .def("tolist", &ToList)
      .def("__repr__",
           [](const Tensor& t) {
             if (!t.defined()) return std::string("tensor(undefined)");
             return t.ToString();
           })
      .def("view",
           [](const Tensor& t, nb::args dims) {
             return ValueOrThrow(reshape(t, DimsOf(dims)));
           })
      .def("reshape",
           [](const Tensor& t, nb::args dims) {
             return ValueOrThrow(reshape(t, DimsOf(dims)));
           })
      .def("transpose",
           [](const Tensor& t, int64_t a, int64_t b) {
             return ValueOrThrow(transpose(t, a, b));
           })
      .def("permute",
           [](const Tensor& t, nb::args dims) {
             return ValueOrThrow(permute(t, DimsOf(dims)));
           })
      .def_prop_ro("T",
                   [](const Tensor& t) {
                     std::vector<int64_t> dims;
                     for (int64_t d = t.ndim() - 1; d >= 0; --d)
                       dims.push_back(d);
                     return ValueOrThrow(permute(t, dims));
                   })
      .def("unsqueeze",
           [](const Tensor& t, int64_t dim) {
             return ValueOrThrow(unsqueeze(t, dim));
           })
      .def("flatten", [](const Tensor& t) { return ValueOrThrow(flatten(t)); })
      .def(
          "sum",
          [](const Tensor& t, nb::handle dim, bool keepdim) {
            const std::vector<int64_t> dims = ReducedDims(dim);
            nb::gil_scoped_release release;
            return ValueOrThrow(sum(t, dims, keepdim));
          },
          nb::arg("dim") = nb::none(), nb::arg("keepdim") = false)
      .def(
          "mean",
          [](const Tensor& t, nb::handle dim, bool keepdim) {
            const std::vector<int64_t> dims = ReducedDims(dim);
            nb::gil_scoped_release release;
            return ValueOrThrow(mean(t, dims, keepdim));
          },
          nb::arg("dim") = nb::none(), nb::arg("keepdim") = false)
      .def(
          "copy_",
          [](Tensor& dst, const Tensor& src) {
            CheckWritableInPlace(dst);
            ThrowIfError(kernels::copy_(dst, src));
            return dst;
          },
          Release())
      .def("__getitem__", &Index)
      .def("__setitem__", &SetItem)
      .def("__neg__", [](const Tensor& a) { return ValueOrThrow(neg(a)); })
      .def(
          "__matmul__",
          [](const Tensor& a, const Tensor& b) {
            return ValueOrThrow(matmul(a, b));
          },
          Release());

  // Arithmetic: tensor with tensor (broadcasting), then with an int, then
  // with a float (nanobind tries overloads in order; an int never matches
  // a float parameter first because the int overload comes before it).
#define MIXRT_BINARY(py, fn)                                             \
  tensor.def(py, [](const Tensor& a, const Tensor& b) {                  \
    return ValueOrThrow(fn(a, b));                                       \
  });                                                                    \
  tensor.def(py, [](const Tensor& a, int64_t b) {                        \
    return ValueOrThrow(fn(a, Scalar(a, static_cast<double>(b), true))); \
  });                                                                    \
  tensor.def(py, [](const Tensor& a, double b) {                         \
    return ValueOrThrow(fn(a, Scalar(a, b, false)));                     \
  });
#define MIXRT_REFLECTED(py, fn)                                          \
  tensor.def(py, [](const Tensor& a, int64_t b) {                        \
    return ValueOrThrow(fn(Scalar(a, static_cast<double>(b), true), a)); \
  });                                                                    \
  tensor.def(py, [](const Tensor& a, double b) {                         \
    return ValueOrThrow(fn(Scalar(a, b, false), a));                     \
  });
  MIXRT_BINARY("__add__", add)
  MIXRT_REFLECTED("__radd__", add)
  MIXRT_BINARY("__sub__", sub)
  MIXRT_REFLECTED("__rsub__", sub)
  MIXRT_BINARY("__mul__", mul)
  MIXRT_REFLECTED("__rmul__", mul)
  MIXRT_BINARY("__eq__", kernels::eq)
  MIXRT_BINARY("__ne__", kernels::ne)
  MIXRT_BINARY("__lt__", kernels::lt)
  MIXRT_BINARY("__le__", kernels::le)
  MIXRT_BINARY("__gt__", kernels::gt)
  MIXRT_BINARY("__ge__", kernels::ge)
#undef MIXRT_BINARY
#undef MIXRT_REFLECTED
  tensor.def("__truediv__",
             [](const Tensor& a, const Tensor& b) { return Divide(a, b); });
  tensor.def("__truediv__", [](const Tensor& a, double b) {
    return Divide(a, Scalar(a, b, false));
  });
  tensor.def("__rtruediv__", [](const Tensor& a, double b) {
    return Divide(Scalar(a, b, false), a);
  });
  tensor.def("__pow__",
             [](const Tensor& a, double e) { return ValueOrThrow(pow(a, e)); });
  // Tensors hash by identity, as PyTorch's do (== is elementwise).
  tensor.def("__hash__", [](const Tensor& t) {
    return reinterpret_cast<uintptr_t>(t.autograd_meta().get());
  });

  // Factories, on the current device.
  // x op= y's check before it computes (python/mixrt/_ops.py), as
  // PyTorch's in-place ops refuse: a written-to tensor that repeats
  // elements, or an operand that partly overlaps it.
  m.def("_check_in_place_overlap", [](const Tensor& self, nb::handle other) {
    ThrowIfError(kernels::CheckNoInternalOverlap(self));
    if (nb::isinstance<Tensor>(other)) {
      ThrowIfError(
          kernels::CheckNoPartialOverlap(self, nb::cast<Tensor>(other)));
    }
  });
  m.def("_from_values", [](const std::vector<double>& values,
                           const std::vector<int64_t>& shape, DType dtype) {
    const Device device = CurrentDevice();
    if (IsFloating(dtype)) {
      std::vector<float> f(values.begin(), values.end());
      return ValueOrThrow(from_floats(f, shape, dtype, device));
    }
    std::vector<int64_t> i(values.size());
    for (size_t k = 0; k < values.size(); ++k)
      i[k] = static_cast<int64_t>(values[k]);
    return ValueOrThrow(from_ints(i, shape, dtype, device));
  });
  m.def("_from_bytes",
        [](nb::bytes data, const std::vector<int64_t>& shape, DType dtype) {
          const auto* p = static_cast<const uint8_t*>(data.data());
          return ValueOrThrow(from_bytes(absl::MakeConstSpan(p, data.size()),
                                         shape, dtype, CurrentDevice()));
        });
  m.def("_to_bytes", [](const Tensor& t) {
    const std::vector<uint8_t> bytes = ValueOrThrow(t.to_bytes());
    return nb::bytes(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  });
  m.def("full",
        [](const std::vector<int64_t>& shape, double value, DType dtype) {
          return ValueOrThrow(full(shape, value, dtype, CurrentDevice()));
        });
  m.def("zeros", [](const std::vector<int64_t>& shape, DType dtype) {
    return ValueOrThrow(zeros(shape, dtype, CurrentDevice()));
  });
  m.def("ones", [](const std::vector<int64_t>& shape, DType dtype) {
    return ValueOrThrow(ones(shape, dtype, CurrentDevice()));
  });
  m.def("randn", [](const std::vector<int64_t>& shape, DType dtype) {
    return ValueOrThrow(randn(shape, dtype, CurrentDevice()));
  });
  m.def("rand", [](const std::vector<int64_t>& shape, DType dtype) {
    return ValueOrThrow(rand(shape, dtype, CurrentDevice()));
  });
  m.def("arange", [](double start, double end, double step, DType dtype) {
    return ValueOrThrow(arange(start, end, step, dtype, CurrentDevice()));
  });
  m.def("manual_seed", [](uint64_t seed) { manual_seed(seed); });

  // Grad modes as Python context managers: each enter installs the core's
  // thread-local guard, each exit restores what was before.
  m.def("is_grad_enabled", &GradModeEnabled);
  BindScopedGuard<NoGradGuard>(m, "_NoGrad");
  BindScopedGuard<EnableGradGuard>(m, "_EnableGrad");
  BindScopedGuard<InferenceModeGuard>(m, "_InferenceMode");
  return tensor;
}

}  // namespace mixrt::python
