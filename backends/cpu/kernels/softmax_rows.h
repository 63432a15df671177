// The row kernels of the fused attention's softmax: a row's maximum and
// exp((x - shift) * mult) into f32 or bf16 weights with the row's sum. Two
// implementations, chosen once at run time: AVX-512 (16 lanes; with
// avx512_bf16's rounding instruction where present) where the CPU and the
// oneDNN ISA cap allow it, else AVX2 (the plugin's baseline). All compute
// every exponential bit-identically (same range reduction, same polynomial);
// the row sum's order differs, and the bf16 instruction flushes subnormal
// weights to zero. bf16 weights use a shorter polynomial than f32 weights
// (4e-5 relative before rounding to bf16's 2^-9).
#ifndef MIXRT_BACKENDS_CPU_KERNELS_SOFTMAX_ROWS_H_
#define MIXRT_BACKENDS_CPU_KERNELS_SOFTMAX_ROWS_H_

#include <cstdint>

namespace mixrt::cpu {

struct SoftmaxRowKernels {
  const char* isa;  // "avx512_bf16", "avx512" or "avx2".
  // max(x[0..n)); NaN when any element is NaN; -inf for n = 0.
  float (*row_max)(const float* x, int64_t n);
  // out[j] = exp((x[j] - shift) * mult), the argument <= 0 (masked lanes are
  // -inf: exactly 0; below ~-86.6 (2^-125): 0; NaN stays NaN). Returns
  // sum of out.
  // out may alias x.
  float (*exp_row_f32)(const float* x, int64_t n, float shift, float mult,
                       float* out);
  // As exp_row_f32 to 4e-5 relative, each weight rounded to bf16 (nearest
  // even) into out; the returned sum is of the unrounded f32 values. A NaN
  // weight may round to any bits: the returned sum carries the NaN to the
  // output instead.
  float (*exp_row_bf16)(const float* x, int64_t n, float shift, float mult,
                        uint16_t* out);
  // x[j] *= factor.
  void (*scale_row)(float* x, int64_t n, float factor);
};

const SoftmaxRowKernels& Avx2SoftmaxRows();
// Require AVX-512 F/BW/DQ/VL (and BF16): CpuInfo's avx512 (and
// avx512_bf16).
const SoftmaxRowKernels& Avx512SoftmaxRows();
const SoftmaxRowKernels& Avx512Bf16SoftmaxRows();
// The implementation this process uses: AVX-512 when the CPU has it and
// oneDNN's effective ISA includes it (ONEDNN_MAX_CPU_ISA caps both), with
// the bf16 rounding instruction where the CPU has avx512_bf16; else AVX2.
const SoftmaxRowKernels& SoftmaxRows();

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_KERNELS_SOFTMAX_ROWS_H_
