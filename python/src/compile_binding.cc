// mixrt.compile on Python callables: the core traces the launches the
// callable makes (below Python), so a replay runs no Python at all. The
// callable is called, with the GIL, only when the core traces or falls
// back to eager; a Python exception it raises comes back out as itself.
// What a replay cannot see (Python values the callable reads) the Python
// wrapper guards (python/mixrt/_compile.py).
#include <memory>
#include <optional>
#include <string>
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

}  // namespace

void BindCompile(nb::module_& m) {
  nb::class_<CompiledPython>(m, "CompiledFunction")
      .def("__call__",
           [](CompiledPython& c, const std::vector<Tensor>& inputs) {
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
           })
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
