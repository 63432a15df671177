// mixrt.optim: the core's SGD and AdamW (fused steps), their schedulers
// and gradient clipping, over lists of Python-held parameters.
#include <memory>
#include <optional>
#include <vector>

#include "core/optim/lr_scheduler.h"
#include "core/optim/optimizer.h"
#include "nanobind/nanobind.h"
#include "nanobind/stl/map.h"
#include "nanobind/stl/optional.h"
#include "nanobind/stl/pair.h"
#include "nanobind/stl/string.h"
#include "nanobind/stl/tuple.h"
#include "nanobind/stl/unique_ptr.h"
#include "nanobind/stl/vector.h"
#include "python/src/bindings.h"
#include "python/src/status_to_python.h"

namespace nb = nanobind;

namespace mixrt::python {
namespace {

// (params, lr or None, weight_decay or None) per group, from Python.
using GroupSpec = std::tuple<std::vector<Tensor>, std::optional<double>,
                             std::optional<double>>;

std::vector<ParamGroup> Groups(std::vector<GroupSpec> specs) {
  std::vector<ParamGroup> groups;
  for (auto& [params, lr, weight_decay] : specs) {
    groups.push_back({std::move(params), lr, weight_decay});
  }
  return groups;
}

}  // namespace

AdamWOptions AdamWOptionsOf(double lr, double beta1, double beta2, double eps,
                            double weight_decay, bool amsgrad, bool maximize) {
  AdamWOptions o;
  o.lr = lr;
  o.beta1 = beta1;
  o.beta2 = beta2;
  o.eps = eps;
  o.weight_decay = weight_decay;
  o.amsgrad = amsgrad;
  o.maximize = maximize;
  return o;
}

void BindOptim(nb::module_& m) {
  nb::class_<Optimizer>(m, "Optimizer")
      .def(
          "step", [](Optimizer& o) { ThrowIfError(o.step()); },
          nb::call_guard<nb::gil_scoped_release>())
      .def(
          "zero_grad", [](Optimizer& o, bool set_to_none) { o.zero_grad(); },
          nb::arg("set_to_none") = true)
      .def_prop_rw("lr", &Optimizer::lr,
                   [](Optimizer& o, double lr) { ThrowIfError(o.set_lr(lr)); })
      // SGD's momentum, AdamW's beta1 (what OneCycleLR cycles).
      .def_prop_rw(
          "momentum",
          [](const Optimizer& o) { return ValueOrThrow(o.momentum()); },
          [](Optimizer& o, double m) { ThrowIfError(o.set_momentum(m)); })
      .def("_params", &Optimizer::params)
      .def_prop_ro("num_param_groups", &Optimizer::num_param_groups)
      .def("group_lr",
           [](const Optimizer& o, size_t g) {
             if (g >= o.num_param_groups()) throw nb::index_error();
             return o.group_lr(g);
           })
      .def("set_group_lr",
           [](Optimizer& o, size_t g, double lr) {
             ThrowIfError(o.set_group_lr(g, lr));
           })
      // The core's flat state ("<i>.exp_avg", ...), what mixrt.save takes.
      .def("state_dict", &Optimizer::state_dict)
      .def("load_state_dict",
           [](Optimizer& o, const std::map<std::string, Tensor>& state) {
             ThrowIfError(o.load_state_dict(state));
           });

  nb::class_<SGD, Optimizer>(m, "SGD").def_static(
      "_create", [](std::vector<GroupSpec> groups, double lr, double momentum,
                    double weight_decay, bool nesterov, bool maximize) {
        SgdOptions o;
        o.lr = lr;
        o.momentum = momentum;
        o.weight_decay = weight_decay;
        o.nesterov = nesterov;
        o.maximize = maximize;
        return ValueOrThrow(SGD::Create(Groups(std::move(groups)), o));
      });
  nb::class_<AdamW, Optimizer>(m, "AdamW")
      .def_static(
          "_create", [](std::vector<GroupSpec> groups, double lr, double beta1,
                        double beta2, double eps, double weight_decay,
                        bool amsgrad, bool maximize) {
            return ValueOrThrow(
                AdamW::Create(Groups(std::move(groups)),
                              AdamWOptionsOf(lr, beta1, beta2, eps,
                                             weight_decay, amsgrad, maximize)));
          });

  nb::class_<LRScheduler>(m, "LRScheduler")
      .def("step", [](LRScheduler& s) { ThrowIfError(s.step()); })
      .def("get_last_lr", &LRScheduler::get_last_lr)
      .def("get_last_lrs", &LRScheduler::get_last_lrs)
      .def_prop_ro("last_epoch", &LRScheduler::last_epoch)
      .def("state_dict", &LRScheduler::state_dict)
      .def("load_state_dict",
           [](LRScheduler& s, const std::map<std::string, double>& state) {
             ThrowIfError(s.load_state_dict(state));
           });
  nb::class_<LinearLR, LRScheduler>(m, "LinearLR")
      .def_static(
          "_create",
          [](Optimizer* o, double start_factor, double end_factor,
             int total_iters) {
            return std::make_unique<LinearLR>(ValueOrThrow(
                LinearLR::Create(o, start_factor, end_factor, total_iters)));
          },
          nb::keep_alive<0, 1>());
  nb::class_<ReduceLROnPlateau>(m, "ReduceLROnPlateau")
      .def_static(
          "_create",
          [](Optimizer* o, const std::string& mode, double factor, int patience,
             double threshold, const std::string& threshold_mode, int cooldown,
             double min_lr, double eps) {
            ReduceLROnPlateauOptions options;
            options.mode = mode;
            options.factor = factor;
            options.patience = patience;
            options.threshold = threshold;
            options.threshold_mode = threshold_mode;
            options.cooldown = cooldown;
            options.min_lr = min_lr;
            options.eps = eps;
            return std::make_unique<ReduceLROnPlateau>(
                ValueOrThrow(ReduceLROnPlateau::Create(o, options)));
          },
          nb::keep_alive<0, 1>())
      .def("step", [](ReduceLROnPlateau& s,
                      double metric) { ThrowIfError(s.step(metric)); })
      .def("get_last_lr", &ReduceLROnPlateau::get_last_lr)
      .def_prop_ro("num_bad_epochs", &ReduceLROnPlateau::num_bad_epochs)
      .def("state_dict", &ReduceLROnPlateau::state_dict)
      .def("load_state_dict", [](ReduceLROnPlateau& s,
                                 const std::map<std::string, double>& state) {
        ThrowIfError(s.load_state_dict(state));
      });
  nb::class_<StepLR, LRScheduler>(m, "StepLR")
      .def_static(
          "_create",
          [](Optimizer* o, int step_size, double gamma) {
            return std::make_unique<StepLR>(
                ValueOrThrow(StepLR::Create(o, step_size, gamma)));
          },
          nb::keep_alive<0, 1>());
  nb::class_<CosineAnnealingLR, LRScheduler>(m, "CosineAnnealingLR")
      .def_static(
          "_create",
          [](Optimizer* o, int t_max, double eta_min) {
            return std::make_unique<CosineAnnealingLR>(
                ValueOrThrow(CosineAnnealingLR::Create(o, t_max, eta_min)));
          },
          nb::keep_alive<0, 1>());

  nb::class_<OneCycleLR, LRScheduler>(m, "OneCycleLR")
      .def_static(
          "_create",
          [](Optimizer* o, double max_lr, int total_steps, int epochs,
             int steps_per_epoch, double pct_start,
             const std::string& anneal_strategy, bool cycle_momentum,
             double base_momentum, double max_momentum, double div_factor,
             double final_div_factor, bool three_phase) {
            OneCycleLROptions options;
            options.max_lr = max_lr;
            options.total_steps = total_steps;
            options.epochs = epochs;
            options.steps_per_epoch = steps_per_epoch;
            options.pct_start = pct_start;
            options.anneal_strategy = anneal_strategy;
            options.cycle_momentum = cycle_momentum;
            options.base_momentum = base_momentum;
            options.max_momentum = max_momentum;
            options.div_factor = div_factor;
            options.final_div_factor = final_div_factor;
            options.three_phase = three_phase;
            return std::make_unique<OneCycleLR>(
                ValueOrThrow(OneCycleLR::Create(o, options)));
          },
          nb::keep_alive<0, 1>());
  nb::class_<SequentialLR>(m, "SequentialLR")
      .def_static(
          "_create",
          [](Optimizer* o, std::vector<LRScheduler*> schedules,
             std::vector<int> milestones) {
            return std::make_unique<SequentialLR>(
                ValueOrThrow(SequentialLR::Create(o, std::move(schedules),
                                                  std::move(milestones))));
          },
          nb::keep_alive<0, 1>(), nb::keep_alive<0, 2>())
      .def("step", [](SequentialLR& s) { ThrowIfError(s.step()); })
      .def("get_last_lr", &SequentialLR::get_last_lr)
      .def_prop_ro("last_epoch", &SequentialLR::last_epoch)
      .def("state_dict", &SequentialLR::state_dict)
      .def("load_state_dict",
           [](SequentialLR& s, const std::map<std::string, double>& state) {
             ThrowIfError(s.load_state_dict(state));
           });

  m.def(
      "clip_grad_norm_",
      [](const std::vector<Tensor>& params, double max_norm, double norm_type,
         bool error_if_nonfinite) {
        return ValueOrThrow(
            clip_grad_norm_(params, max_norm, norm_type, error_if_nonfinite));
      },
      nb::arg("params"), nb::arg("max_norm"), nb::arg("norm_type") = 2.0,
      nb::arg("error_if_nonfinite") = false,
      nb::call_guard<nb::gil_scoped_release>());
}

}  // namespace mixrt::python
