// A core guard (NoGradGuard, AutocastGuard, ...) as a Python context
// manager: __enter__ constructs it, __exit__ destroys it. One object per
// `with`; entering one twice without leaving is refused.
#ifndef MIXRT_PYTHON_SRC_SCOPED_GUARD_H_
#define MIXRT_PYTHON_SRC_SCOPED_GUARD_H_

#include <functional>
#include <memory>
#include <stdexcept>

#include "nanobind/nanobind.h"

namespace mixrt::python {

class ScopedGuard {
 public:
  explicit ScopedGuard(std::function<std::shared_ptr<void>()> make)
      : make_(std::move(make)) {}
  void Enter() {
    if (held_ != nullptr)
      throw std::runtime_error("this context manager is already entered");
    held_ = make_();
  }
  void Exit() { held_.reset(); }

 private:
  std::function<std::shared_ptr<void>()> make_;
  std::shared_ptr<void> held_;
};

template <typename Guard>
void BindScopedGuard(nanobind::module_& m, const char* name) {
  namespace nb = nanobind;
  if (!nb::hasattr(m, "_ScopedGuard")) {
    nb::class_<ScopedGuard>(m, "_ScopedGuard")
        .def("__enter__", [](ScopedGuard& g) { g.Enter(); })
        .def(
            "__exit__",
            [](ScopedGuard& g, nb::handle, nb::handle, nb::handle) {
              g.Exit();
              return false;
            },
            nb::arg().none(), nb::arg().none(), nb::arg().none());
  }
  m.def(name,
        [] { return ScopedGuard([] { return std::make_shared<Guard>(); }); });
}

}  // namespace mixrt::python

#endif  // MIXRT_PYTHON_SRC_SCOPED_GUARD_H_
