// The Python values a compiled function's last variant was traced with,
// checked in C++ on each call (python/mixrt/_compile.py collects them):
// the interpreter ran the same checks in 2.9 us of a 45 us train step, a
// tenth of what compiling saves there. Checked with the GIL held.
#ifndef MIXRT_PYTHON_SRC_PYTHON_GUARDS_H_
#define MIXRT_PYTHON_SRC_PYTHON_GUARDS_H_

#include <vector>

#include "nanobind/nanobind.h"

namespace mixrt::python {

class PythonGuards {
 public:
  // `epoch`: a one-item list holding nn.Module's change count, and
  // `epoch_value` the count the variant was traced at. `same`: (kind,
  // holder, key, object) tuples, the value read must still be `object`
  // itself: kind "item" reads holder[key] (a dict), "cell" a closure cell's
  // contents, "attr" getattr(holder, key). `probes`: (read, picture)
  // pairs, read() must still equal picture. Malformed entries raise
  // TypeError.
  PythonGuards(nanobind::list epoch, nanobind::object epoch_value,
               nanobind::list same, nanobind::list probes);

  // Whether every value is as traced. A probe that raises propagates.
  // Cleared guards never hold.
  bool Hold() const;

  // Python's cyclic garbage collector: the guards hold the traced
  // function's globals, which hold the compiled wrapper that holds them.
  int Visit(visitproc visit, void* arg) const;
  void Clear();

 private:
  enum class Kind { kItem, kCell, kAttr };
  struct Same {
    Kind kind;
    nanobind::object holder, key, object;
  };
  // The value `s` reads now (a new reference), null when absent.
  static PyObject* Read(const Same& s);

  nanobind::list epoch_;
  nanobind::object epoch_value_;
  std::vector<Same> same_;
  std::vector<std::pair<nanobind::object, nanobind::object>> probes_;
};

}  // namespace mixrt::python

#endif  // MIXRT_PYTHON_SRC_PYTHON_GUARDS_H_
