// The checkpoint reader takes files from disk: any bytes must give a
// checkpoint or a DataLoss/NotFound-style Status, never a crash or an
// over-read. A random file almost never passes the CRC, so the first byte
// picks a mode: odd = the rest is the whole file; even = the rest is the
// header length, header and body, and the target adds magic, CRC and end
// marker so the parser past the CRC is reached.
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/status/statusor.h"
#include "core/io/checkpoint.h"
#include "core/plugin/registry.h"
#include "fuzz/fuzz_input.h"

namespace {

const mixrt::Device& FuzzDevice() {
  static const mixrt::Device device = [] {
    const char* path = std::getenv("MIXRT_FUZZ_PLUGIN");
    absl::StatusOr<const mixrt::Backend*> backend =
        mixrt::Registry::Global().Load(
            path != nullptr
                ? path
                : "bazel-bin/plugins/reference/libmixrt_reference.so");
    if (!backend.ok()) {
      std::fprintf(stderr, "checkpoint_fuzz: %s (set MIXRT_FUZZ_PLUGIN)\n",
                   std::string(backend.status().message()).c_str());
      std::abort();
    }
    return mixrt::Device(*backend, 0);
  }();
  return device;
}

std::string Frame(const std::string& inner) {
  std::string out = "MIXRTCK1" + inner;
  const uint32_t crc = static_cast<uint32_t>(
      crc32(0L, reinterpret_cast<const Bytef*>(out.data()), out.size()));
  out.append(reinterpret_cast<const char*>(&crc), sizeof(crc));
  out += "MIXRTEND";
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mixrt::fuzz::FuzzInput in(data, size);
  const bool raw = in.Read<uint8_t>() & 1;
  const std::string rest = in.Rest();
  const std::string file = raw ? rest : Frame(rest);
  absl::StatusOr<mixrt::Checkpoint> ckpt =
      mixrt::ParseCheckpoint(file, "fuzz.ckpt", FuzzDevice());
  if (!ckpt.ok() && ckpt.status().message().empty()) std::abort();
  if (ckpt.ok()) {
    for (const auto& [name, t] : ckpt->tensors) {
      // What was loaded must be readable in full.
      if (!t.to_bytes().ok()) std::abort();
    }
  }
  return 0;
}
