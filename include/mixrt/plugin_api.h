/* mixrt plugin ABI, version 1.2.
 *
 * The one stable interface between the mixrt core (the "host") and a backend
 * plugin (a shared object loaded with dlopen). Pure C, self-contained: a plugin
 * needs nothing but this header. C++ authors may prefer plugins/sdk/.
 *
 * Versioning (see plugins/CHANGELOG.md):
 *   - MIXRT_PLUGIN_API_MAJOR changes on an incompatible change. The host
 * refuses a plugin whose major differs, naming both versions.
 *   - MIXRT_PLUGIN_API_MINOR changes when fields or functions are appended.
 *     Every struct starts with `struct_size`; a reader only touches a field if
 *     `MIXRT_STRUCT_HAS(ptr, Type, field)` holds, so old and new sides mix.
 *   - Every struct also carries `ext`, the head of an extension chain
 *     (MixrtExtensionBase) for optional features, NULL when unused.
 *
 * Entry points a plugin exports (nothing else should be exported):
 *   const MixrtPluginApi* mixrt_plugin_entry(uint32_t host_major,
 *                                            uint32_t host_minor);   required
 *   int32_t mixrt_plugin_score(void);                                optional
 * `mixrt_plugin_entry` returns a pointer to a table with static storage
 * duration (never freed) or NULL if the plugin cannot serve that host.
 * `mixrt_plugin_score` returns 0 if the plugin cannot run on this machine
 * (e.g. the CPU lacks the ISA it was built for); higher means preferred.
 * Absent, the host assumes 1.
 *
 * Calling conventions:
 *   - Every function takes one `*_Args` struct. The caller sets `struct_size`
 *     to sizeof of the struct it was compiled with. Fields marked "out" are
 *     written by the callee.
 *   - Every function returns NULL on success or a MixrtError* on failure. The
 *     error is owned by the plugin; the host reads it with error_message /
 *     error_code and must release it with error_destroy. No C++ exception may
 *     cross this boundary.
 *   - Strings returned by the plugin ("out" const char*) stay valid until
 *     plugin_shutdown unless stated otherwise. Strings passed in by the host
 *     are valid only during the call.
 *   - Thread safety: plugin_initialize and plugin_shutdown are called once,
 *     from one thread, with no other call in flight. Every other function may
 *     be called concurrently from any thread after plugin_initialize returned
 *     success; the plugin synchronizes its own state.
 *   - Ordering: kernels and copies issued for one device execute in issue
 *     order. memcpy to host returns when the data are on the host; other calls
 *     may be asynchronous until device_synchronize.
 */
#ifndef MIXRT_PLUGIN_API_H_
#define MIXRT_PLUGIN_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MIXRT_PLUGIN_API_MAJOR 1
#define MIXRT_PLUGIN_API_MINOR 2

#define MIXRT_PLUGIN_ENTRY_SYMBOL "mixrt_plugin_entry"
#define MIXRT_PLUGIN_SCORE_SYMBOL "mixrt_plugin_score"

/* Size of a struct up to and including `field`: the minimum struct_size a
 * struct must have for `field` to be present. */
#define MIXRT_STRUCT_SIZE_THROUGH(Type, field) \
  (offsetof(Type, field) + sizeof(((Type*)0)->field))
/* Beside each struct: Type##_STRUCT_SIZE, the size of the struct's first
 * version (through `last_field`, that version's last field): what every
 * caller sends, so what a callee requires. Frozen: a field appended later
 * leaves it alone and is read only where MIXRT_STRUCT_HAS says the caller
 * sent it (as PJRT_DEFINE_STRUCT_TRAITS). */
#define MIXRT_DEFINE_STRUCT_TRAITS(Type, last_field) \
  enum { Type##_STRUCT_SIZE = MIXRT_STRUCT_SIZE_THROUGH(Type, last_field) }
/* True when `ptr` (a struct with struct_size) contains `field`. */
#define MIXRT_STRUCT_HAS(ptr, Type, field) \
  ((ptr)->struct_size >= MIXRT_STRUCT_SIZE_THROUGH(Type, field))

/* ------------------------------------------------------------------------ */
/* Extensions                                                                */
/* ------------------------------------------------------------------------ */

/* Every extension struct starts with this header. Unknown types are skipped. */
typedef struct MixrtExtensionBase {
  size_t struct_size;
  uint32_t type; /* A MixrtExtensionType value. */
  struct MixrtExtensionBase* next;
} MixrtExtensionBase;

typedef enum MixrtExtensionType {
  MIXRT_EXTENSION_TYPE_NONE = 0
} MixrtExtensionType;

/* ------------------------------------------------------------------------ */
/* Enumerations shared by host and plugin. Values are stable: new values are */
/* appended in minor versions, existing ones never change. */
/* ------------------------------------------------------------------------ */

typedef enum MixrtDtype {
  MIXRT_DTYPE_F32 = 0,
  MIXRT_DTYPE_F16 = 1,
  MIXRT_DTYPE_BF16 = 2,
  MIXRT_DTYPE_I32 = 3,
  MIXRT_DTYPE_I64 = 4,
  MIXRT_DTYPE_BOOL = 5, /* One byte, 0 or 1. */
  MIXRT_DTYPE_COUNT = 6
} MixrtDtype;

typedef enum MixrtErrorCode {
  MIXRT_ERROR_CODE_OK = 0, /* Never carried by an error object. */
  MIXRT_ERROR_CODE_INVALID_ARGUMENT = 1,
  MIXRT_ERROR_CODE_UNIMPLEMENTED = 2,
  MIXRT_ERROR_CODE_OUT_OF_MEMORY = 3,
  MIXRT_ERROR_CODE_NO_DEVICE = 4,
  MIXRT_ERROR_CODE_FAILED_PRECONDITION = 5,
  MIXRT_ERROR_CODE_INTERNAL = 6,
  MIXRT_ERROR_CODE_UNAVAILABLE = 7
} MixrtErrorCode;

/* Classes of ops for which a device reports a precision capability. */
typedef enum MixrtOpClass {
  MIXRT_OP_CLASS_MATMUL = 0,        /* matmul, linear, bmm */
  MIXRT_OP_CLASS_CONV = 1,          /* convolutions */
  MIXRT_OP_CLASS_POOL = 2,          /* max/avg pooling */
  MIXRT_OP_CLASS_ELEMENTWISE = 3,   /* unary and binary pointwise */
  MIXRT_OP_CLASS_REDUCTION = 4,     /* sum, mean, max, var */
  MIXRT_OP_CLASS_SOFTMAX = 5,       /* softmax, log_softmax */
  MIXRT_OP_CLASS_NORMALIZATION = 6, /* layer_norm, batch_norm */
  MIXRT_OP_CLASS_LOSS = 7,          /* mse, cross_entropy, ... */
  MIXRT_OP_CLASS_EMBEDDING = 8,     /* embedding gather/scatter */
  MIXRT_OP_CLASS_CAST = 9,          /* dtype conversion, copy, fill */
  MIXRT_OP_CLASS_OPTIMIZER = 10,    /* fused optimizer and grad-scaler steps */
  MIXRT_OP_CLASS_COUNT = 11
} MixrtOpClass;

typedef enum MixrtSupportLevel {
  MIXRT_SUPPORT_UNSUPPORTED = 0, /* Never launched by the host. */
  MIXRT_SUPPORT_SLOW = 1,        /* Works, emulated or measured slower. */
  MIXRT_SUPPORT_NATIVE = 2       /* Runs on hardware made for it. */
} MixrtSupportLevel;

/* The core-defined op table. Each op documents its tensors and attributes.
 * Unless stated otherwise: all inputs and outputs have the first output's
 * shape (the host expands broadcast inputs with stride 0 before launching);
 * inputs and outputs share one floating dtype; f16/bf16 compute in at least
 * f32 and round to nearest even on store; reductions accumulate in at least
 * f32. "(in place)" marks outputs that are also read. */
typedef enum MixrtOp {
  /* ---- Creation and conversion ---- */
  /* out[i] = value. attrs: MixrtScalarAttrs. Any dtype. */
  MIXRT_OP_FILL = 0,
  /* out[i] = convert(in0[i]); any dtype pair, float->int truncates toward
   * zero (NaN -> 0, saturating), ->bool is (x != 0). in0 may be strided
   * even on a NEEDS_CONTIGUOUS device. attrs: none. */
  MIXRT_OP_COPY = 1,
  /* out[i] = start + i * step over the flattened (row-major) out.
   * attrs: MixrtArangeAttrs. Any dtype. */
  MIXRT_OP_ARANGE = 2,
  /* Counter-based random numbers, identical on every plugin: see
   * MixrtRandomAttrs. out is floating. */
  MIXRT_OP_RANDOM_UNIFORM = 3,
  MIXRT_OP_RANDOM_NORMAL = 4,

  /* ---- Pointwise ---- */
  /* out = in0 (kind) in1. attrs: MixrtPointwiseAttrs, kind a
   * MixrtBinaryKind. Also i32/i64 (integer division truncates; division by
   * zero is an error). */
  MIXRT_OP_BINARY = 5,
  /* out = f(in0). attrs: MixrtPointwiseAttrs, kind a MixrtUnaryKind. NEG and
   * ABS also take i32/i64. */
  MIXRT_OP_UNARY = 6,
  /* Gradient of MIXRT_OP_UNARY: inputs (grad_out, x) where x is the forward
   * input; out = grad_out * f'(x). attrs as for the forward op. */
  MIXRT_OP_UNARY_BACKWARD = 7,
  /* out (bool) = in0 (kind) in1. attrs: MixrtPointwiseAttrs, kind a
   * MixrtCompareKind. Inputs share any dtype. */
  MIXRT_OP_COMPARE = 8,
  /* out = in0 ? in1 : in2, in0 bool. attrs: none. */
  MIXRT_OP_WHERE = 9,

  /* ---- Reductions ---- */
  /* in0 any shape; out has in0's rank with reduced axes of size 1 (the host
   * drops them when keepdim is false), and in0's dtype or f32 (a bf16 bias
   * gradient summed straight into f32; the host asks device_get_op_support
   * with that out_dtype first). attrs: MixrtReduceAttrs. */
  MIXRT_OP_REDUCE = 10,

  /* ---- Linear algebra ---- */
  /* out[b] = act(in0[b] @ in1[b] + bias) + beta * out[b].
   * in0 [..., M, K], in1 [..., K, N], optional in2 bias [N]; out [..., M, N]
   * with the same leading (batch) dims. in0 and in1 share a floating dtype;
   * out has that dtype or f32. attrs: MixrtMatmulAttrs. */
  MIXRT_OP_MATMUL = 11,

  /* ---- Softmax and normalization ---- */
  /* out = softmax / log_softmax of in0 along attrs axis (MixrtAxisAttrs). */
  MIXRT_OP_SOFTMAX = 12,
  MIXRT_OP_LOG_SOFTMAX = 13,
  /* inputs (grad_out, out) of the forward op; out = grad_in. MixrtAxisAttrs. */
  MIXRT_OP_SOFTMAX_BACKWARD = 14,
  MIXRT_OP_LOG_SOFTMAX_BACKWARD = 15,
  /* Normalizes each row of in0 [R, N]; optional in1 weight [N], in2 bias [N]
   * (both or neither). outputs: y [R, N], mean [R] (f32), rstd [R] (f32).
   * attrs: MixrtNormAttrs. */
  MIXRT_OP_LAYER_NORM = 16,
  /* inputs (grad_y [R, N], x [R, N], mean [R], rstd [R], weight [N] or
   * absent); outputs grad_x [R, N] and, when weight is given, grad_weight
   * [N] and grad_bias [N] (f32 or x's dtype). attrs: MixrtNormAttrs. */
  MIXRT_OP_LAYER_NORM_BACKWARD = 17,

  /* ---- Losses ---- */
  /* inputs logits [N, C] (floating), target [N] (i64 class indices);
   * out: per-sample loss [N] (f32, 0 where target == ignore_index).
   * attrs: MixrtCrossEntropyAttrs. */
  MIXRT_OP_CROSS_ENTROPY = 18,
  /* inputs (grad_loss [N] f32, logits [N, C], target [N]); out grad_logits
   * [N, C] in logits' dtype. attrs: MixrtCrossEntropyAttrs. */
  MIXRT_OP_CROSS_ENTROPY_BACKWARD = 19,

  /* ---- Mixed precision and optimizers (PyTorch's fused semantics) ---- */
  /* inputs (inv_scale f32 [1]); outputs (found_inf f32 [1] (in place), then
   * any number of floating gradients (in place)). Every gradient is
   * multiplied by inv_scale; found_inf is set to 1 if any element of any
   * gradient is inf or NaN (and never reset to 0). Since 1.1: an inf or NaN
   * inv_scale sets found_inf and leaves every gradient unchanged. */
  MIXRT_OP_NON_FINITE_CHECK_AND_UNSCALE = 20,
  /* inputs (found_inf f32 [1]); outputs (scale f32 [1], growth_tracker i32
   * [1]), both in place. torch._amp_update_scale_: if found_inf, scale *=
   * backoff and the tracker resets to 0; else the tracker increments and,
   * when it reaches growth_interval, scale *= growth (only if the result is
   * finite) and the tracker resets. Since 1.1 a backed-off scale never goes
   * below FLT_MIN (2^-126). attrs: MixrtUpdateScaleAttrs. */
  MIXRT_OP_UPDATE_SCALE = 21,
  /* One parameter's SGD step. inputs (grad [, grad_scale f32 [1]]
   * [, found_inf f32 [1]]) as flagged in the attrs; outputs (param
   * [, momentum_buffer]) in place, f32. Skipped entirely when found_inf is
   * nonzero; grad is divided by grad_scale first. attrs: MixrtSgdAttrs. */
  MIXRT_OP_SGD_STEP = 22,
  /* One parameter's AdamW step (decoupled weight decay). inputs as for SGD;
   * outputs (param, exp_avg, exp_avg_sq, step f32 [1]) in place, f32. step
   * is incremented unless found_inf. attrs: MixrtAdamWAttrs; with
   * MIXRT_OPTIM_AMSGRAD a fifth output max_exp_avg_sq (ABI 1.2). */
  MIXRT_OP_ADAMW_STEP = 23,

  /* ---- Convolution and pooling (NCHW) ---- */
  /* out [N, O, Ho, Wo] = conv(in0 x [N, C, H, W], in1 w [O, C/groups, kh,
   * kw]) + optional in2 bias [O], then the activation. Ho = (H + 2 pad_h -
   * dil_h (kh - 1) - 1) / stride_h + 1. attrs: MixrtConvAttrs. */
  MIXRT_OP_CONV2D = 24,
  /* inputs (grad_out, w); out grad_x. attrs: MixrtConvAttrs. */
  MIXRT_OP_CONV2D_BACKWARD_DATA = 25,
  /* inputs (grad_out, x); outputs grad_w [, grad_bias [O]]. */
  MIXRT_OP_CONV2D_BACKWARD_WEIGHTS = 26,
  /* out = max or average pooling of in0 [N, C, H, W].
   * attrs: MixrtPoolAttrs. */
  MIXRT_OP_POOL2D = 27,
  /* inputs (grad_out, x); out grad_x (max: to the first maximum). */
  MIXRT_OP_POOL2D_BACKWARD = 28,

  /* ---- Batch normalization (over all dims but 1) ---- */
  /* inputs x [N, C, ...], weight [C], bias [C]; outputs y, save_mean [C],
   * save_invstd [C] (f32), running_mean [C], running_var [C] (f32, in
   * place). Training: batch statistics are used and the running ones
   * updated with momentum (running_var with the unbiased variance); eval:
   * the running statistics are used and save_* are set from them.
   * attrs: MixrtBatchNormAttrs. */
  MIXRT_OP_BATCH_NORM = 29,
  /* inputs (grad_y, x, weight, save_mean, save_invstd); outputs grad_x,
   * grad_weight [C], grad_bias [C]. Training-mode gradient (through the
   * batch statistics) unless attrs say eval. */
  MIXRT_OP_BATCH_NORM_BACKWARD = 30,

  /* ---- Embedding ---- */
  /* out [..., D] = in0 weight [V, D] rows at in1 indices (i64 [...]). An
   * index outside [0, V) is an error. attrs: none. */
  MIXRT_OP_EMBEDDING = 31,
  /* inputs (grad_out [..., D], indices); out grad_weight [V, D] = the sum of
   * the gradient rows per index (rows at padding_idx stay 0).
   * attrs: MixrtEmbeddingAttrs. */
  MIXRT_OP_EMBEDDING_BACKWARD = 32,

  /* ---- Since ABI 1.1 ---- */
  /* inputs: any number (zero included) of contiguous floating tensors; out
   * norm f32 [1] = sqrt(sum over every element of every input of x^2),
   * accumulated in at least f32: the total L2 norm of torch.nn.utils.
   * clip_grad_norm_, in one launch over a model's gradients. inf and NaN
   * elements propagate. Capability: MIXRT_OP_CLASS_REDUCTION. A 1.0 plugin
   * answers MIXRT_ERROR_CODE_UNIMPLEMENTED and the host computes the norm
   * tensor by tensor instead. attrs: none. */
  MIXRT_OP_MULTI_TENSOR_NORM = 33,
  /* Fused scaled dot-product attention (ABI 1.1). inputs q [G, L, E],
   * k [G, S, E], v [G, S, Ev] (contiguous, one floating dtype) and, when
   * attrs.mask_kind is not NONE, mask [G, L, S] (any strides, 0 for
   * broadcast): bool (attend where true) or additive (q's dtype or f32).
   * outputs out [G, L, Ev] in q's dtype and lse [G, L] f32, the log of each
   * query row's softmax normalizer (of the scaled, masked scores); a row
   * that attends no key gets out 0 and lse -inf. Dropout (attrs.dropout_p >
   * 0) zeroes weight (g, i, j) where PhiloxUniform(seed, offset,
   * (g L + i) S + j) < dropout_p and scales the rest by 1 / (1 -
   * dropout_p). Memory beyond the outputs must not grow with L * S (the
   * point of fusing). Capability: MIXRT_OP_CLASS_MATMUL. A plugin without
   * it answers MIXRT_ERROR_CODE_UNIMPLEMENTED and the host composes
   * matmul, softmax and matmul. attrs: MixrtAttentionAttrs. */
  MIXRT_OP_SCALED_DOT_PRODUCT_ATTENTION = 34,
  /* inputs (grad_out, q, k, v, out, lse [, mask]) as in the forward;
   * outputs grad_q, grad_k, grad_v in q's, k's and v's dtype. The weights
   * are recomputed from lse, the dropout mask regenerated from (seed,
   * offset). attrs: MixrtAttentionAttrs (the forward's). */
  MIXRT_OP_SCALED_DOT_PRODUCT_ATTENTION_BACKWARD = 35,
  /* Dropout in one pass (ABI 1.1). input x (floating); output out, x's
   * shape and dtype: out[i] = x[i] * f(i) over the flattened (row-major)
   * index i, where f(i) = 0 when u(i) < (float)p and 1 / (1 - p) otherwise;
   * u(i) is element i of MIXRT_OP_RANDOM_UNIFORM over [0, 1) with the same
   * seed and offset (exact in f32), so the mask is the one that random
   * uniform, compare and where compose. The product is computed in at least
   * f32 and rounded once. The backward is this op on grad_out with the
   * forward's attrs: the mask is regenerated, never stored. Capability:
   * MIXRT_OP_CLASS_ELEMENTWISE. A plugin without it answers
   * MIXRT_ERROR_CODE_UNIMPLEMENTED and the host composes those ops.
   * attrs: MixrtDropoutAttrs. */
  MIXRT_OP_DROPOUT = 36,
  /* Every parameter's SGD step in one launch (ABI 1.1), as torch's fused
   * SGD steps a parameter group: inputs (grad_0 .. grad_{n-1}
   * [, grad_scale f32 [1]] [, found_inf f32 [1]]) as flagged in the attrs;
   * outputs (param_0 .. param_{n-1} [, momentum_buffer_0 ..
   * momentum_buffer_{n-1}] when attrs.momentum != 0), in place, f32. Each
   * parameter steps exactly as MIXRT_OP_SGD_STEP with the same attrs
   * (first_step for all of them) would step it; found_inf skips them all.
   * n >= 1; the tensors need not share shapes. Capability:
   * MIXRT_OP_CLASS_OPTIMIZER. A plugin without it answers
   * MIXRT_ERROR_CODE_UNIMPLEMENTED and the host launches MIXRT_OP_SGD_STEP
   * per parameter. attrs: MixrtSgdAttrs. */
  MIXRT_OP_MULTI_TENSOR_SGD_STEP = 37,

  MIXRT_OP_COUNT = 38
} MixrtOp;

typedef enum MixrtBinaryKind {
  MIXRT_BINARY_ADD = 0,
  MIXRT_BINARY_SUB = 1,
  MIXRT_BINARY_MUL = 2,
  MIXRT_BINARY_DIV = 3,
  MIXRT_BINARY_POW = 4,
  MIXRT_BINARY_MAXIMUM = 5, /* NaN if either is NaN. */
  MIXRT_BINARY_MINIMUM = 6,
  MIXRT_BINARY_COUNT = 7
} MixrtBinaryKind;

typedef enum MixrtUnaryKind {
  MIXRT_UNARY_NEG = 0,
  MIXRT_UNARY_ABS = 1,
  MIXRT_UNARY_RELU = 2,
  MIXRT_UNARY_LEAKY_RELU = 3, /* alpha: negative slope. */
  MIXRT_UNARY_GELU = 4,       /* x * Phi(x), with erf. */
  MIXRT_UNARY_GELU_TANH = 5,  /* tanh approximation. */
  MIXRT_UNARY_SILU = 6,
  MIXRT_UNARY_SIGMOID = 7,
  MIXRT_UNARY_TANH = 8,
  MIXRT_UNARY_EXP = 9,
  MIXRT_UNARY_LOG = 10,
  MIXRT_UNARY_LOG1P = 11,
  MIXRT_UNARY_SQRT = 12,
  MIXRT_UNARY_RSQRT = 13,
  MIXRT_UNARY_CLAMP = 14,      /* alpha: min, beta: max (NaN bound = none). */
  MIXRT_UNARY_POW_SCALAR = 15, /* alpha: exponent. */
  MIXRT_UNARY_SCALE = 16,      /* alpha * x + beta. */
  MIXRT_UNARY_COUNT = 17
} MixrtUnaryKind;

typedef enum MixrtCompareKind {
  MIXRT_COMPARE_EQ = 0,
  MIXRT_COMPARE_NE = 1,
  MIXRT_COMPARE_LT = 2,
  MIXRT_COMPARE_LE = 3,
  MIXRT_COMPARE_GT = 4,
  MIXRT_COMPARE_GE = 5,
  MIXRT_COMPARE_COUNT = 6
} MixrtCompareKind;

typedef enum MixrtReduceKind {
  MIXRT_REDUCE_SUM = 0,
  MIXRT_REDUCE_MEAN = 1,
  MIXRT_REDUCE_MAX = 2, /* NaN propagates. */
  MIXRT_REDUCE_MIN = 3,
  MIXRT_REDUCE_ABS_MAX = 4, /* max of |x| (infinity norms). */
  MIXRT_REDUCE_VAR = 5,     /* sum((x - mean)^2) / (n - correction). */
  MIXRT_REDUCE_COUNT = 6
} MixrtReduceKind;

typedef enum MixrtActivation {
  MIXRT_ACTIVATION_NONE = 0,
  MIXRT_ACTIVATION_RELU = 1,
  MIXRT_ACTIVATION_GELU = 2,
  MIXRT_ACTIVATION_GELU_TANH = 3
} MixrtActivation;

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct MixrtError MixrtError; /* Opaque, owned by the plugin. */

typedef struct MixrtError_Destroy_Args {
  size_t struct_size;
  MixrtExtensionBase* ext;
  MixrtError* error; /* Freed by this call. */
} MixrtError_Destroy_Args;
typedef void MixrtError_Destroy(MixrtError_Destroy_Args* args);

typedef struct MixrtError_Message_Args {
  size_t struct_size;
  MixrtExtensionBase* ext;
  const MixrtError* error;
  const char* message; /* out: NUL-terminated; valid until error_destroy. */
  size_t message_size; /* out: strlen(message). */
} MixrtError_Message_Args;
typedef void MixrtError_Message(MixrtError_Message_Args* args);

typedef struct MixrtError_GetCode_Args {
  size_t struct_size;
  MixrtExtensionBase* ext;
  const MixrtError* error;
  uint32_t code; /* out: a MixrtErrorCode. */
} MixrtError_GetCode_Args;
typedef void MixrtError_GetCode(MixrtError_GetCode_Args* args);

/* ------------------------------------------------------------------------ */
/* Plugin lifetime and identity                                              */
/* ------------------------------------------------------------------------ */

typedef struct MixrtPlugin_GetInfo_Args {
  size_t struct_size;
  MixrtExtensionBase* ext;
  const char* name;        /* out: short backend name, e.g. "cpu". */
  const char* version;     /* out: the plugin's own version. */
  const char* build_info;  /* out: e.g. "oneDNN 2.6.3, built for avx512". */
  const char* device_type; /* out: autocast policy family: "cpu", "cuda". */
} MixrtPlugin_GetInfo_Args;
MIXRT_DEFINE_STRUCT_TRAITS(MixrtPlugin_GetInfo_Args, device_type);
/* May be called before plugin_initialize. */
typedef MixrtError* MixrtPlugin_GetInfo(MixrtPlugin_GetInfo_Args* args);

typedef struct MixrtPlugin_Initialize_Args {
  size_t struct_size;
  MixrtExtensionBase* ext;
} MixrtPlugin_Initialize_Args;
MIXRT_DEFINE_STRUCT_TRAITS(MixrtPlugin_Initialize_Args, ext);
/* Called once before any call other than get_info. A failure makes the host
 * skip the plugin and keep the error message as the reason. */
typedef MixrtError* MixrtPlugin_Initialize(MixrtPlugin_Initialize_Args* args);

typedef struct MixrtPlugin_Shutdown_Args {
  size_t struct_size;
  MixrtExtensionBase* ext;
} MixrtPlugin_Shutdown_Args;
MIXRT_DEFINE_STRUCT_TRAITS(MixrtPlugin_Shutdown_Args, ext);
/* Optional. Releases everything; no call may follow. */
typedef MixrtError* MixrtPlugin_Shutdown(MixrtPlugin_Shutdown_Args* args);

/* ------------------------------------------------------------------------ */
/* Devices and capabilities                                                  */
/* ------------------------------------------------------------------------ */

typedef struct MixrtDevice_Count_Args {
  size_t struct_size;
  MixrtExtensionBase* ext;
  int32_t count; /* out */
  /* out: when count is 0, why (e.g. the driver's error text); else NULL. */
  const char* no_device_reason;
} MixrtDevice_Count_Args;
MIXRT_DEFINE_STRUCT_TRAITS(MixrtDevice_Count_Args, no_device_reason);
typedef MixrtError* MixrtDevice_Count(MixrtDevice_Count_Args* args);

/* Device property flags. */
#define MIXRT_DEVICE_FLAG_HOST_MEMORY                                         \
  (1u << 0)                                      /* Pointers are host memory. \
                                                  */
#define MIXRT_DEVICE_FLAG_TENSOR_CORES (1u << 1) /* Matrix units present. */
/* Kernels accept only contiguous (row-major, dense) tensors: the host makes
 * every input contiguous and passes contiguous outputs. MIXRT_OP_COPY is the
 * exception: it is how the host makes tensors contiguous, so it always
 * accepts strided input. */
#define MIXRT_DEVICE_FLAG_NEEDS_CONTIGUOUS (1u << 2)
/* Since 1.2. With NEEDS_CONTIGUOUS: MIXRT_OP_MATMUL's in0 and in1 may also
 * arrive as the transpose of a dense row-major buffer — [..., r, c] with
 * strides (..., 1, r), r > 1, c > 1, batch dims dense
 * (mixrt/matrix_layout.h: IsTransposedDenseMatrix) — which a BLAS reads as
 * op T, so a linear layer's weight is not copied into a transposed buffer
 * on every call. Older hosts ignore the flag and send dense operands. */
#define MIXRT_DEVICE_FLAG_MATMUL_TRANSPOSED_OPERANDS (1u << 3)

typedef struct MixrtDevice_GetProperties_Args {
  size_t struct_size;
  MixrtExtensionBase* ext;
  int32_t device;        /* in: 0 <= device < count. */
  const char* name;      /* out: e.g. "Intel Xeon ... (2 threads)". */
  uint64_t total_memory; /* out: bytes; 0 if unknown. */
  uint32_t flags;        /* out: MIXRT_DEVICE_FLAG_* */
  uint32_t alignment;    /* out: allocation alignment in bytes (power of 2). */
} MixrtDevice_GetProperties_Args;
MIXRT_DEFINE_STRUCT_TRAITS(MixrtDevice_GetProperties_Args, alignment);
typedef MixrtError* MixrtDevice_GetProperties(
    MixrtDevice_GetProperties_Args* args);

/* Which capability class each op belongs to (MixrtOpClassOf in
 * mixrt/op_class.h returns it):
 *   cast:          fill, copy, arange, random_uniform, random_normal
 *   elementwise:   binary, unary, unary_backward, compare, where, dropout
 *   reduction:     reduce, multi_tensor_norm
 *   matmul:        matmul, scaled_dot_product_attention (+ backward)
 *   softmax:       softmax, log_softmax (+ backwards)
 *   normalization: layer_norm, batch_norm (+ backwards)
 *   loss:          cross_entropy (+ backward)
 *   optimizer:     non_finite_check_and_unscale, update_scale, sgd_step,
 *                  adamw_step
 *   conv:          conv2d (+ backward data, backward weights)
 *   pool:          pool2d (+ backward)
 *   embedding:     embedding (+ backward)
 * The class matrix summarizes a device for autocast and `mixrt info`; the
 * per-op query below (since 1.1) says exactly which ops it runs. */
typedef struct MixrtDevice_GetCapability_Args {
  size_t struct_size;
  MixrtExtensionBase* ext;
  int32_t device;    /* in */
  uint32_t op_class; /* in: MixrtOpClass */
  uint32_t dtype;    /* in: MixrtDtype */
  uint32_t level;    /* out: MixrtSupportLevel */
  /* out: why, in words; required unless level is NATIVE with nothing to say.
   * e.g. "oneDNN 2.6.3 has no f16 matmul for avx512_core_bf16". */
  const char* reason;
  /* out: measured throughput relative to f32 for this op class (1.0 = same);
   * 0 if not measured. */
  double speed_vs_f32;
} MixrtDevice_GetCapability_Args;
MIXRT_DEFINE_STRUCT_TRAITS(MixrtDevice_GetCapability_Args, speed_vs_f32);
typedef MixrtError* MixrtDevice_GetCapability(
    MixrtDevice_GetCapability_Args* args);

/* Since 1.1 (optional): does the device run one op, in one variant, on
 * these dtypes? The host asks before its first launch of each combination
 * and caches the answer per device: an op answered UNSUPPORTED is never
 * launched on this device, but run on a fallback backend (the host copies
 * operands across) or, for the ops the host can compose from others
 * (multi_tensor_norm, scaled_dot_product_attention and its backward,
 * dropout), composed. Without this function (a 1.0 plugin, or NULL) the
 * host uses the class matrix: device_get_capability for
 * MixrtOpClassOf(op) and `dtype`, for floating dtypes. SLOW and NATIVE are
 * both launched; the level is informational here. */
typedef struct MixrtDevice_GetOpSupport_Args {
  size_t struct_size;
  MixrtExtensionBase* ext;
  int32_t device; /* in */
  uint32_t op;    /* in: MixrtOp */
  /* in: the op's kind, 0 for ops without one: MixrtBinaryKind (binary),
   * MixrtUnaryKind (unary, unary_backward), MixrtCompareKind (compare),
   * MixrtReduceKind (reduce), MixrtPoolKind (pool2d and its backward),
   * MixrtActivation (matmul, conv2d). */
  uint32_t variant;
  /* in: MixrtDtype of the first input (of the first output for ops without
   * inputs: fill, arange, random). */
  uint32_t dtype;
  uint32_t out_dtype; /* in: MixrtDtype of the first output. */
  uint32_t level;     /* out: MixrtSupportLevel */
  /* out: why, in words, when not NATIVE (shown in the fallback log). */
  const char* reason;
} MixrtDevice_GetOpSupport_Args;
MIXRT_DEFINE_STRUCT_TRAITS(MixrtDevice_GetOpSupport_Args, reason);
typedef MixrtError* MixrtDevice_GetOpSupport(
    MixrtDevice_GetOpSupport_Args* args);

/* ------------------------------------------------------------------------ */
/* Memory                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct MixrtMemory_Allocate_Args {
  size_t struct_size;
  MixrtExtensionBase* ext;
  int32_t device; /* in */
  uint64_t bytes; /* in: may be 0 (then ptr may be NULL). */
  void* ptr;      /* out: device pointer, aligned to the device alignment. */
} MixrtMemory_Allocate_Args;
MIXRT_DEFINE_STRUCT_TRAITS(MixrtMemory_Allocate_Args, ptr);
/* Failure to allocate returns MIXRT_ERROR_CODE_OUT_OF_MEMORY. */
typedef MixrtError* MixrtMemory_Allocate(MixrtMemory_Allocate_Args* args);

typedef struct MixrtMemory_Free_Args {
  size_t struct_size;
  MixrtExtensionBase* ext;
  int32_t device; /* in */
  void* ptr;      /* in: from memory_allocate on that device, or NULL. */
} MixrtMemory_Free_Args;
MIXRT_DEFINE_STRUCT_TRAITS(MixrtMemory_Free_Args, ptr);
typedef MixrtError* MixrtMemory_Free(MixrtMemory_Free_Args* args);

typedef enum MixrtCopyKind {
  MIXRT_COPY_HOST_TO_DEVICE = 0,
  MIXRT_COPY_DEVICE_TO_HOST = 1,
  MIXRT_COPY_DEVICE_TO_DEVICE = 2 /* Within one device. */
} MixrtCopyKind;

typedef struct MixrtMemory_Copy_Args {
  size_t struct_size;
  MixrtExtensionBase* ext;
  int32_t device; /* in */
  uint32_t kind;  /* in: MixrtCopyKind */
  void* dst;      /* in */
  const void* src;
  uint64_t bytes;
} MixrtMemory_Copy_Args;
MIXRT_DEFINE_STRUCT_TRAITS(MixrtMemory_Copy_Args, bytes);
typedef MixrtError* MixrtMemory_Copy(MixrtMemory_Copy_Args* args);

typedef struct MixrtMemory_Set_Args {
  size_t struct_size;
  MixrtExtensionBase* ext;
  int32_t device;
  void* dst;
  uint8_t value; /* Byte value, as memset. */
  uint64_t bytes;
} MixrtMemory_Set_Args;
MIXRT_DEFINE_STRUCT_TRAITS(MixrtMemory_Set_Args, bytes);
typedef MixrtError* MixrtMemory_Set(MixrtMemory_Set_Args* args);

typedef struct MixrtDevice_Synchronize_Args {
  size_t struct_size;
  MixrtExtensionBase* ext;
  int32_t device;
} MixrtDevice_Synchronize_Args;
MIXRT_DEFINE_STRUCT_TRAITS(MixrtDevice_Synchronize_Args, device);
/* Returns when every call issued for the device has finished. */
typedef MixrtError* MixrtDevice_Synchronize(MixrtDevice_Synchronize_Args* args);

/* ------------------------------------------------------------------------ */
/* Kernels                                                                   */
/* ------------------------------------------------------------------------ */

#define MIXRT_MAX_DIMS 8

/* A view of device memory. `data` already includes the element offset.
 * strides are in elements, >= 0; 0 repeats an element (broadcast). */
typedef struct MixrtTensorDesc {
  size_t struct_size;
  MixrtExtensionBase* ext;
  void* data;
  uint32_t dtype; /* MixrtDtype */
  int32_t ndim;   /* 0 <= ndim <= MIXRT_MAX_DIMS; 0 is a scalar. */
  const int64_t* shape;
  const int64_t* strides;
} MixrtTensorDesc;
MIXRT_DEFINE_STRUCT_TRAITS(MixrtTensorDesc, strides);

/* Attributes: each op documents which struct `attrs` points to. */
typedef struct MixrtScalarAttrs {
  size_t struct_size;
  MixrtExtensionBase* ext;
  double value;
} MixrtScalarAttrs;
MIXRT_DEFINE_STRUCT_TRAITS(MixrtScalarAttrs, value);

typedef struct MixrtArangeAttrs {
  size_t struct_size;
  MixrtExtensionBase* ext;
  double start;
  double step;
} MixrtArangeAttrs;
MIXRT_DEFINE_STRUCT_TRAITS(MixrtArangeAttrs, step);

/* Element i (flattened, row-major) of a random tensor uses the Philox4x32-10
 * block with key = (seed lo, seed hi) and counter = (i / 4 + offset lo,
 * (i / 4 + offset) hi, 0, 0); its word (i % 4) gives u = (word >> 8) * 2^-24
 * in [0, 1). Uniform: low + (high - low) * u. Normal: Box-Muller on the pair
 * (words 0,1 or 2,3 of the block holding i): with u1 = 1 - u(first) in (0, 1]
 * and u2 = u(second), r = sqrt(-2 ln u1); even i -> r cos(2 pi u2), odd i ->
 * r sin(2 pi u2); computed in double, then mean + std * z. */
typedef struct MixrtRandomAttrs {
  size_t struct_size;
  MixrtExtensionBase* ext;
  uint64_t seed;
  uint64_t offset; /* In Philox blocks; the host advances it per call. */
  double a;        /* uniform: low;  normal: mean. */
  double b;        /* uniform: high; normal: std.  */
} MixrtRandomAttrs;
MIXRT_DEFINE_STRUCT_TRAITS(MixrtRandomAttrs, b);

typedef struct MixrtPointwiseAttrs {
  size_t struct_size;
  MixrtExtensionBase* ext;
  uint32_t kind; /* MixrtBinaryKind, MixrtUnaryKind or MixrtCompareKind. */
  double alpha;
  double beta;
} MixrtPointwiseAttrs;
MIXRT_DEFINE_STRUCT_TRAITS(MixrtPointwiseAttrs, beta);

typedef struct MixrtReduceAttrs {
  size_t struct_size;
  MixrtExtensionBase* ext;
  uint32_t kind;      /* MixrtReduceKind */
  uint32_t axes_mask; /* Bit d set: axis d is reduced. */
  double correction;  /* VAR only: 1 for the unbiased estimate. */
} MixrtReduceAttrs;
MIXRT_DEFINE_STRUCT_TRAITS(MixrtReduceAttrs, correction);

typedef struct MixrtMatmulAttrs {
  size_t struct_size;
  MixrtExtensionBase* ext;
  uint32_t activation; /* MixrtActivation, applied after the bias. */
  float beta;          /* 0: overwrite out; 1: accumulate into out. */
} MixrtMatmulAttrs;
MIXRT_DEFINE_STRUCT_TRAITS(MixrtMatmulAttrs, beta);

typedef struct MixrtAxisAttrs {
  size_t struct_size;
  MixrtExtensionBase* ext;
  int32_t axis; /* 0 <= axis < ndim. */
} MixrtAxisAttrs;
MIXRT_DEFINE_STRUCT_TRAITS(MixrtAxisAttrs, axis);

typedef enum MixrtAttentionMaskKind {
  MIXRT_ATTENTION_MASK_NONE = 0,
  MIXRT_ATTENTION_MASK_BOOL = 1,    /* true = attend */
  MIXRT_ATTENTION_MASK_ADDITIVE = 2 /* added to the scaled scores */
} MixrtAttentionMaskKind;

typedef struct MixrtAttentionAttrs {
  size_t struct_size;
  MixrtExtensionBase* ext;
  double scale;       /* multiplies q . k */
  double dropout_p;   /* in [0, 1) */
  uint64_t seed;      /* Philox key for dropout */
  uint64_t offset;    /* Philox counter start for dropout */
  uint32_t is_causal; /* nonzero: query i attends keys j <= i */
  uint32_t mask_kind; /* a MixrtAttentionMaskKind */
} MixrtAttentionAttrs;
MIXRT_DEFINE_STRUCT_TRAITS(MixrtAttentionAttrs, mask_kind);

typedef struct MixrtDropoutAttrs {
  size_t struct_size;
  MixrtExtensionBase* ext;
  double p;        /* in [0, 1) */
  uint64_t seed;   /* Philox key, as MixrtRandomAttrs */
  uint64_t offset; /* Philox counter start, in blocks */
} MixrtDropoutAttrs;
MIXRT_DEFINE_STRUCT_TRAITS(MixrtDropoutAttrs, offset);

typedef struct MixrtNormAttrs {
  size_t struct_size;
  MixrtExtensionBase* ext;
  double eps;
} MixrtNormAttrs;
MIXRT_DEFINE_STRUCT_TRAITS(MixrtNormAttrs, eps);

typedef struct MixrtCrossEntropyAttrs {
  size_t struct_size;
  MixrtExtensionBase* ext;
  int64_t ignore_index;
  double label_smoothing; /* In [0, 1]. */
  /* 1: in0 already holds log-probabilities (nll_loss); no log_softmax. */
  uint32_t log_probs_input;
} MixrtCrossEntropyAttrs;
MIXRT_DEFINE_STRUCT_TRAITS(MixrtCrossEntropyAttrs, log_probs_input);

typedef struct MixrtConvAttrs {
  size_t struct_size;
  MixrtExtensionBase* ext;
  int32_t stride[2];   /* h, w; >= 1 */
  int32_t padding[2];  /* Zero padding on both sides; >= 0 */
  int32_t dilation[2]; /* >= 1 */
  int32_t groups;      /* >= 1, divides C and O. */
  uint32_t activation; /* MixrtActivation, forward only. */
} MixrtConvAttrs;
MIXRT_DEFINE_STRUCT_TRAITS(MixrtConvAttrs, activation);

typedef enum MixrtPoolKind {
  MIXRT_POOL_MAX = 0,
  MIXRT_POOL_AVG = 1 /* Padding counts in the divisor (PyTorch default). */
} MixrtPoolKind;

typedef struct MixrtPoolAttrs {
  size_t struct_size;
  MixrtExtensionBase* ext;
  uint32_t kind; /* MixrtPoolKind */
  int32_t kernel[2];
  int32_t stride[2];
  int32_t padding[2]; /* Max pooling pads with -inf. */
} MixrtPoolAttrs;
MIXRT_DEFINE_STRUCT_TRAITS(MixrtPoolAttrs, padding);

typedef struct MixrtBatchNormAttrs {
  size_t struct_size;
  MixrtExtensionBase* ext;
  uint32_t training; /* 1: batch statistics; 0: running statistics. */
  double momentum;   /* running = (1 - momentum) running + momentum batch. */
  double eps;
} MixrtBatchNormAttrs;
MIXRT_DEFINE_STRUCT_TRAITS(MixrtBatchNormAttrs, eps);

typedef struct MixrtEmbeddingAttrs {
  size_t struct_size;
  MixrtExtensionBase* ext;
  int64_t padding_idx; /* -1: none. */
} MixrtEmbeddingAttrs;
MIXRT_DEFINE_STRUCT_TRAITS(MixrtEmbeddingAttrs, padding_idx);

typedef struct MixrtUpdateScaleAttrs {
  size_t struct_size;
  MixrtExtensionBase* ext;
  double growth_factor;
  double backoff_factor;
  int32_t growth_interval;
} MixrtUpdateScaleAttrs;
MIXRT_DEFINE_STRUCT_TRAITS(MixrtUpdateScaleAttrs, growth_interval);

/* Which optional inputs follow grad in an optimizer step. */
#define MIXRT_OPTIM_HAS_GRAD_SCALE (1u << 0)
#define MIXRT_OPTIM_HAS_FOUND_INF (1u << 1)
/* AdamW only (ABI 1.2): AMSGrad. A fifth output max_exp_avg_sq (f32, the
 * param's shape, in place) keeps the running maximum of exp_avg_sq, and
 * the denominator takes it instead of exp_avg_sq (torch.optim.AdamW's
 * amsgrad=True). A plugin refuses flag bits it does not know: ignoring
 * this one would silently step as plain AdamW. */
#define MIXRT_OPTIM_AMSGRAD (1u << 2)

typedef struct MixrtSgdAttrs {
  size_t struct_size;
  MixrtExtensionBase* ext;
  uint32_t flags; /* MIXRT_OPTIM_HAS_* */
  double lr;
  double momentum; /* 0: no momentum buffer output. */
  double dampening;
  double weight_decay;
  uint32_t nesterov;
  uint32_t first_step; /* The momentum buffer is initialized to the grad. */
} MixrtSgdAttrs;
MIXRT_DEFINE_STRUCT_TRAITS(MixrtSgdAttrs, first_step);

typedef struct MixrtAdamWAttrs {
  size_t struct_size;
  MixrtExtensionBase* ext;
  uint32_t flags; /* MIXRT_OPTIM_HAS_* */
  double lr;
  double beta1;
  double beta2;
  double eps;
  double weight_decay;
} MixrtAdamWAttrs;
MIXRT_DEFINE_STRUCT_TRAITS(MixrtAdamWAttrs, weight_decay);

typedef struct MixrtKernel_Launch_Args {
  size_t struct_size;
  MixrtExtensionBase* ext;
  int32_t device; /* in */
  uint32_t op;    /* in: MixrtOp */
  int32_t num_inputs;
  const MixrtTensorDesc* inputs; /* in: num_inputs descriptors. */
  int32_t num_outputs;
  const MixrtTensorDesc* outputs; /* in: written by the kernel. */
  const void* attrs; /* in: op-specific struct (starts with struct_size). */
} MixrtKernel_Launch_Args;
MIXRT_DEFINE_STRUCT_TRAITS(MixrtKernel_Launch_Args, attrs);
/* Launches one op. An op or dtype the plugin does not implement returns
 * MIXRT_ERROR_CODE_UNIMPLEMENTED. Outputs never alias inputs unless the op
 * says so. */
typedef MixrtError* MixrtKernel_Launch(MixrtKernel_Launch_Args* args);

/* Since 1.1 (optional: all three functions or none). A kernel graph:
 * launches fixed once (op, attributes, dtypes, shapes, strides, and for
 * each tensor the buffer and byte offset it lives at) and run many times
 * with only the buffers' base addresses given anew: what the compiler's
 * "reduce-overhead" mode replays. A run does exactly what launching the
 * steps in order would, on the device's stream, asynchronously as
 * launches are. A plugin checks and prepares each step once, at creation:
 * the CUDA plugin captures a CUDA graph and replays it (captured again when
 * base addresses change); a host plugin skips per-launch checks, dispatch
 * and per-shape setup. Creation copies everything it needs (the caller's
 * arrays, descriptors and attribute structs may go right after); a step the
 * plugin cannot put in a graph makes creation fail with UNIMPLEMENTED, and
 * the host launches one by one instead. */
typedef struct MixrtKernelGraph MixrtKernelGraph; /* Opaque, plugin-owned. */
typedef struct MixrtFusedKernel MixrtFusedKernel; /* Opaque, plugin-owned. */

typedef struct MixrtKernelGraphStep {
  size_t struct_size;
  MixrtExtensionBase* ext;
  uint32_t op; /* MixrtOp */
  int32_t num_inputs;
  const MixrtTensorDesc* inputs; /* `data` is ignored: see input_buffers. */
  int32_t num_outputs;
  const MixrtTensorDesc* outputs;
  /* Per input and output: the buffer (0 <= buffer < num_buffers) and the
   * byte offset from its base where the tensor's element 0 is. */
  const int32_t* input_buffers;
  const uint64_t* input_offsets;
  const int32_t* output_buffers;
  const uint64_t* output_offsets;
  const void* attrs; /* As for kernel_launch; copied (struct_size bytes). */
  /* When not NULL, the step runs this fused kernel (made by this plugin's
   * fusion_compile, alive as long as the graph) instead of `op`, whose
   * value is then ignored, as are attrs: input k is the kernel's value
   * fused_values[k], output k its value fused_values[num_inputs + k]
   * (every value its run needs, as MixrtFusedKernel_Run_Args says). */
  MixrtFusedKernel* fused_kernel;
  const int32_t* fused_values;
} MixrtKernelGraphStep;
MIXRT_DEFINE_STRUCT_TRAITS(MixrtKernelGraphStep, attrs);

typedef struct MixrtKernelGraph_Create_Args {
  size_t struct_size;
  MixrtExtensionBase* ext;
  int32_t device;                    /* in */
  int32_t num_buffers;               /* in */
  int32_t num_steps;                 /* in */
  const MixrtKernelGraphStep* steps; /* in */
  MixrtKernelGraph* graph;           /* out */
} MixrtKernelGraph_Create_Args;
MIXRT_DEFINE_STRUCT_TRAITS(MixrtKernelGraph_Create_Args, graph);
/* Bad steps are refused as kernel_launch refuses them, naming the step. */
typedef MixrtError* MixrtKernelGraph_Create(MixrtKernelGraph_Create_Args* args);

typedef struct MixrtKernelGraph_Run_Args {
  size_t struct_size;
  MixrtExtensionBase* ext;
  MixrtKernelGraph* graph; /* in */
  /* in: num_buffers base addresses on the graph's device (NULL only for a
   * buffer no step with elements uses). */
  void* const* buffers;
  /* out (1.1): on an error, the index of the step that failed (the steps
   * before it have run), or -1 when no step did (the graph itself). The
   * host sets -1 before the call. */
  int32_t failed_step;
} MixrtKernelGraph_Run_Args;
MIXRT_DEFINE_STRUCT_TRAITS(MixrtKernelGraph_Run_Args, buffers);
/* An error names the step and its op in its message ("step 3 (matmul):
 * ...") for people, and its index in failed_step for the host. */
typedef MixrtError* MixrtKernelGraph_Run(MixrtKernelGraph_Run_Args* args);

typedef struct MixrtKernelGraph_Destroy_Args {
  size_t struct_size;
  MixrtExtensionBase* ext;
  MixrtKernelGraph* graph; /* in: may be NULL */
} MixrtKernelGraph_Destroy_Args;
typedef void MixrtKernelGraph_Destroy(MixrtKernelGraph_Destroy_Args* args);

/* Since 1.1 (optional: all four functions or none). Fusion: the host
 * offers a subgraph of a compiled graph; the plugin claims groups of its
 * nodes and compiles each group into a kernel it owns, which runs the
 * group's nodes as one (one pass over memory, an epilogue, generated
 * code: the plugin's choice). What it leaves unclaimed the host launches
 * op by op, as it runs everything for a plugin without these functions.
 *
 * The subgraph is values and nodes. A value is a tensor: its descriptor
 * (`data` NULL; shape and strides as traced), per dim an optional symbol
 * (a size known only when the kernel runs), and flags. A value is written
 * by exactly one node of the subgraph or by none (then it is an INPUT),
 * never partly. A value may view another value's memory (`view_of`): a
 * transposed or broadcast read of it, whose element 0 is `view_offset`
 * elements from the viewed value's; a view is never written. A group that
 * writes a value and reads it through a view must store it (the view
 * reads that memory), except through a plain reshape: a view with
 * view_offset 0, the same dtype and element count, both contiguous. Its
 * elements are the value's in order, so the reader takes the value
 * itself and the host gives the value no memory unless something else
 * needs it stored. Nodes are in
 * an order that respects their data dependences, and each reads and writes
 * values as kernel_launch's op with these descriptors would. */
#define MIXRT_FUSION_VALUE_INPUT (1u << 0) /* Written by no node here. */
/* Read after the subgraph (a result, an activation saved for a backward):
 * a group writing it must store it. */
#define MIXRT_FUSION_VALUE_OUTPUT (1u << 1)
/* An INPUT whose contents change only between runs, each change announced
 * by fused_kernel_set_weight_version (a model's parameters): a kernel may
 * prepare from its contents when it runs (a packed copy), never when it
 * compiles, and keep what it prepared while the version stands. */
#define MIXRT_FUSION_VALUE_WEIGHT (1u << 2)

typedef struct MixrtFusionValue {
  size_t struct_size;
  MixrtExtensionBase* ext;
  MixrtTensorDesc desc; /* data is NULL. */
  /* NULL (every dim static), or per dim: -1 for a static size, else the
   * symbol (0 <= s < num_symbols) whose run-time value the dim is. */
  const int32_t* dim_symbols;
  uint32_t flags;      /* MIXRT_FUSION_VALUE_* */
  int32_t view_of;     /* -1, or the value whose memory this one reads. */
  int64_t view_offset; /* Elements from view_of's element 0. */
} MixrtFusionValue;
MIXRT_DEFINE_STRUCT_TRAITS(MixrtFusionValue, view_offset);

typedef struct MixrtFusionNode {
  size_t struct_size;
  MixrtExtensionBase* ext;
  uint32_t op;       /* MixrtOp */
  const void* attrs; /* As for kernel_launch. */
  int32_t num_inputs;
  const int32_t* inputs; /* Value indexes. */
  int32_t num_outputs;
  const int32_t* outputs; /* Value indexes; none is a view. */
} MixrtFusionNode;
MIXRT_DEFINE_STRUCT_TRAITS(MixrtFusionNode, outputs);

typedef struct MixrtFusionGraph {
  size_t struct_size;
  MixrtExtensionBase* ext;
  int32_t num_values;
  const MixrtFusionValue* values;
  int32_t num_nodes;
  const MixrtFusionNode* nodes;
  int32_t num_symbols;
} MixrtFusionGraph;
MIXRT_DEFINE_STRUCT_TRAITS(MixrtFusionGraph, num_symbols);

typedef struct MixrtFusion_Claim_Args {
  size_t struct_size;
  MixrtExtensionBase* ext;
  int32_t device;                /* in */
  const MixrtFusionGraph* graph; /* in */
  /* out: num_nodes entries (the host's array): -1 for a node left to the
   * host, else its group, 0 <= group < num_groups. */
  int32_t* group_of_node;
  int32_t num_groups; /* out */
} MixrtFusion_Claim_Args;
MIXRT_DEFINE_STRUCT_TRAITS(MixrtFusion_Claim_Args, num_groups);
/* The host runs each group as one unit where all its inputs are ready. A
 * group that would have to run both before and after some node it left out
 * (a path through a launch the graph does not show, which the plugin could
 * not see) is split: the nodes no such path reaches stay the group, the
 * rest become a group numbered from num_groups up, split again as needed;
 * a piece of one node runs op by op, and compile is asked for each other
 * piece with group_of_node as the host split it. A group (or piece) whose
 * compile fails, or groups that depend on each other in a cycle, the host
 * refuses: it runs their nodes op by op and says why in its log. A plugin
 * claiming nothing answers num_groups 0. */
typedef MixrtError* MixrtFusion_Claim(MixrtFusion_Claim_Args* args);

typedef struct MixrtFusion_Compile_Args {
  size_t struct_size;
  MixrtExtensionBase* ext;
  int32_t device;                /* in */
  const MixrtFusionGraph* graph; /* in: the graph claim saw. */
  const int32_t* group_of_node;  /* in: as claim answered, or split. */
  int32_t group;                 /* in */
  MixrtFusedKernel* kernel;      /* out */
  /* out: what the kernel is, in words, for the host's log ("fused loop:
   * unary_backward, reduce"); valid until fused_kernel_destroy. */
  const char* description;
  /* out (1.2): bytes of device memory the kernel needs for itself across
   * its runs (intermediates a group keeps to itself, a reduction's
   * partials); 0: none. The host allocates them from its allocator (so
   * they count in its memory statistics and its out-of-memory retry) and
   * hands them over once with fused_kernel_set_scratch, before any run; a
   * kernel asking for scratch from a plugin without that entry is refused
   * (its nodes run op by op). Written only when struct_size covers it: a
   * 1.1 host has no room for it, and a plugin whose kernel needs scratch
   * then fails the compile. */
  uint64_t scratch_bytes;
} MixrtFusion_Compile_Args;
MIXRT_DEFINE_STRUCT_TRAITS(MixrtFusion_Compile_Args, description);
/* Copies everything it needs: the graph may go right after. */
typedef MixrtError* MixrtFusion_Compile(MixrtFusion_Compile_Args* args);

typedef struct MixrtFusedKernel_Run_Args {
  size_t struct_size;
  MixrtExtensionBase* ext;
  MixrtFusedKernel* kernel; /* in */
  /* in: num_values addresses (the compiled graph's), set for every value
   * the group reads but no node of it writes, and for every value it
   * writes that is OUTPUT or read by a node outside the group (directly or
   * through a view); the others may be NULL: the group keeps them to
   * itself. */
  void* const* value_data;
  const int64_t* symbol_sizes; /* in: num_symbols sizes (NULL if none). */
} MixrtFusedKernel_Run_Args;
MIXRT_DEFINE_STRUCT_TRAITS(MixrtFusedKernel_Run_Args, symbol_sizes);
/* Asynchronous on the device's stream, as kernel_launch is. */
typedef MixrtError* MixrtFusedKernel_Run(MixrtFusedKernel_Run_Args* args);

typedef struct MixrtFusedKernel_Destroy_Args {
  size_t struct_size;
  MixrtExtensionBase* ext;
  MixrtFusedKernel* kernel; /* in: may be NULL */
} MixrtFusedKernel_Destroy_Args;
typedef void MixrtFusedKernel_Destroy(MixrtFusedKernel_Destroy_Args* args);

/* 1.2, optional (NULL when no kernel asks for scratch_bytes): hands a
 * kernel the memory it asked for at its compile, device memory of its
 * device from memory_allocate (aligned as the device says). The kernel's
 * to use in every later run, directly or as a kernel graph's step, until
 * fused_kernel_destroy, after which the host frees it. Called once per
 * kernel, before its first run. */
typedef struct MixrtFusedKernel_SetScratch_Args {
  size_t struct_size;
  MixrtExtensionBase* ext;
  MixrtFusedKernel* kernel; /* in */
  void* scratch;            /* in */
  uint64_t bytes;           /* in: at least the compile's scratch_bytes */
} MixrtFusedKernel_SetScratch_Args;
MIXRT_DEFINE_STRUCT_TRAITS(MixrtFusedKernel_SetScratch_Args, bytes);
typedef MixrtError* MixrtFusedKernel_SetScratch(
    MixrtFusedKernel_SetScratch_Args* args);

/* Since 1.1 (optional, with the fusion functions): before a run of
 * `kernel` that reads WEIGHT value `value`, the host says which version of
 * its contents the run sees: a number that changes whenever the contents
 * do, said again only after a change (and once before the first run). A
 * kernel never told a weight's version keeps nothing it prepared from it
 * across runs.
 *
 * keeps_copy (out; the host sets it 0, a plugin writes it only where
 * struct_size covers it): 1 promises that the kernel's first run with
 * this version prepares all it needs of the value (a packed copy) and that
 * until another version is told, no later run reads the value's memory.
 * The host may then release memory that holds the value for this kernel
 * alone (autocast's kept bf16 copy of a weight) after that run and pass
 * NULL, or an address it must not read, until it tells a new version. */
typedef struct MixrtFusedKernel_SetWeightVersion_Args {
  size_t struct_size;
  MixrtExtensionBase* ext;
  MixrtFusedKernel* kernel; /* in */
  int32_t value;            /* in: a WEIGHT value of the kernel's graph */
  uint64_t version;         /* in */
  uint32_t keeps_copy;      /* out */
} MixrtFusedKernel_SetWeightVersion_Args;
MIXRT_DEFINE_STRUCT_TRAITS(MixrtFusedKernel_SetWeightVersion_Args, version);
typedef MixrtError* MixrtFusedKernel_SetWeightVersion(
    MixrtFusedKernel_SetWeightVersion_Args* args);

/* ------------------------------------------------------------------------ */
/* Since 1.2: memory, profiling ranges, precisions beyond the storage dtypes */
/* ------------------------------------------------------------------------ */

/* Since 1.2 (optional): the device's memory, as its driver reports it now
 * (for a host-memory device: the machine's). `mixrt info` shows it; a
 * caller may size batches or caches by it. */
typedef struct MixrtDevice_GetMemoryInfo_Args {
  size_t struct_size;
  MixrtExtensionBase* ext;
  int32_t device;       /* in */
  uint64_t free_bytes;  /* out: what can still be allocated. */
  uint64_t total_bytes; /* out */
} MixrtDevice_GetMemoryInfo_Args;
MIXRT_DEFINE_STRUCT_TRAITS(MixrtDevice_GetMemoryInfo_Args, total_bytes);
typedef MixrtError* MixrtDevice_GetMemoryInfo(
    MixrtDevice_GetMemoryInfo_Args* args);

typedef enum MixrtRangePhase {
  MIXRT_RANGE_BEGIN = 0,
  MIXRT_RANGE_END = 1
} MixrtRangePhase;

/* Since 1.2 (optional): profiling ranges for a vendor's trace viewer (an
 * NVTX or roctx range, a timeline marker). While the host's profiling is on
 * (MIXRT_PLUGIN_PROFILING=1, or mixrt::SetPluginProfiling(true)) it calls
 * this right before and right after each launch it makes on the device
 * (kernel_launch, a fused kernel's run, a kernel graph's run), with the
 * same name and id for both: "matmul f32", "fused: <description>",
 * "graph: N launches". `name` is valid during the call only. Never called
 * while profiling is off. */
typedef struct MixrtProfiler_Range_Args {
  size_t struct_size;
  MixrtExtensionBase* ext;
  int32_t device;   /* in */
  uint32_t phase;   /* in: MixrtRangePhase */
  uint64_t id;      /* in: pairs a BEGIN with its END. */
  const char* name; /* in */
} MixrtProfiler_Range_Args;
MIXRT_DEFINE_STRUCT_TRAITS(MixrtProfiler_Range_Args, name);
typedef void MixrtProfiler_Range(MixrtProfiler_Range_Args* args);

/* Precisions a device may compute in or store beyond MixrtDtype's: TF32
 * (f32 storage, a 10-bit mantissa inside matmuls and convolutions) and the
 * two fp8 storage formats. Appended only. */
typedef enum MixrtPrecision {
  MIXRT_PRECISION_TF32 = 0,
  MIXRT_PRECISION_FP8_E4M3 = 1, /* 4 exponent bits, 3 mantissa; no inf. */
  MIXRT_PRECISION_FP8_E5M2 = 2, /* 5 exponent bits, 2 mantissa. */
  MIXRT_PRECISION_COUNT = 3
} MixrtPrecision;

/* Since 1.2 (optional): the capability matrix's cell for a precision of
 * MixrtPrecision in one op class, as device_get_capability answers for the
 * storage dtypes. Without the function every precision is unsupported. */
typedef struct MixrtDevice_GetPrecisionSupport_Args {
  size_t struct_size;
  MixrtExtensionBase* ext;
  int32_t device;      /* in */
  uint32_t op_class;   /* in: MixrtOpClass */
  uint32_t precision;  /* in: MixrtPrecision */
  uint32_t level;      /* out: MixrtSupportLevel */
  const char* reason;  /* out: as device_get_capability's. */
  double speed_vs_f32; /* out: measured, 0 if not. */
} MixrtDevice_GetPrecisionSupport_Args;
MIXRT_DEFINE_STRUCT_TRAITS(MixrtDevice_GetPrecisionSupport_Args, speed_vs_f32);
typedef MixrtError* MixrtDevice_GetPrecisionSupport(
    MixrtDevice_GetPrecisionSupport_Args* args);

/* ------------------------------------------------------------------------ */
/* The table                                                                 */
/* ------------------------------------------------------------------------ */

typedef struct MixrtPluginApi {
  size_t struct_size;
  MixrtExtensionBase* ext;
  uint32_t abi_major; /* MIXRT_PLUGIN_API_MAJOR the plugin was built with. */
  uint32_t abi_minor;

  MixrtError_Destroy* error_destroy;
  MixrtError_Message* error_message;
  MixrtError_GetCode* error_get_code;

  MixrtPlugin_GetInfo* plugin_get_info;
  MixrtPlugin_Initialize* plugin_initialize;
  MixrtPlugin_Shutdown* plugin_shutdown; /* optional (NULL) */

  MixrtDevice_Count* device_count;
  MixrtDevice_GetProperties* device_get_properties;
  MixrtDevice_GetCapability* device_get_capability;
  MixrtDevice_Synchronize* device_synchronize;

  MixrtMemory_Allocate* memory_allocate;
  MixrtMemory_Free* memory_free;
  MixrtMemory_Copy* memory_copy;
  MixrtMemory_Set* memory_set; /* optional (NULL): host fills via copies. */

  MixrtKernel_Launch* kernel_launch;
  /* Version 1.0 ends here. Append only. */

  MixrtDevice_GetOpSupport* device_get_op_support; /* 1.1, optional (NULL) */
  /* 1.1, optional (all three NULL): kernel graphs. */
  MixrtKernelGraph_Create* kernel_graph_create;
  MixrtKernelGraph_Run* kernel_graph_run;
  MixrtKernelGraph_Destroy* kernel_graph_destroy;
  /* 1.1, optional (all four NULL): fusion. */
  MixrtFusion_Claim* fusion_claim;
  MixrtFusion_Compile* fusion_compile;
  MixrtFusedKernel_Run* fused_kernel_run;
  MixrtFusedKernel_Destroy* fused_kernel_destroy;
  /* 1.1, optional (NULL): weight versions for fused kernels. */
  MixrtFusedKernel_SetWeightVersion* fused_kernel_set_weight_version;
  /* Version 1.1 ends here. */

  MixrtDevice_GetMemoryInfo* device_get_memory_info; /* 1.2, optional */
  MixrtProfiler_Range* profiler_range;               /* 1.2, optional */
  MixrtDevice_GetPrecisionSupport* device_get_precision_support; /* 1.2 */
  MixrtFusedKernel_SetScratch* fused_kernel_set_scratch; /* 1.2, optional */
} MixrtPluginApi;

/* The smallest table a 1.x host accepts. */
#define MIXRT_PLUGIN_API_STRUCT_SIZE_1_0 \
  MIXRT_STRUCT_SIZE_THROUGH(MixrtPluginApi, kernel_launch)
/* The table as ABI 1.1 laid it out. */
#define MIXRT_PLUGIN_API_STRUCT_SIZE_1_1 \
  MIXRT_STRUCT_SIZE_THROUGH(MixrtPluginApi, fused_kernel_set_weight_version)

typedef const MixrtPluginApi* MixrtPluginEntryFn(uint32_t host_major,
                                                 uint32_t host_minor);
typedef int32_t MixrtPluginScoreFn(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MIXRT_PLUGIN_API_H_ */
