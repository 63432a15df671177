#include "python/src/python_guards.h"

#include <string>
#include <utility>

#include "nanobind/stl/string.h"

namespace nb = nanobind;

namespace mixrt::python {

PythonGuards::PythonGuards(nb::list epoch, nb::object epoch_value,
                           nb::list same, nb::list probes)
    : epoch_(std::move(epoch)), epoch_value_(std::move(epoch_value)) {
  if (nb::len(epoch_) != 1) {
    throw nb::type_error("guards: the change count must be a one-item list");
  }
  for (nb::handle entry : same) {
    auto t = nb::cast<nb::tuple>(entry);
    if (t.size() != 4) {
      throw nb::type_error(
          "guards: an identity guard is (kind, holder, key, object)");
    }
    const std::string kind = nb::cast<std::string>(t[0]);
    Same s{Kind::kItem, nb::borrow(t[1]), nb::borrow(t[2]), nb::borrow(t[3])};
    if (kind == "item") {
      if (!PyDict_Check(s.holder.ptr())) {
        throw nb::type_error("guards: an \"item\" guard's holder is a dict");
      }
    } else if (kind == "cell") {
      if (!PyCell_Check(s.holder.ptr())) {
        throw nb::type_error("guards: a \"cell\" guard's holder is a cell");
      }
      s.kind = Kind::kCell;
    } else if (kind == "attr") {
      if (!PyUnicode_Check(s.key.ptr())) {
        throw nb::type_error("guards: an \"attr\" guard's key is a str");
      }
      s.kind = Kind::kAttr;
    } else {
      throw nb::type_error(
          ("guards: unknown kind '" + kind + "' (expected item, cell or attr)")
              .c_str());
    }
    same_.push_back(std::move(s));
  }
  for (nb::handle entry : probes) {
    auto t = nb::cast<nb::tuple>(entry);
    if (t.size() != 2 || !PyCallable_Check(t[0].ptr())) {
      throw nb::type_error("guards: a probe is (callable, picture)");
    }
    probes_.emplace_back(nb::borrow(t[0]), nb::borrow(t[1]));
  }
}

PyObject* PythonGuards::Read(const Same& s) {
  switch (s.kind) {
    case Kind::kItem: {
      // A key whose hash or comparison raises counts as changed.
      PyObject* v = PyDict_GetItemWithError(s.holder.ptr(), s.key.ptr());
      if (v == nullptr) PyErr_Clear();
      Py_XINCREF(v);
      return v;
    }
    case Kind::kCell: {
      PyObject* v = PyCell_GET(s.holder.ptr());  // Null: an empty cell.
      Py_XINCREF(v);
      return v;
    }
    case Kind::kAttr: {
      PyObject* v = PyObject_GetAttr(s.holder.ptr(), s.key.ptr());
      if (v == nullptr) PyErr_Clear();
      return v;
    }
  }
  return nullptr;
}

bool PythonGuards::Hold() const {
  if (!epoch_.is_valid() || PyList_GET_SIZE(epoch_.ptr()) != 1) return false;
  const int same_epoch = PyObject_RichCompareBool(
      PyList_GET_ITEM(epoch_.ptr(), 0), epoch_value_.ptr(), Py_EQ);
  if (same_epoch < 0) throw nb::python_error();
  if (same_epoch == 0) return false;
  for (const Same& s : same_) {
    PyObject* now = Read(s);
    const bool same = now == s.object.ptr();
    Py_XDECREF(now);
    if (!same) return false;
  }
  for (const auto& [read, picture] : probes_) {
    nb::object now = read();
    const int equal = PyObject_RichCompareBool(now.ptr(), picture.ptr(), Py_EQ);
    if (equal < 0) throw nb::python_error();
    if (equal == 0) return false;
  }
  return true;
}

int PythonGuards::Visit(visitproc visit, void* arg) const {
  Py_VISIT(epoch_.ptr());
  Py_VISIT(epoch_value_.ptr());
  for (const Same& s : same_) {
    Py_VISIT(s.holder.ptr());
    Py_VISIT(s.key.ptr());
    Py_VISIT(s.object.ptr());
  }
  for (const auto& [read, picture] : probes_) {
    Py_VISIT(read.ptr());
    Py_VISIT(picture.ptr());
  }
  return 0;
}

void PythonGuards::Clear() {
  epoch_.reset();
  epoch_value_.reset();
  same_.clear();
  probes_.clear();
}

}  // namespace mixrt::python
