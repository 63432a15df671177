// Ops a device does not run go to another backend, as ggml's backend
// scheduler does: the host asks each device which ops it runs
// (Backend::RunsOp, the ABI's per-op support query or class matrix) and
// runs the rest on a fallback backend, copying operands across.
//
//   MIXRT_FALLBACK unset, "auto" or "on": the best usable backend whose
//                  device is host memory and runs the op (the CPU plugin
//                  when it is there);
//   MIXRT_FALLBACK=0 (or off/false/no): no fallback; a launch of an op the
//                  device does not run fails, naming the op;
//   MIXRT_FALLBACK=<backend name>: that backend's device 0.
//
// Each (backend, op) that falls back is logged once to stderr and kept in
// FallbackLog(); FallbackCounters() counts launches and copied bytes.
#ifndef MIXRT_CORE_TENSOR_OP_FALLBACK_H_
#define MIXRT_CORE_TENSOR_OP_FALLBACK_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/plugin/backend.h"
#include "core/plugin/device.h"

namespace mixrt {

inline constexpr char kFallbackEnv[] = "MIXRT_FALLBACK";

// The policy: nullopt means the environment's (read once per process).
// "auto", "off" or a backend name; anything else is refused.
absl::Status SetFallbackPolicy(std::optional<std::string> policy);
// "auto", "off" or the backend name in force.
std::string FallbackPolicy();

// Where `sig`, which `from` does not run, runs instead; an error naming
// the op, the device and why when there is no such device.
absl::StatusOr<Device> FallbackDeviceFor(const Device& from,
                                         const OpSignature& sig);

struct FallbackCounters {
  int64_t launches = 0;      // Launches run on a fallback device.
  int64_t copies = 0;        // Operand transfers between devices.
  int64_t bytes_copied = 0;  // Their bytes (0 between two host devices).
};
FallbackCounters GetFallbackCounters();
// One line per (backend, op signature) that fell back, in order:
// "example: binary/sub f32 ran on cpu:0 (declared unsupported: ...)".
std::vector<std::string> FallbackLog();

// Records a fallback (called by LaunchKernel): logs it once per line.
void NoteFallback(const std::string& line, int64_t copies,
                  int64_t bytes_copied);

// The status of a launch refused because its device does not run the op
// and no fallback was allowed: UNIMPLEMENTED, tagged so that callers (the
// conformance suite) can tell "declared unsupported" from a plugin that
// claimed an op and then failed it.
absl::Status DeclaredUnsupportedError(const Device& device,
                                      const OpSignature& sig,
                                      const std::string& why);
bool IsDeclaredUnsupported(const absl::Status& status);

}  // namespace mixrt

#endif  // MIXRT_CORE_TENSOR_OP_FALLBACK_H_
