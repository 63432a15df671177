// mixrt.distributed: the core's ProcessGroup (collectives over the MPI
// plugin, launched with mpirun) and DistributedDataParallel around a module
// written in Python. DDP is the core's (buckets, all-reduce overlapped with
// the backward, rank 0's values copied everywhere at construction): it sees
// the Python module through PythonModule, a core Module whose parameters
// are the Python module's own tensors and whose forward calls Python.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/distributed/distributed_data_parallel.h"
#include "core/distributed/process_group.h"
#include "core/distributed/zero_redundancy_optimizer.h"
#include "core/nn/module.h"
#include "nanobind/nanobind.h"
#include "nanobind/stl/pair.h"
#include "nanobind/stl/shared_ptr.h"
#include "nanobind/stl/string.h"
#include "nanobind/stl/unique_ptr.h"
#include "nanobind/stl/vector.h"
#include "python/src/bindings.h"
#include "python/src/python_callable.h"
#include "python/src/status_to_python.h"

namespace nb = nanobind;

namespace mixrt::python {
namespace {

using distributed::ProcessGroup;
using distributed::ReduceOp;

class PythonModule : public nn::Module {
 public:
  PythonModule(PythonCallable forward,
               const std::vector<std::pair<std::string, Tensor>>& params,
               const std::vector<std::pair<std::string, Tensor>>& buffers)
      : forward_(std::move(forward)) {
    for (const auto& [name, t] : params) register_parameter(name, t);
    for (const auto& [name, t] : buffers) register_buffer(name, t);
  }

  absl::StatusOr<Tensor> forward(const Tensor& x) override {
    nb::gil_scoped_acquire gil;
    try {
      return nb::cast<Tensor>(forward_.get()(x));
    } catch (nb::python_error& e) {
      return absl::InternalError(std::string("module forward: ") + e.what());
    } catch (const nb::cast_error&) {
      return absl::InvalidArgumentError(
          "DistributedDataParallel: the module's forward must return one "
          "Tensor");
    }
  }

 private:
  PythonCallable forward_;
};

distributed::DistributedDataParallel& DdpOf(
    const std::shared_ptr<nn::Module>& module) {
  auto* ddp = dynamic_cast<distributed::DistributedDataParallel*>(module.get());
  if (ddp == nullptr) throw nb::type_error("not a DistributedDataParallel");
  return *ddp;
}

ReduceOp ParseOp(const std::string& op) {
  if (op == "sum") return ReduceOp::kSum;
  if (op == "avg") return ReduceOp::kAvg;
  if (op == "max") return ReduceOp::kMax;
  throw nb::value_error(
      ("unknown reduce op '" + op + "' (sum, avg or max)").c_str());
}

}  // namespace

void BindDistributed(nb::module_& m) {
  nb::class_<ProcessGroup>(m, "_ProcessGroup")
      .def_prop_ro("rank", &ProcessGroup::rank)
      .def_prop_ro("world_size", &ProcessGroup::world_size)
      .def("description", &ProcessGroup::description)
      .def("all_reduce",
           [](ProcessGroup& g, const Tensor& t, const std::string& op) {
             const ReduceOp reduce = ParseOp(op);
             nb::gil_scoped_release release;
             distributed::Work work = ValueOrThrow(g.AllReduce(t, reduce));
             ThrowIfError(work.Wait());
           })
      .def("broadcast",
           [](ProcessGroup& g, const Tensor& t, int root) {
             nb::gil_scoped_release release;
             distributed::Work work = ValueOrThrow(g.Broadcast(t, root));
             ThrowIfError(work.Wait());
           })
      .def("barrier", [](ProcessGroup& g) {
        nb::gil_scoped_release release;
        ThrowIfError(g.Barrier());
      });

  m.def("_init_process_group",
        [](const std::string& backend, double timeout_s) {
          distributed::ProcessGroupOptions o;
          o.backend = backend;
          o.timeout_s = timeout_s;
          nb::gil_scoped_release release;
          return ValueOrThrow(ProcessGroup::Create(o));
        });

  m.def("_distributed_data_parallel",
        [](nb::callable forward,
           const std::vector<std::pair<std::string, Tensor>>& params,
           const std::vector<std::pair<std::string, Tensor>>& buffers,
           std::shared_ptr<ProcessGroup> group, double bucket_cap_mb,
           bool broadcast_buffers, bool find_unused_parameters) {
          auto module = std::make_shared<PythonModule>(
              PythonCallable(std::move(forward)), params, buffers);
          distributed::DistributedDataParallelOptions o;
          o.bucket_cap_mb = bucket_cap_mb;
          o.broadcast_buffers = broadcast_buffers;
          o.find_unused_parameters = find_unused_parameters;
          nb::gil_scoped_release release;
          return std::shared_ptr<nn::Module>(ValueOrThrow(
              distributed::DistributedDataParallel::Create(module, group, o)));
        });
  m.def("_ddp_register_comm_hook",
        [](const std::shared_ptr<nn::Module>& ddp, const std::string& hook) {
          const distributed::CommHook h =
              hook == "bf16" ? distributed::CommHook::kBf16Compress
                             : distributed::CommHook::kFp16Compress;
          ThrowIfError(DdpOf(ddp).register_comm_hook(h));
        });

  m.def("_ddp_register_power_sgd_hook",
        [](const std::shared_ptr<nn::Module>& ddp, int rank, int64_t start_iter,
           double min_compression_rate, bool use_error_feedback,
           bool warm_start, double epsilon, uint64_t random_seed) {
          distributed::PowerSgdOptions o;
          o.matrix_approximation_rank = rank;
          o.start_powerSGD_iter = start_iter;
          o.min_compression_rate = min_compression_rate;
          o.use_error_feedback = use_error_feedback;
          o.warm_start = warm_start;
          o.orthogonalization_epsilon = epsilon;
          o.random_seed = random_seed;
          ThrowIfError(DdpOf(ddp).register_comm_hook(o));
        });

  using distributed::ZeroRedundancyOptimizer;
  nb::class_<ZeroRedundancyOptimizer, Optimizer>(m, "ZeroRedundancyOptimizer")
      .def_static(
          "_create",
          [](std::vector<Tensor> params, std::shared_ptr<ProcessGroup> group,
             double lr, double beta1, double beta2, double eps,
             double weight_decay, bool amsgrad, bool maximize) {
            const AdamWOptions o = AdamWOptionsOf(
                lr, beta1, beta2, eps, weight_decay, amsgrad, maximize);
            nb::gil_scoped_release release;
            return ValueOrThrow(ZeroRedundancyOptimizer::Create(
                std::move(params), std::move(group), o));
          })
      .def(
          "consolidate_state_dict",
          [](ZeroRedundancyOptimizer& z, int to) {
            ThrowIfError(z.consolidate_state_dict(to));
          },
          nb::arg("to") = 0, nb::call_guard<nb::gil_scoped_release>())
      .def("owner",
           [](const ZeroRedundancyOptimizer& z, size_t i) {
             if (i >= z.params().size()) throw nb::index_error();
             return z.owner(i);
           })
      .def_prop_ro("consolidated", &ZeroRedundancyOptimizer::consolidated)
      .def_prop_ro("state_bytes", &ZeroRedundancyOptimizer::state_bytes);
}

}  // namespace mixrt::python
