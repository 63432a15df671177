// The text of the real headers every generated loop embeds before its body
// (written into a C++ file by the build: the genrule loop_prelude_text), so
// generated code and the kernels share one definition of the element math
// and the reduction order.
#ifndef MIXRT_PLUGINS_SDK_LOOP_PRELUDE_H_
#define MIXRT_PLUGINS_SDK_LOOP_PRELUDE_H_

namespace mixrt::sdk {

// plugins/sdk/loop_elements.h.
extern const char kLoopElementsText[];
// plugins/sdk/reduction_order.h.
extern const char kReductionOrderText[];

}  // namespace mixrt::sdk

#endif  // MIXRT_PLUGINS_SDK_LOOP_PRELUDE_H_
