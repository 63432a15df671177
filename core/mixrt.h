// Everything a mixrt user needs, in one include:
//
//   #include "mixrt/mixrt.h"
//
//   mixrt::Device device = *mixrt::Registry::Global().SelectDevice();
//   auto model = *mixrt::nn::MLP({784, 256, 10}, device);
//   mixrt::SGD opt(model->parameters(), {.lr = 0.1});
//   mixrt::GradScaler scaler(device);
//
// Each header below belongs to one layer of the core (core/BUILD lists them
// in order); code inside the core includes the layer headers it needs, never
// this one.
#ifndef MIXRT_MIXRT_H_
#define MIXRT_MIXRT_H_

#include "core/allocator/caching_allocator.h"
#include "core/amp/autocast/autocast.h"
#include "core/amp/grad_scaler/grad_scaler.h"
#include "core/autograd/grad_mode.h"
#include "core/compiler/compile.h"
#include "core/distributed/distributed_checkpoint.h"
#include "core/distributed/distributed_data_parallel.h"
#include "core/distributed/distributed_sampler.h"
#include "core/distributed/grad_scaler_sync.h"
#include "core/distributed/process_group.h"
#include "core/distributed/zero_redundancy_optimizer.h"
#include "core/dtype.h"
#include "core/functional/checkpoint.h"
#include "core/functional/ops.h"
#include "core/io/checkpoint.h"
#include "core/nn/module.h"
#include "core/nn/transformer.h"
#include "core/optim/lr_scheduler.h"
#include "core/optim/optimizer.h"
#include "core/plugin/device.h"
#include "core/plugin/registry.h"
#include "core/tensor/factories.h"
#include "core/tensor/op_fallback.h"
#include "core/tensor/tensor.h"
#include "core/train/trainer.h"
#include "core/version.h"
#include "mixrt/status_macros.h"

#endif  // MIXRT_MIXRT_H_
