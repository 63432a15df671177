// The ABI table of an out-of-process plugin. The ABI's functions take no
// context pointer, so each loaded plugin gets a slot, and a table of
// functions made for that slot that forward to its PluginHostProcess.
#ifndef MIXRT_CORE_PLUGIN_PLUGIN_HOST_TABLE_H_
#define MIXRT_CORE_PLUGIN_PLUGIN_HOST_TABLE_H_

#include <cstdint>

#include "mixrt/plugin_api.h"

namespace mixrt::isolation {

class PluginHostProcess;

// As many out-of-process plugins as one process loads.
inline constexpr int kMaxIsolatedPlugins = 16;

// A free slot for `process`, or -1 when all are taken.
int AcquireSlot(PluginHostProcess* process);
void ReleaseSlot(int slot);
// The table of `slot`: version `abi_minor` (at most this host's), the
// optional functions the plugin has (wire_format.h's TableBits).
MixrtPluginApi ProxyTable(int slot, uint32_t abi_minor, uint32_t bits);

}  // namespace mixrt::isolation

#endif  // MIXRT_CORE_PLUGIN_PLUGIN_HOST_TABLE_H_
