// A Python callable the core may copy, keep and destroy on any thread and
// without the GIL (a checkpoint's recompute in the backward, a compiled
// function's trace): copies share one reference, and the last one drops
// it with the GIL held (Python refcounts are never touched without it).
#ifndef MIXRT_PYTHON_SRC_PYTHON_CALLABLE_H_
#define MIXRT_PYTHON_SRC_PYTHON_CALLABLE_H_

#include <memory>
#include <utility>

#include "nanobind/nanobind.h"

namespace mixrt::python {

class PythonCallable {
 public:
  explicit PythonCallable(nanobind::callable fn)
      : fn_(new nanobind::callable(std::move(fn)), [](nanobind::callable* f) {
          if (!Py_IsInitialized()) return;  // Interpreter gone: leak.
          nanobind::gil_scoped_acquire gil;
          delete f;
        }) {}
  // Call with the GIL held.
  const nanobind::callable& get() const { return *fn_; }

 private:
  std::shared_ptr<nanobind::callable> fn_;
};

}  // namespace mixrt::python

#endif  // MIXRT_PYTHON_SRC_PYTHON_CALLABLE_H_
