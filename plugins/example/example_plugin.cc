// The example from plugins/README.md, built and tested in CI: a third-party
// backend written with the SDK. It runs f32 fill, copy and add on host
// memory and says so per op (GetOpSupport), so the host runs everything
// else on a fallback backend and conformance grades the rest "not
// implemented".
#include "mixrt/op_names.h"
#include "mixrt/status_macros.h"
#include "plugins/sdk/plugin.h"
#include "plugins/sdk/strings.h"

namespace example {

using mixrt::sdk::TensorRef;

class ExamplePlugin : public mixrt::sdk::HostMemoryPlugin {
 public:
  mixrt::sdk::PluginInfo Info() const override {
    return {/*name=*/"example", /*version=*/"0.1.0",
            /*build_info=*/"plugins/example, f32 only",
            /*device_type=*/"cpu"};
  }

  mixrt::sdk::DeviceCount CountDevices() override { return {1, ""}; }

  mixrt::sdk::StatusOr<mixrt::sdk::DeviceProperties> GetDeviceProperties(
      int) override {
    mixrt::sdk::DeviceProperties props;
    props.name = "example host device";
    props.flags =
        MIXRT_DEVICE_FLAG_HOST_MEMORY | MIXRT_DEVICE_FLAG_NEEDS_CONTIGUOUS;
    return props;
  }

  mixrt::sdk::Capability GetCapability(int, MixrtOpClass op_class,
                                       MixrtDtype dtype) override {
    const bool ours = op_class == MIXRT_OP_CLASS_ELEMENTWISE ||
                      op_class == MIXRT_OP_CLASS_CAST;
    if (ours && dtype == MIXRT_DTYPE_F32) return {MIXRT_SUPPORT_NATIVE, "", 0};
    return {MIXRT_SUPPORT_UNSUPPORTED,
            "the example plugin only runs f32 "
            "fill, copy and add",
            0};
  }

  mixrt::sdk::Capability GetOpSupport(int,
                                      const mixrt::sdk::OpQuery& q) override {
    const bool ours =
        q.op == MIXRT_OP_FILL || q.op == MIXRT_OP_COPY ||
        (q.op == MIXRT_OP_BINARY && q.variant == MIXRT_BINARY_ADD);
    if (ours && q.dtype == MIXRT_DTYPE_F32 && q.out_dtype == MIXRT_DTYPE_F32) {
      return {MIXRT_SUPPORT_NATIVE, "", 0};
    }
    return mixrt::sdk::Unsupported(
        "the example plugin only runs f32 fill, copy and add");
  }

  mixrt::sdk::Status Launch(const mixrt::sdk::KernelCall& call) override {
    for (const TensorRef& t : call.outputs) {
      if (t.dtype() != MIXRT_DTYPE_F32) return Unsupported(call);
    }
    switch (call.op) {
      case MIXRT_OP_FILL: {
        MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtScalarAttrs>());
        float* out = static_cast<float*>(call.outputs[0].data());
        for (int64_t i = 0; i < call.outputs[0].numel(); ++i) {
          out[i] = static_cast<float>(attrs->value);
        }
        return mixrt::sdk::OkStatus();
      }
      case MIXRT_OP_COPY: {  // Strided input allowed (see plugin_api.h).
        const TensorRef& in = call.inputs[0];
        if (in.dtype() != MIXRT_DTYPE_F32) return Unsupported(call);
        const TensorRef& out = call.outputs[0];
        mixrt::sdk::ForEachElement<2>(
            out.ndim(), out.shape(), {in.strides(), out.strides()},
            [&](const std::array<int64_t, 2>& o) {
              out.StoreFloat(o[1], in.LoadFloat(o[0]));
            });
        return mixrt::sdk::OkStatus();
      }
      case MIXRT_OP_BINARY: {  // Contiguous: we set NEEDS_CONTIGUOUS.
        MIXRT_ASSIGN_OR_RETURN(auto attrs,
                               call.GetAttrs<MixrtPointwiseAttrs>());
        if (attrs->kind != MIXRT_BINARY_ADD) return Unsupported(call);
        const float* x = static_cast<const float*>(call.inputs[0].data());
        const float* y = static_cast<const float*>(call.inputs[1].data());
        float* out = static_cast<float*>(call.outputs[0].data());
        for (int64_t i = 0; i < call.outputs[0].numel(); ++i) {
          out[i] = x[i] + y[i];
        }
        return mixrt::sdk::OkStatus();
      }
      default:
        return Unsupported(call);
    }
  }

 private:
  static mixrt::sdk::Status Unsupported(const mixrt::sdk::KernelCall& call) {
    return mixrt::sdk::UnimplementedError(
        mixrt::sdk::StrCat("the example plugin does not run ",
                           MixrtOpName(call.op), " with these dtypes"));
  }
};

}  // namespace example

MIXRT_SDK_DEFINE_PLUGIN(example::ExamplePlugin)
