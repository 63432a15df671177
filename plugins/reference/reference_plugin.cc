// The reference plugin: naive loops over host memory, every dtype. Other
// plugins are compared against it (plugins/conformance/), so it favours
// obviousness over speed.
#include <string>

#include "absl/strings/str_cat.h"
#include "plugins/reference/reference_kernels.h"
#include "plugins/sdk/plugin.h"
#include "plugins/sdk/tensor_ref.h"

namespace mixrt::reference {
namespace {

// Op classes whose ops this plugin implements at this ABI version.
bool Implemented(MixrtOpClass op_class) {
  return op_class < MIXRT_OP_CLASS_COUNT;
}

class ReferencePlugin : public sdk::HostMemoryPlugin {
 public:
  sdk::PluginInfo Info() const override {
    return {"reference", "1.0.0",
            absl::StrCat("portable C++ (naive loops), ABI ",
                         MIXRT_PLUGIN_API_MAJOR, ".", MIXRT_PLUGIN_API_MINOR),
            "cpu"};
  }

  sdk::DeviceCount CountDevices() override { return {1, ""}; }

  sdk::StatusOr<sdk::DeviceProperties> GetDeviceProperties(int) override {
    sdk::DeviceProperties props;
    props.name = "reference (host memory, one thread)";
    props.flags = MIXRT_DEVICE_FLAG_HOST_MEMORY;
    props.alignment = kAlignment;
    return props;
  }

  sdk::Capability GetCapability(int, MixrtOpClass op_class,
                                MixrtDtype dtype) override {
    if (!Implemented(op_class)) {
      return {MIXRT_SUPPORT_UNSUPPORTED,
              "not implemented in the reference plugin yet", 0.0};
    }
    if (!sdk::IsFloatingDtype(dtype) &&
        op_class != MIXRT_OP_CLASS_ELEMENTWISE &&
        op_class != MIXRT_OP_CLASS_CAST) {
      return {MIXRT_SUPPORT_UNSUPPORTED,
              "this op class takes floating tensors only", 0.0};
    }
    if (dtype == MIXRT_DTYPE_F16 || dtype == MIXRT_DTYPE_BF16) {
      return {MIXRT_SUPPORT_SLOW,
              "emulated: computed in double, rounded once to nearest even",
              0.0};
    }
    return {MIXRT_SUPPORT_NATIVE, "", 0.0};
  }

  const sdk::OpTable* Ops() const override { return &ReferenceOps(); }

  sdk::Status Launch(const sdk::KernelCall& call) override {
    return RunKernel(call);
  }
};

// The oracle, not a production backend: only chosen when nothing else is.
int32_t Score() { return 1; }

}  // namespace
}  // namespace mixrt::reference

MIXRT_SDK_DEFINE_PLUGIN(mixrt::reference::ReferencePlugin)
MIXRT_SDK_DEFINE_SCORE(mixrt::reference::Score)
