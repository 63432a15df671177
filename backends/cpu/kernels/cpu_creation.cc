// fill, copy (casts, strided), arange, random: parallel loops.
#include "backends/cpu/kernels/cpu_creation.h"

#include <array>
#include <cstring>
#include <functional>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "backends/cpu/kernels/dense_call.h"
#include "backends/cpu/kernels/float_rows.h"
#include "backends/cpu/kernels/parallel.h"
#include "backends/cpu/kernels/philox_rows.h"
#include "mixrt/op_names.h"
#include "mixrt/status_macros.h"
#include "plugins/sdk/philox.h"
#include "plugins/sdk/tensor_ref.h"

namespace mixrt::cpu {
namespace {

using sdk::TensorRef;

constexpr int64_t kChunk = 1024;
constexpr int64_t kGrain = 1 << 15;

// out[i] = value_at(i) (a float) over a dense floating output.
// rows(first, n, buffer) fills buffer[0 .. n) with elements first ..
// first + n of a dense floating output.
template <typename Rows>
void GenerateFloatRows(const TensorRef& out, Rows&& rows) {
  ParallelFor(out.numel(), kGrain, [&](int64_t begin, int64_t end) {
    float buffer[kChunk];
    for (int64_t b = begin; b < end; b += kChunk) {
      const int64_t n = std::min(kChunk, end - b);
      rows(b, n, buffer);
      StoreRow(buffer, n, out.data(), out.dtype(), b);
    }
  });
}

template <typename Fn>
void GenerateFloat(const TensorRef& out, Fn&& value_at) {
  GenerateFloatRows(out, [&](int64_t first, int64_t n, float* buffer) {
    for (int64_t i = 0; i < n; ++i) buffer[i] = value_at(first + i);
  });
}

absl::Status Fill(const sdk::KernelCall& call, const TensorRef& out) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtScalarAttrs>());
  const double value = attrs->value;
  if (sdk::IsFloatingDtype(out.dtype())) {
    const float v = static_cast<float>(value);
    GenerateFloat(out, [v](int64_t) { return v; });
  } else {
    const auto v = static_cast<int64_t>(value);
    for (int64_t i = 0; i < out.numel(); ++i) out.StoreInt(i, v);
  }
  return absl::OkStatus();
}

absl::Status Copy(const TensorRef& in, const TensorRef& out) {
  if (!in.same_shape(out)) {
    return absl::InvalidArgumentError("copy: shapes differ");
  }
  const bool float_path =
      sdk::IsFloatingDtype(in.dtype()) || sdk::IsFloatingDtype(out.dtype());
  if (in.dtype() == out.dtype()) {
    StridedCopy(in, out);  // Also the transposes behind contiguous().
    return absl::OkStatus();
  }
  if (float_path && in.is_contiguous() && out.is_contiguous()) {
    ParallelFor(out.numel(), kGrain, [&](int64_t begin, int64_t end) {
      float buffer[kChunk];
      for (int64_t b = begin; b < end; b += kChunk) {
        const int64_t n = std::min(kChunk, end - b);
        // An f32 source is read in place (autocast's weight casts).
        StoreRow(FloatsAt(in.data(), in.dtype(), b, n, buffer), n, out.data(),
                 out.dtype(), b);
      }
    });
    return absl::OkStatus();
  }
  sdk::ForEachElement<2>(out.ndim(), out.shape(), {in.strides(), out.strides()},
                         [&](const std::array<int64_t, 2>& o) {
                           if (float_path) {
                             out.StoreFloat(o[1], in.LoadFloat(o[0]));
                           } else {
                             out.StoreInt(o[1], in.LoadInt(o[0]));
                           }
                         });
  return absl::OkStatus();
}

}  // namespace

namespace {

absl::StatusOr<MixrtRandomAttrs> RandomAttrs(const sdk::KernelCall& call,
                                             const TensorRef& out) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtRandomAttrs>());
  if (!sdk::IsFloatingDtype(out.dtype())) {
    return absl::InvalidArgumentError("random ops need a floating output");
  }
  return *attrs;
}

absl::Status CheckTensorCount(const sdk::KernelCall& call, size_t inputs) {
  if (call.inputs.size() != inputs || call.outputs.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(MixrtOpName(call.op), ": wrong number of tensors"));
  }
  return absl::OkStatus();
}

// The generating ops index the flattened output: `generate` fills a dense
// one.
absl::Status OnDenseOutput(
    const sdk::KernelCall& call,
    const std::function<absl::Status(const TensorRef& out)>& generate) {
  MIXRT_RETURN_IF_ERROR(CheckTensorCount(call, 0));
  return RunDense(call, [&](const sdk::KernelCall& dense) {
    return generate(dense.outputs[0]);
  });
}

}  // namespace

absl::Status RunCopy(const sdk::KernelCall& call) {
  MIXRT_RETURN_IF_ERROR(CheckTensorCount(call, 1));
  return Copy(call.inputs[0], call.outputs[0]);
}

absl::Status RunFill(const sdk::KernelCall& call) {
  return OnDenseOutput(call,
                       [&](const TensorRef& out) { return Fill(call, out); });
}

absl::Status RunArange(const sdk::KernelCall& call) {
  return OnDenseOutput(call, [&](const TensorRef& out) -> absl::Status {
    MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtArangeAttrs>());
    const double start = attrs->start, step = attrs->step;
    if (sdk::IsFloatingDtype(out.dtype())) {
      GenerateFloat(out, [&](int64_t i) {
        return static_cast<float>(start + static_cast<double>(i) * step);
      });
    } else {
      for (int64_t i = 0; i < out.numel(); ++i) {
        out.StoreInt(
            i, static_cast<int64_t>(start + static_cast<double>(i) * step));
      }
    }
    return absl::OkStatus();
  });
}

absl::Status RunRandomUniform(const sdk::KernelCall& call) {
  return OnDenseOutput(call, [&](const TensorRef& out) -> absl::Status {
    MIXRT_ASSIGN_OR_RETURN(const MixrtRandomAttrs a, RandomAttrs(call, out));
    GenerateFloatRows(out, [&](int64_t first, int64_t n, float* buffer) {
      PhiloxUnitsRow(a.seed, a.offset, static_cast<uint64_t>(first), n, buffer);
      for (int64_t i = 0; i < n; ++i) {
        buffer[i] = static_cast<float>(a.a + (a.b - a.a) * buffer[i]);
      }
    });
    return absl::OkStatus();
  });
}

absl::Status RunRandomNormal(const sdk::KernelCall& call) {
  return OnDenseOutput(call, [&](const TensorRef& out) -> absl::Status {
    MIXRT_ASSIGN_OR_RETURN(const MixrtRandomAttrs a, RandomAttrs(call, out));
    GenerateFloat(out, [&](int64_t i) {
      return static_cast<float>(sdk::PhiloxNormal(
          a.seed, a.offset, static_cast<uint64_t>(i), a.a, a.b));
    });
    return absl::OkStatus();
  });
}

}  // namespace mixrt::cpu
