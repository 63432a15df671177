// mixrt.autocast and mixrt.amp.GradScaler over the core's AutocastGuard and
// GradScaler (PyTorch AMP's semantics and errors are the core's).
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "core/amp/autocast/autocast.h"
#include "core/amp/grad_scaler/grad_scaler.h"
#include "nanobind/nanobind.h"
#include "nanobind/stl/map.h"
#include "nanobind/stl/optional.h"
#include "nanobind/stl/string.h"
#include "python/src/bindings.h"
#include "python/src/current_device.h"
#include "python/src/scoped_guard.h"
#include "python/src/status_to_python.h"

namespace nb = nanobind;

namespace mixrt::python {

void BindAmp(nb::module_& m) {
  m.def(
      "_autocast",
      [](const std::string& device_type, std::optional<DType> dtype,
         bool enabled, std::optional<bool> cache_enabled) {
        return ScopedGuard([=]() -> std::shared_ptr<void> {
          AutocastOptions o;
          o.dtype = dtype;
          o.enabled = enabled;
          o.cache_enabled = cache_enabled;
          return std::make_shared<AutocastGuard>(device_type, o);
        });
      },
      nb::arg("device_type"), nb::arg("dtype").none(), nb::arg("enabled"),
      nb::arg("cache_enabled").none());
  m.def("is_autocast_enabled", [](const std::string& device_type) {
    return AutocastEnabled(device_type);
  });
  m.def("get_autocast_dtype", [](const std::string& device_type) {
    return AutocastDType(device_type);
  });
  m.def("_device_type", [] { return CurrentDevice().type(); });

  nb::class_<GradScaler>(m, "GradScaler")
      .def(
          "__init__",
          [](GradScaler* self, double init_scale, double growth_factor,
             double backoff_factor, int growth_interval, bool enabled) {
            GradScalerOptions o;
            o.init_scale = init_scale;
            o.growth_factor = growth_factor;
            o.backoff_factor = backoff_factor;
            o.growth_interval = growth_interval;
            o.enabled = enabled;
            new (self) GradScaler(CurrentDevice(), o);
          },
          nb::arg("init_scale") = 65536.0, nb::arg("growth_factor") = 2.0,
          nb::arg("backoff_factor") = 0.5, nb::arg("growth_interval") = 2000,
          nb::arg("enabled") = true)
      .def("is_enabled", &GradScaler::is_enabled)
      .def("scale",
           [](GradScaler& s, const Tensor& loss) {
             return ValueOrThrow(s.scale(loss));
           })
      .def("unscale_",
           [](GradScaler& s, Optimizer& opt) { ThrowIfError(s.unscale_(opt)); })
      .def("step",
           [](GradScaler& s, Optimizer& opt) { ThrowIfError(s.step(opt)); })
      .def(
          "update",
          [](GradScaler& s, std::optional<double> new_scale) {
            ThrowIfError(new_scale.has_value() ? s.update(*new_scale)
                                               : s.update());
          },
          nb::arg("new_scale") = nb::none())
      .def("get_scale",
           [](const GradScaler& s) { return ValueOrThrow(s.get_scale()); })
      .def("get_growth_factor", &GradScaler::get_growth_factor)
      .def("set_growth_factor", &GradScaler::set_growth_factor)
      .def("get_backoff_factor", &GradScaler::get_backoff_factor)
      .def("set_backoff_factor", &GradScaler::set_backoff_factor)
      .def("get_growth_interval", &GradScaler::get_growth_interval)
      .def("set_growth_interval", &GradScaler::set_growth_interval)
      .def("_get_growth_tracker",
           [](const GradScaler& s) {
             return ValueOrThrow(s.get_growth_tracker());
           })
      .def("last_step_skipped",
           [](const GradScaler& s) {
             return ValueOrThrow(s.last_step_skipped());
           })
      .def("state_dict",
           [](const GradScaler& s) { return ValueOrThrow(s.state_dict()); })
      .def("load_state_dict",
           [](GradScaler& s, const std::map<std::string, double>& state) {
             ThrowIfError(s.load_state_dict(state));
           });
}

}  // namespace mixrt::python
