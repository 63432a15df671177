#include "plugins/sdk/kernel_graph.h"

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "mixrt/op_names.h"
#include "mixrt/status_macros.h"
#include "plugins/sdk/plugin.h"
#include "plugins/sdk/strings.h"

namespace mixrt::sdk {

namespace {

// The payload that carries a failed step's index (decimal) inside the SDK,
// from a KernelGraph's Run to kernel_graph_run's failed_step.
constexpr char kFailedStepPayload[] = "mixrt.sdk.failed_step";

}  // namespace

Status StepFailed(int step, Status status) {
  status.SetPayload(kFailedStepPayload, StrCat(step));
  return status;
}

int FailedStepOf(const Status& status) {
  const std::optional<std::string> payload =
      status.GetPayload(kFailedStepPayload);
  if (!payload.has_value() || payload->empty()) return -1;
  char* end = nullptr;
  const long step = std::strtol(payload->c_str(), &end, 10);
  if (*end != '\0' || step < 0 || step > 1 << 30) return -1;
  return static_cast<int>(step);
}

// Attribute structs start with these two fields (plugin_api.h).
namespace {
struct AttrsHeader {
  size_t struct_size;
  MixrtExtensionBase* ext;
};
}  // namespace

struct StepGraph::Step {
  KernelCall call;
  // Inputs then outputs; the call's TensorRefs point at them, so neither
  // vector grows after the call is built.
  std::vector<MixrtTensorDesc> descs;
  std::vector<std::vector<int64_t>> dims;  // Per desc: shape then strides.
  std::vector<int32_t> buffers;
  std::vector<uint64_t> offsets;
  std::vector<bool> has_elements;
  std::unique_ptr<std::max_align_t[]> attrs;
  // A fused kernel's step: per desc, its value; the run's value addresses.
  MixrtFusedKernel* fused = nullptr;
  std::vector<int32_t> values;
  std::vector<void*> value_data;
};

StepGraph::StepGraph(Plugin* plugin, int num_buffers)
    : plugin_(plugin), num_buffers_(num_buffers) {}
StepGraph::~StepGraph() = default;

StatusOr<std::unique_ptr<StepGraph>> StepGraph::Create(
    Plugin* plugin, int device, int num_buffers,
    Span<const MixrtKernelGraphStep> steps) {
  if (num_buffers < 0) {
    return InvalidArgumentError(
        StrCat("kernel_graph_create: num_buffers ", num_buffers));
  }
  std::unique_ptr<StepGraph> graph(new StepGraph(plugin, num_buffers));
  for (size_t i = 0; i < steps.size(); ++i) {
    const MixrtKernelGraphStep& s = steps[i];
    const std::string where =
        StrCat("kernel_graph_create: step ", i, " (",
               s.op < MIXRT_OP_COUNT ? MixrtOpName(static_cast<MixrtOp>(s.op))
                                     : "fused",
               ")");
    if (s.struct_size < MixrtKernelGraphStep_STRUCT_SIZE) {
      return InvalidArgumentError(
          StrCat(where, ": struct_size ", s.struct_size));
    }
    const bool fused =
        MIXRT_STRUCT_HAS(&s, MixrtKernelGraphStep, fused_values) &&
        s.fused_kernel != nullptr;
    if (s.op >= MIXRT_OP_COUNT && !fused) {
      return UnimplementedError(
          StrCat(where, ": op ", s.op, " is newer than this plugin"));
    }
    const int n_in = s.num_inputs, n_out = s.num_outputs;
    if (n_in < 0 || n_out < 0 ||
        (n_in > 0 && (s.inputs == nullptr || s.input_buffers == nullptr ||
                      s.input_offsets == nullptr)) ||
        (n_out > 0 && (s.outputs == nullptr || s.output_buffers == nullptr ||
                       s.output_offsets == nullptr))) {
      return InvalidArgumentError(StrCat(where, ": bad input or output lists"));
    }
    auto step = std::make_unique<Step>();
    step->descs.resize(n_in + n_out);
    step->dims.resize(n_in + n_out);
    for (int k = 0; k < n_in + n_out; ++k) {
      const bool in = k < n_in;
      const MixrtTensorDesc& d = in ? s.inputs[k] : s.outputs[k - n_in];
      const int32_t buffer =
          in ? s.input_buffers[k] : s.output_buffers[k - n_in];
      const uint64_t offset =
          in ? s.input_offsets[k] : s.output_offsets[k - n_in];
      MIXRT_RETURN_IF_ERROR(internal::CheckTensorShape(
          d, in ? "input" : "output", in ? k : k - n_in, where));
      if (buffer < 0 || buffer >= num_buffers) {
        return InvalidArgumentError(
            StrCat(where, ": ", in ? "input " : "output ", in ? k : k - n_in,
                   " is in buffer ", buffer, " of ", num_buffers));
      }
      std::vector<int64_t>& dims = step->dims[k];
      dims.assign(d.shape, d.shape + d.ndim);
      dims.insert(dims.end(), d.strides, d.strides + d.ndim);
      MixrtTensorDesc& copy = step->descs[k];
      copy = MixrtTensorDesc{};
      copy.struct_size = sizeof(copy);
      copy.dtype = d.dtype;
      copy.ndim = d.ndim;
      copy.shape = dims.data();
      copy.strides = dims.data() + d.ndim;
      bool empty = false;
      for (int j = 0; j < d.ndim; ++j) empty |= d.shape[j] == 0;
      step->buffers.push_back(buffer);
      step->offsets.push_back(offset);
      step->has_elements.push_back(!empty);
    }
    if (fused) {
      if (s.fused_values == nullptr) {
        return InvalidArgumentError(
            StrCat(where, ": a fused kernel's step without fused_values"));
      }
      step->fused = s.fused_kernel;
      const int values = internal::FusedKernelValues(s.fused_kernel);
      step->values.assign(s.fused_values, s.fused_values + n_in + n_out);
      for (int32_t v : step->values) {
        if (v < 0 || v >= values) {
          return InvalidArgumentError(
              StrCat(where, ": fused value ", v, " of a kernel with ", values));
        }
      }
      step->value_data.assign(values, nullptr);
    } else if (s.attrs != nullptr) {
      const auto* header = static_cast<const AttrsHeader*>(s.attrs);
      if (header->ext != nullptr) {
        return UnimplementedError(
            StrCat(where, ": an attribute extension chain cannot be copied"));
      }
      const size_t words =
          (header->struct_size + sizeof(std::max_align_t) - 1) /
          sizeof(std::max_align_t);
      step->attrs = std::make_unique<std::max_align_t[]>(words);
      std::memcpy(step->attrs.get(), s.attrs, header->struct_size);
    }
    step->call.device = device;
    step->call.op = static_cast<MixrtOp>(s.op);
    step->call.attrs = step->attrs.get();
    for (int k = 0; k < n_in; ++k)
      step->call.inputs.emplace_back(step->descs[k]);
    for (int k = n_in; k < n_in + n_out; ++k) {
      step->call.outputs.emplace_back(step->descs[k]);
    }
    graph->steps_.push_back(std::move(step));
  }
  return graph;
}

Status StepGraph::Run(Span<void* const> buffers) {
  if (static_cast<int>(buffers.size()) != num_buffers_) {
    return InvalidArgumentError(StrCat("kernel_graph_run: ", buffers.size(),
                                       " buffers for a graph of ",
                                       num_buffers_));
  }
  for (size_t i = 0; i < steps_.size(); ++i) {
    Step& step = *steps_[i];
    for (size_t k = 0; k < step.descs.size(); ++k) {
      char* base = static_cast<char*>(buffers[step.buffers[k]]);
      if (base == nullptr && step.has_elements[k]) {
        return StepFailed(
            static_cast<int>(i),
            InvalidArgumentError(StrCat("kernel_graph_run: step ", i, " (",
                                        MixrtOpName(step.call.op), "): buffer ",
                                        step.buffers[k], " is NULL")));
      }
      step.descs[k].data = base == nullptr ? nullptr : base + step.offsets[k];
    }
    Status status;
    if (step.fused != nullptr) {
      for (size_t k = 0; k < step.descs.size(); ++k) {
        step.value_data[step.values[k]] = step.descs[k].data;
      }
      status = internal::RunFusedKernel(step.fused, step.value_data);
    } else {
      status = plugin_->Launch(step.call);
    }
    if (!status.ok()) {
      return StepFailed(
          static_cast<int>(i),
          Status(status.code(),
                 StrCat("step ", i, " (",
                        step.fused != nullptr ? "fused"
                                              : MixrtOpName(step.call.op),
                        "): ", status.message())));
    }
  }
  return OkStatus();
}

}  // namespace mixrt::sdk
