// mixrt.save / mixrt.load: the core's atomic, verified checkpoints for a
// dict of tensors and numbers (what state_dict() returns).
#include <map>
#include <string>

#include "core/io/checkpoint.h"
#include "nanobind/nanobind.h"
#include "nanobind/stl/map.h"
#include "nanobind/stl/string.h"
#include "python/src/bindings.h"
#include "python/src/current_device.h"
#include "python/src/status_to_python.h"

namespace nb = nanobind;

namespace mixrt::python {

void BindIo(nb::module_& m) {
  m.def("_save", [](const nb::dict& state, const std::string& path) {
    Checkpoint ckpt;
    for (auto [key, value] : state) {
      if (!nb::isinstance<nb::str>(key)) {
        throw nb::type_error("save: keys must be strings");
      }
      const std::string name = nb::cast<std::string>(key);
      if (nb::isinstance<Tensor>(value)) {
        ckpt.tensors[name] = nb::cast<Tensor>(value);
      } else if (nb::isinstance<nb::bool_>(value) ||
                 nb::isinstance<nb::int_>(value)) {
        const int64_t v = nb::cast<int64_t>(value);
        if (v < 0) {
          ckpt.scalars[name] = static_cast<double>(v);
        } else {
          ckpt.integers[name] = static_cast<uint64_t>(v);
        }
      } else if (nb::isinstance<nb::float_>(value)) {
        ckpt.scalars[name] = nb::cast<double>(value);
      } else {
        throw nb::type_error(("save: value of '" + name + "' is a " +
                              nb::cast<std::string>(nb::str(value.type())) +
                              "; a checkpoint holds Tensors, ints and floats")
                                 .c_str());
      }
    }
    nb::gil_scoped_release release;
    ThrowIfError(SaveCheckpoint(path, ckpt));
  });
  m.def("_load", [](const std::string& path) {
    Checkpoint ckpt;
    {
      nb::gil_scoped_release release;
      ckpt = ValueOrThrow(LoadCheckpoint(path, CurrentDevice()));
    }
    nb::dict out;
    for (const auto& [k, v] : ckpt.tensors) out[k.c_str()] = v;
    for (const auto& [k, v] : ckpt.scalars) out[k.c_str()] = v;
    for (const auto& [k, v] : ckpt.integers) out[k.c_str()] = v;
    return out;
  });
}

}  // namespace mixrt::python
