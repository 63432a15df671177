// The device Python's factories and adopted memory use: the one
// mixrt.backends.select() chose, else the registry's best (the same choice
// as C++'s SelectDevice: $MIXRT_BACKEND, else the best score). The
// registry loads the plugins beside the extension module once, on first
// use.
#ifndef MIXRT_PYTHON_SRC_CURRENT_DEVICE_H_
#define MIXRT_PYTHON_SRC_CURRENT_DEVICE_H_

#include <string>

#include "core/plugin/device.h"
#include "core/plugin/registry.h"

namespace mixrt::python {

Registry& LoadedRegistry();
// Throws (RuntimeError naming what was found) when no backend is usable.
Device CurrentDevice();
void SelectCurrentDevice(const std::string& backend);
// A device whose memory is host memory (adopting a NumPy array needs
// one): the current device when it is, else the first usable one that is.
Device HostMemoryDevice();

}  // namespace mixrt::python

#endif  // MIXRT_PYTHON_SRC_CURRENT_DEVICE_H_
