// mixrt.compile on Python callables: the core traces the launches the
// callable makes (below Python), so a replay runs no Python at all. The
// callable is called, with the GIL, only when the core traces or falls
// back to eager; a Python exception it raises comes back out as itself.
// What a replay cannot see (Python values the callable reads) the Python
// wrapper guards (python/mixrt/_compile.py).
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/compiler/compile.h"
#include "nanobind/nanobind.h"
#include "nanobind/stl/optional.h"
#include "nanobind/stl/string.h"
#include "nanobind/stl/unique_ptr.h"
#include "nanobind/stl/vector.h"
#include "python/src/bindings.h"
#include "python/src/python_callable.h"
#include "python/src/python_guards.h"
#include "python/src/status_to_python.h"

namespace nb = nanobind;

namespace mixrt::python {
namespace {

// A compiled Python callable with the slot its Python exceptions wait in
// while the core unwinds (the core only passes absl::Status).
struct CompiledPython {
  std::optional<CompiledFunction> compiled;
  std::shared_ptr<std::optional<nb::python_error>> raised =
      std::make_shared<std::optional<nb::python_error>>();
};

absl::StatusOr<std::vector<Tensor>> CallPython(
    const PythonCallable& weak_fn, const std::vector<Tensor>& inputs,
    std::optional<nb::python_error>* raised) {
  nb::gil_scoped_acquire gil;
  try {
    nb::object fn = weak_fn.get()();  // The weak reference's target.
    if (fn.is_none()) {
      return absl::FailedPreconditionError(
          "compile: the traced Python function is gone");
    }
    nb::list args;
    for (const Tensor& t : inputs) args.append(nb::cast(t));
    nb::object out = fn(*args);
    if (nb::isinstance<Tensor>(out)) {
      return std::vector<Tensor>{nb::cast<Tensor>(out)};
    }
    if (!nb::isinstance<nb::tuple>(out) && !nb::isinstance<nb::list>(out)) {
      return absl::InvalidArgumentError(
          "compile: the function must return a Tensor or a tuple or list of "
          "Tensors");
    }
    return nb::cast<std::vector<Tensor>>(out);
  } catch (nb::python_error& e) {
    raised->emplace(std::move(e));
    return absl::AbortedError("the compiled Python function raised");
  } catch (const nb::cast_error&) {
    return absl::InvalidArgumentError(
        "compile: the function must return Tensors");
  }
}

// Runs the compiled function without the GIL; a Python exception the
// traced function raised comes back out as itself.
std::vector<Tensor> RunCompiled(CompiledPython& c,
                                const std::vector<Tensor>& inputs) {
  absl::StatusOr<std::vector<Tensor>> out;
  {
    nb::gil_scoped_release release;
    out = (*c.compiled)(inputs);
  }
  if (c.raised->has_value()) {
    nb::python_error e = std::move(**c.raised);
    c.raised->reset();
    e.restore();
    throw nb::python_error();
  }
  return ValueOrThrow(std::move(out));
}

// The compiled Python wrapper's last variant, called straight from Python
// while its guards hold: a call of `arity` arguments, Tensors except the
// `constants` (index, value), which must be of the same type and equal
// (numbers and strings: what the wrapper's key holds), and whose other
// Python values are as traced. Anything else returns None, and the wrapper
// takes its full path (which may trace again).
struct GuardedCall {
  nb::object variant;   // Its `single`: one Tensor returned, not a tuple.
  nb::object compiled;  // A CompiledPython (checked when made).
  size_t arity;
  std::vector<std::pair<size_t, nb::object>> constants;  // By index.
  PythonGuards guards;

  nb::object operator()(nb::args args) {
    if (!compiled.is_valid() || args.size() != arity) return nb::none();
    std::vector<Tensor> inputs;
    inputs.reserve(arity - constants.size());
    size_t next = 0;
    for (size_t i = 0; i < arity; ++i) {
      nb::handle a = args[i];
      if (next < constants.size() && constants[next].first == i) {
        const nb::object& c = constants[next++].second;
        if (Py_TYPE(a.ptr()) != Py_TYPE(c.ptr())) return nb::none();
        const int equal = PyObject_RichCompareBool(a.ptr(), c.ptr(), Py_EQ);
        if (equal < 0) throw nb::python_error();
        if (equal == 0) return nb::none();
        continue;
      }
      if (!nb::isinstance<Tensor>(a)) return nb::none();
      inputs.push_back(nb::cast<const Tensor&>(a));
    }
    if (!guards.Hold()) return nb::none();
    std::vector<Tensor> out =
        RunCompiled(*nb::inst_ptr<CompiledPython>(compiled), inputs);
    if (nb::cast<bool>(variant.attr("single")) && out.size() == 1) {
      return nb::cast(std::move(out[0]));
    }
    return nb::tuple(nb::cast(std::move(out)));
  }
};

// The collector's view of a _GuardedCall (nanobind's type slots): what it
// holds, and dropping it to break a cycle.
int GuardedCallTraverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  if (!nb::inst_ready(self)) return 0;
  const GuardedCall* g = nb::inst_ptr<GuardedCall>(self);
  Py_VISIT(g->variant.ptr());
  Py_VISIT(g->compiled.ptr());
  for (const auto& [index, value] : g->constants) Py_VISIT(value.ptr());
  return g->guards.Visit(visit, arg);
}

int GuardedCallClear(PyObject* self) {
  GuardedCall* g = nb::inst_ptr<GuardedCall>(self);
  g->variant.reset();
  g->compiled.reset();
  g->constants.clear();
  g->guards.Clear();
  return 0;
}

PyType_Slot guarded_call_slots[] = {
    {Py_tp_traverse, reinterpret_cast<void*>(GuardedCallTraverse)},
    {Py_tp_clear, reinterpret_cast<void*>(GuardedCallClear)},
    {0, nullptr}};

}  // namespace

void BindCompile(nb::module_& m) {
  nb::class_<CompiledPython>(m, "CompiledFunction")
      .def("__call__", &RunCompiled)
      .def("explain",
           [](const CompiledPython& c) { return c.compiled->Explain(); })
      .def_prop_ro(
          "compiles",
          [](const CompiledPython& c) { return c.compiled->compiles(); })
      .def_prop_ro(
          "replays",
          [](const CompiledPython& c) { return c.compiled->replays(); })
      .def_prop_ro("eager_calls", [](const CompiledPython& c) {
        return c.compiled->eager_calls();
      });

  nb::class_<GuardedCall>(m, "_GuardedCall", nb::type_slots(guarded_call_slots))
      .def(
          "__init__",
          [](GuardedCall* self, nb::object variant, size_t arity,
             nb::list constants, nb::list epoch, nb::object epoch_value,
             nb::list same, nb::list probes) {
            nb::object compiled = variant.attr("compiled");
            CompiledPython* target = nullptr;
            if (!nb::try_cast(compiled, target) || target == nullptr) {
              throw nb::type_error(
                  "guards: the variant's `compiled` must be what _compile "
                  "returned");
            }
            std::vector<std::pair<size_t, nb::object>> values;
            for (nb::handle entry : constants) {
              auto t = nb::cast<nb::tuple>(entry);
              if (t.size() != 2) {
                throw nb::type_error("guards: a constant is (index, value)");
              }
              const size_t index = nb::cast<size_t>(t[0]);
              if (index >= arity ||
                  (!values.empty() && index <= values.back().first)) {
                throw nb::value_error(
                    "guards: constants' indexes must increase and be below "
                    "the arity");
              }
              values.emplace_back(index, nb::borrow(t[1]));
            }
            new (self) GuardedCall{
                variant, compiled, arity, std::move(values),
                PythonGuards(std::move(epoch), std::move(epoch_value),
                             std::move(same), std::move(probes))};
          },
          nb::arg("variant"), nb::arg("arity"), nb::arg("constants"),
          nb::arg("epoch"), nb::arg("epoch_value"), nb::arg("same"),
          nb::arg("probes"))
      .def("__call__", &GuardedCall::operator());

  m.def(
      "_compile",
      [](nb::callable py_fn, const std::string& mode, bool fullgraph,
         std::optional<bool> dynamic) {
        // Held weakly: the Python wrapper holds the function (and this
        // object), so no reference cycle runs through C++, where Python's
        // garbage collector cannot see it.
        PyObject* ref = PyWeakref_NewRef(py_fn.ptr(), nullptr);
        if (ref == nullptr) throw nb::python_error();
        const PythonCallable fn(nb::steal<nb::callable>(ref));
        auto c = std::make_unique<CompiledPython>();
        std::shared_ptr<std::optional<nb::python_error>> raised = c->raised;
        compiler::TracedFunction traced =
            [fn, raised](const std::vector<Tensor>& inputs) {
              return CallPython(fn, inputs, raised.get());
            };
        CompileOptions o;
        o.mode = mode;
        o.fullgraph = fullgraph;
        o.dynamic = dynamic;
        absl::StatusOr<CompiledFunction> compiled;
        {
          nb::gil_scoped_release release;  // The core copies `traced`.
          compiled = compile(std::move(traced), o);
        }
        c->compiled = ValueOrThrow(std::move(compiled));
        return c;
      },
      nb::arg("fn"), nb::arg("mode"), nb::arg("fullgraph"),
      nb::arg("dynamic").none());
}

}  // namespace mixrt::python
