/* The CPU plugin's oneDNN 3.x companion: products on oneDNN 3.x, in a
 * shared object of its own (libmixrt_cpu_onednn3.so) that the plugin, built
 * against Debian's oneDNN 2.6.3, loads beside itself.
 *
 * Why a second library: neither oneDNN wins everywhere (docs/performance.md,
 * "oneDNN 3.2 against 2.6.3 on AMX"). 3.2 runs AMX's skinny bf16 products 4x
 * faster and has f16 kernels on avx512_fp16; 2.6.3 runs the large bf16
 * products 2x faster. Both export the same C symbols (dnnl_*), so they
 * cannot be linked into one object: each lives in its own, loaded with
 * RTLD_LOCAL, and only this plain C interface crosses between them.
 *
 * Nothing here names a oneDNN type: operands are dims and strides in
 * elements (oneDNN's order), dtypes are MixrtDtype, activations an enum of
 * this file.
 */
#ifndef MIXRT_BACKENDS_CPU_ONEDNN3_COMPANION_ABI_H_
#define MIXRT_BACKENDS_CPU_ONEDNN3_COMPANION_ABI_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped on any change below; the plugin refuses another version. */
#define MIXRT_CPU_ONEDNN3_ABI_VERSION 1
#define MIXRT_CPU_ONEDNN3_MAX_RANK 6
#define MIXRT_CPU_ONEDNN3_MAX_ELTWISE 4

typedef struct MixrtOneDnn3Operand {
  int32_t dtype; /* MixrtDtype */
  int32_t rank;  /* 0: absent (a product without bias) */
  int64_t dims[MIXRT_CPU_ONEDNN3_MAX_RANK];
  int64_t strides[MIXRT_CPU_ONEDNN3_MAX_RANK];
} MixrtOneDnn3Operand;

typedef enum MixrtOneDnn3Activation {
  MIXRT_ONEDNN3_RELU = 1, /* alpha: the negative slope */
  MIXRT_ONEDNN3_GELU_ERF = 2,
  MIXRT_ONEDNN3_GELU_TANH = 3,
  MIXRT_ONEDNN3_SWISH = 4, /* alpha: x * sigmoid(alpha x) */
  MIXRT_ONEDNN3_LOGISTIC = 5,
  MIXRT_ONEDNN3_TANH = 6,
  MIXRT_ONEDNN3_LINEAR = 7 /* alpha x + beta */
} MixrtOneDnn3Activation;

typedef struct MixrtOneDnn3Eltwise {
  int32_t activation; /* MixrtOneDnn3Activation */
  float alpha, beta;
} MixrtOneDnn3Eltwise;

/* c = eltwise...(a x b + bias + sum_beta * c), batched over leading dims. */
typedef struct MixrtOneDnn3Product {
  MixrtOneDnn3Operand a, b, c, bias;
  float sum_beta;
  int32_t num_eltwise;
  MixrtOneDnn3Eltwise eltwise[MIXRT_CPU_ONEDNN3_MAX_ELTWISE];
} MixrtOneDnn3Product;

/* MIXRT_CPU_ONEDNN3_ABI_VERSION as the companion was built. */
typedef int32_t MixrtOneDnn3AbiVersionFn(void);
/* The oneDNN the companion's calls reach, as major * 10000 + minor * 100 +
 * patch. The plugin checks the major is 3: if the process had put oneDNN 2
 * in the global symbol scope, the companion's dnnl_* calls would bind to it
 * and this says 2. */
typedef int32_t MixrtOneDnn3VersionFn(void);
/* Runs the product on the calling thread. Returns 0, or 1 with a message
 * (NUL-terminated, cut to message_size) when oneDNN cannot build it. */
typedef int32_t MixrtOneDnn3RunFn(const MixrtOneDnn3Product* product,
                                  const void* a, const void* b, void* c,
                                  const void* bias, char* message,
                                  size_t message_size);
/* The implementation oneDNN picks for the product ("brg:avx512_core_amx"),
 * NUL-terminated into `out`; "" when it has none. */
typedef void MixrtOneDnn3ImplementationFn(const MixrtOneDnn3Product* product,
                                          char* out, size_t out_size);

#define MIXRT_ONEDNN3_ABI_VERSION_SYMBOL "mixrt_cpu_onednn3_abi_version"
#define MIXRT_ONEDNN3_VERSION_SYMBOL "mixrt_cpu_onednn3_version"
#define MIXRT_ONEDNN3_RUN_SYMBOL "mixrt_cpu_onednn3_run"
#define MIXRT_ONEDNN3_IMPLEMENTATION_SYMBOL "mixrt_cpu_onednn3_implementation"

#ifdef __cplusplus
}
#endif

#endif /* MIXRT_BACKENDS_CPU_ONEDNN3_COMPANION_ABI_H_ */
