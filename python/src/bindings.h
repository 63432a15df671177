// The parts of the extension module `mixrt._mixrt`, one per concept; each
// adds its classes and functions to the module (module.cc calls them in
// order: tensors first, since the others take and return them).
#ifndef MIXRT_PYTHON_SRC_BINDINGS_H_
#define MIXRT_PYTHON_SRC_BINDINGS_H_

#include "core/optim/optimizer.h"
#include "core/tensor/tensor.h"
#include "nanobind/nanobind.h"

namespace mixrt::python {

// Tensor, dtype, factories; returns the Tensor class for the others.
nanobind::class_<Tensor> BindTensor(nanobind::module_& m);
void BindDlpack(nanobind::module_& m,  // __dlpack__, from_dlpack.
                nanobind::class_<Tensor>& tensor);
void BindFunctional(nanobind::module_& m);   // The differentiable ops.
void BindAmp(nanobind::module_& m);          // autocast, GradScaler.
void BindNn(nanobind::module_& m);           // The core's composite modules.
void BindOptim(nanobind::module_& m);        // SGD, AdamW, clip_grad_norm_.
void BindDistributed(nanobind::module_& m);  // ProcessGroup, DDP.
void BindCompile(nanobind::module_& m);      // compile on Python callables.
void BindBackends(nanobind::module_& m);     // registry, info, select.
void BindIo(nanobind::module_& m);           // save / load checkpoints.

// AdamW's options from torch.optim.AdamW's arguments (betas split); for
// AdamW and ZeroRedundancyOptimizer.
AdamWOptions AdamWOptionsOf(double lr, double beta1, double beta2, double eps,
                            double weight_decay, bool amsgrad, bool maximize);

}  // namespace mixrt::python

#endif  // MIXRT_PYTHON_SRC_BINDINGS_H_
