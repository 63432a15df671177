// mixrt._mixrt: the core's API for the Python package `mixrt` (python/mixrt),
// which arranges it as PyTorch's. No op is implemented here: every call
// goes to the core, with the GIL released around the work.
#include "nanobind/nanobind.h"
#include "python/src/bindings.h"
#include "python/src/status_to_python.h"

NB_MODULE(_mixrt, m) {
  m.doc() = "mixrt's core, bound for the mixrt package";
  mixrt::python::RegisterExceptionTranslators();
  nanobind::class_<mixrt::Tensor> tensor = mixrt::python::BindTensor(m);
  mixrt::python::BindDlpack(m, tensor);
  mixrt::python::BindFunctional(m);
  mixrt::python::BindAmp(m);
  mixrt::python::BindNn(m);
  mixrt::python::BindOptim(m);
  mixrt::python::BindDistributed(m);
  mixrt::python::BindCompile(m);
  mixrt::python::BindBackends(m);
  mixrt::python::BindIo(m);
}
