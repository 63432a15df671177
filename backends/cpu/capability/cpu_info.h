// What this CPU and this oneDNN build can do, read at run time.
#ifndef MIXRT_BACKENDS_CPU_CAPABILITY_CPU_INFO_H_
#define MIXRT_BACKENDS_CPU_CAPABILITY_CPU_INFO_H_

#include <string>

namespace mixrt::cpu {

struct CpuInfo {
  std::string model;  // /proc/cpuinfo "model name".
  // /proc/cpuinfo's "flags": the instruction sets the CPU has (what code
  // built with -march=native may use; "AMD EPYC" names CPUs with and
  // without AVX-512).
  std::string flags;
  int threads = 1;  // Threads kernels use (OpenMP max threads).
  bool has_build_isa =
      false;            // AVX2 + FMA + F16C, what the plugin is built for.
  bool avx512 = false;  // AVX-512 F, BW, DQ and VL.
  bool avx512_bf16 = false;
  bool avx512_fp16 = false;
  bool amx = false;
  std::string onednn_version;  // "2.6.3"
  std::string onednn_isa;      // Effective ISA: "avx512_core_bf16", ...
  // The effective ISA includes avx512_core: the CPU has it and
  // ONEDNN_MAX_CPU_ISA does not cap oneDNN below it. The plugin's own
  // AVX-512 kernels follow the same cap.
  bool onednn_avx512 = false;
};

const CpuInfo& GetCpuInfo();

// Whether the plugin's own AVX-512 kernels run: the CPU has AVX-512 and
// ONEDNN_MAX_CPU_ISA does not cap oneDNN below it.
inline bool OwnAvx512Usable() {
  const CpuInfo& cpu = GetCpuInfo();
  return cpu.avx512 && cpu.onednn_avx512;
}

// Compiles one function of a file built for AVX2 for AVX-512; it runs only
// where OwnAvx512Usable().
#define MIXRT_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl")))

// Whether the plugin's own avx512_bf16 instructions (vcvtneps2bf16,
// vdpbf16ps) run: its AVX-512 kernels do and the CPU has avx512_bf16.
inline bool OwnAvx512Bf16Usable() {
  return OwnAvx512Usable() && GetCpuInfo().avx512_bf16;
}

// As MIXRT_AVX512, with avx512_bf16; runs only where OwnAvx512Bf16Usable().
#define MIXRT_AVX512_BF16 \
  __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16")))

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_CAPABILITY_CPU_INFO_H_
