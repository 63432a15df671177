// Per-element functors of the creation and pointwise ops. Each is a plain
// struct called as f(i) for every linear output index i: the CUDA/HIP
// grid-stride kernel calls it on the device, the unit tests call it in a host
// loop and compare with the reference plugin. Floating math runs in f32 (the
// ABI's "at least f32"), integer math in int64 with two's-complement wrap.
#ifndef MIXRT_BACKENDS_GPU_ELEMENTWISE_FUNCTORS_H_
#define MIXRT_BACKENDS_GPU_ELEMENTWISE_FUNCTORS_H_

#include <cstdint>

#include "backends/gpu/device_tensor.h"
#include "plugins/sdk/philox.h"
#include "plugins/sdk/pointwise_math.h"

namespace mixrt::gpu {

MIXRT_HOST_DEVICE inline bool IsFloating(uint32_t dtype) {
  return dtype == MIXRT_DTYPE_F32 || dtype == MIXRT_DTYPE_F16 ||
         dtype == MIXRT_DTYPE_BF16;
}

// Stores a value computed in double (fill, arange, random) as the reference
// plugin does: rounded once to f32 for floating outputs, truncated to int64
// for integer ones.
MIXRT_HOST_DEVICE inline void StoreGenerated(const DeviceTensor& out, int64_t i,
                                             double v) {
  if (IsFloating(out.dtype)) {
    out.StoreFloat(out.Offset(i), static_cast<float>(v));
  } else {
    out.StoreInt(out.Offset(i), static_cast<int64_t>(v));
  }
}

struct FillFunctor {
  DeviceTensor out;
  double value;
  MIXRT_HOST_DEVICE void operator()(int64_t i) const {
    StoreGenerated(out, i, value);
  }
};

struct ArangeFunctor {
  DeviceTensor out;
  double start;
  double step;
  MIXRT_HOST_DEVICE void operator()(int64_t i) const {
    StoreGenerated(out, i, start + static_cast<double>(i) * step);
  }
};

struct RandomFunctor {
  DeviceTensor out;
  MixrtRandomAttrs attrs;
  bool normal;
  MIXRT_HOST_DEVICE void operator()(int64_t i) const {
    const auto index = static_cast<uint64_t>(i);
    const double v = normal ? sdk::PhiloxNormal(attrs.seed, attrs.offset, index,
                                                attrs.a, attrs.b)
                            : sdk::PhiloxUniform(attrs.seed, attrs.offset,
                                                 index, attrs.a, attrs.b);
    StoreGenerated(out, i, v);
  }
};

// MIXRT_OP_DROPOUT: the random functor's unit, the keep test and the scale
// in f32 per element (as the CPU plugin: the same bits).
struct DropoutFunctor {
  DeviceTensor out;
  DeviceTensor x;
  MixrtDropoutAttrs attrs;
  MIXRT_HOST_DEVICE void operator()(int64_t i) const {
    const double unit = sdk::PhiloxUniform(attrs.seed, attrs.offset,
                                           static_cast<uint64_t>(i), 0, 1);
    const float kept = static_cast<float>(1.0 / (1.0 - attrs.p));
    const float factor = sdk::DropoutKeeps(unit, attrs.p) ? kept : 0.0f;
    out.StoreFloat(out.Offset(i), x.LoadFloat(x.Offset(i)) * factor);
  }
};

// Any dtype pair; the input may be strided (it is how the host makes tensors
// contiguous).
struct CopyFunctor {
  DeviceTensor out;
  DeviceTensor in;
  MIXRT_HOST_DEVICE void operator()(int64_t i) const {
    if (IsFloating(in.dtype) || IsFloating(out.dtype)) {
      out.StoreFloat(out.Offset(i), in.LoadFloat(in.Offset(i)));
    } else {
      out.StoreInt(out.Offset(i), in.LoadInt(in.Offset(i)));
    }
  }
};

// For integer division and powers the divisor is checked in the same pass:
// a zero divisor (or negative exponent) sets *bad_input, which the plugin
// reads back and turns into the ABI's error.
struct BinaryFunctor {
  DeviceTensor out;
  DeviceTensor x;
  DeviceTensor y;
  MixrtBinaryKind kind;
  int32_t* bad_input;  // Integer ops only; may be null otherwise.
  MIXRT_HOST_DEVICE void operator()(int64_t i) const {
    if (IsFloating(out.dtype)) {
      out.StoreFloat(out.Offset(i),
                     sdk::ApplyBinary<float>(kind, x.LoadFloat(x.Offset(i)),
                                             y.LoadFloat(y.Offset(i))));
      return;
    }
    const int64_t b = y.LoadInt(y.Offset(i));
    if ((kind == MIXRT_BINARY_DIV && b == 0) ||
        (kind == MIXRT_BINARY_POW && b < 0)) {
      if (bad_input != nullptr) *bad_input = 1;
      out.StoreInt(out.Offset(i), 0);
      return;
    }
    out.StoreInt(out.Offset(i),
                 sdk::ApplyIntBinary(kind, x.LoadInt(x.Offset(i)), b));
  }
};

// Forward (grad absent) or backward: out = grad * f'(x).
struct UnaryFunctor {
  DeviceTensor out;
  DeviceTensor x;
  DeviceTensor grad;  // Backward only.
  MixrtUnaryKind kind;
  float alpha;
  float beta;
  bool backward;
  MIXRT_HOST_DEVICE void operator()(int64_t i) const {
    if (!IsFloating(out.dtype)) {  // NEG and ABS on integers.
      const auto v = static_cast<uint64_t>(x.LoadInt(x.Offset(i)));
      const bool negate =
          kind == MIXRT_UNARY_NEG || static_cast<int64_t>(v) < 0;
      out.StoreInt(out.Offset(i), static_cast<int64_t>(negate ? 0 - v : v));
      return;
    }
    const float v = x.LoadFloat(x.Offset(i));
    const float r = backward
                        ? grad.LoadFloat(grad.Offset(i)) *
                              sdk::UnaryDerivative<float>(kind, v, alpha, beta)
                        : sdk::ApplyUnary<float>(kind, v, alpha, beta);
    out.StoreFloat(out.Offset(i), r);
  }
};

struct CompareFunctor {
  DeviceTensor out;  // bool
  DeviceTensor x;
  DeviceTensor y;
  MixrtCompareKind kind;
  MIXRT_HOST_DEVICE void operator()(int64_t i) const {
    const bool r =
        IsFloating(x.dtype)
            ? sdk::ApplyCompare<float>(kind, x.LoadFloat(x.Offset(i)),
                                       y.LoadFloat(y.Offset(i)))
            : sdk::ApplyCompare<int64_t>(kind, x.LoadInt(x.Offset(i)),
                                         y.LoadInt(y.Offset(i)));
    out.StoreInt(out.Offset(i), r ? 1 : 0);
  }
};

struct WhereFunctor {
  DeviceTensor out;
  DeviceTensor condition;  // bool
  DeviceTensor x;
  DeviceTensor y;
  MIXRT_HOST_DEVICE void operator()(int64_t i) const {
    const bool pick_x = condition.LoadInt(condition.Offset(i)) != 0;
    if (IsFloating(out.dtype)) {
      out.StoreFloat(out.Offset(i), pick_x ? x.LoadFloat(x.Offset(i))
                                           : y.LoadFloat(y.Offset(i)));
    } else {
      out.StoreInt(out.Offset(i),
                   pick_x ? x.LoadInt(x.Offset(i)) : y.LoadInt(y.Offset(i)));
    }
  }
};

}  // namespace mixrt::gpu

#endif  // MIXRT_BACKENDS_GPU_ELEMENTWISE_FUNCTORS_H_
