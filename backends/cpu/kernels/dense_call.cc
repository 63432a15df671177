#include "backends/cpu/kernels/dense_call.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "backends/cpu/kernels/parallel.h"
#include "plugins/sdk/tensor_ref.h"

namespace mixrt::cpu {

namespace {

template <typename T>
void CopyRow(const T* from, int64_t step, int64_t n, T* to) {
  for (int64_t j = 0; j < n; ++j) to[j] = from[j * step];
}

// n elements of `bytes` each, `step` elements apart, into a dense row.
void CopyStridedRow(const uint8_t* from, int64_t step, int64_t n, size_t bytes,
                    uint8_t* to) {
  switch (bytes) {
    case 1:
      return CopyRow(from, step, n, to);
    case 2:
      return CopyRow(reinterpret_cast<const uint16_t*>(from), step, n,
                     reinterpret_cast<uint16_t*>(to));
    case 4:
      return CopyRow(reinterpret_cast<const uint32_t*>(from), step, n,
                     reinterpret_cast<uint32_t*>(to));
    default:
      return CopyRow(reinterpret_cast<const uint64_t*>(from), step, n,
                     reinterpret_cast<uint64_t*>(to));
  }
}

}  // namespace

void StridedCopy(const sdk::TensorRef& src, const sdk::TensorRef& dst) {
  const size_t bytes = DtypeBytes(src.dtype());
  const auto* s = static_cast<const uint8_t*>(src.data());
  auto* d = static_cast<uint8_t*>(dst.data());
  const int nd = src.ndim();
  const int64_t inner = nd > 0 ? src.dim(nd - 1) : 0;
  // Destination rows contiguous: rows in parallel, one memcpy per row when
  // the source's rows are contiguous too (a permute that keeps the last
  // axis, as attention's head split and merge do; element by element, this
  // was 11% of a GPT train step), else a strided or broadcast (stride 0:
  // the gradient of a sum) read.
  const int64_t src_step = nd > 0 ? src.stride(nd - 1) : 0;
  if (nd > 0 && inner >= 8 && dst.stride(nd - 1) == 1) {
    const int64_t rows = src.numel() / inner;
    ParallelFor(rows, GrainFor(inner), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        int64_t rest = r, from = 0, to = 0;
        for (int dim = nd - 2; dim >= 0; --dim) {
          const int64_t index = rest % src.dim(dim);
          rest /= src.dim(dim);
          from += index * src.stride(dim);
          to += index * dst.stride(dim);
        }
        if (src_step == 1) {
          std::memcpy(d + to * bytes, s + from * bytes, inner * bytes);
        } else {
          CopyStridedRow(s + from * bytes, src_step, inner, bytes,
                         d + to * bytes);
        }
      }
    });
    return;
  }
  sdk::ForEachElement<2>(
      src.ndim(), src.shape(), {src.strides(), dst.strides()},
      [&](const std::array<int64_t, 2>& o) {
        std::memcpy(d + o[1] * bytes, s + o[0] * bytes, bytes);
      });
}

DenseCall::DenseCall(const sdk::KernelCall& call) : original_(call) {
  dense_.device = call.device;
  dense_.op = call.op;
  dense_.attrs = call.attrs;
  for (const sdk::TensorRef& in : call.inputs) {
    dense_.inputs.push_back(Densify(in, /*copy_in=*/true));
  }
  for (const sdk::TensorRef& out : call.outputs) {
    dense_.outputs.push_back(Densify(out, /*copy_in=*/true));
  }
}

sdk::TensorRef DenseCall::Densify(const sdk::TensorRef& t, bool copy_in) {
  if (t.is_contiguous()) return t;
  Copy& copy = *copies_.emplace_back(std::make_unique<Copy>());
  copy.strides.resize(t.ndim());
  int64_t stride = 1;
  for (int i = t.ndim() - 1; i >= 0; --i) {
    copy.strides[i] = stride;
    stride *= t.dim(i);
  }
  copy.buffer = std::make_unique<uint8_t[]>(
      static_cast<size_t>(t.numel()) * DtypeBytes(t.dtype()) + 1);
  MixrtTensorDesc& desc = copy.desc;
  desc.struct_size = sizeof(desc);
  desc.data = copy.buffer.get();
  desc.dtype = t.dtype();
  desc.ndim = t.ndim();
  desc.shape = t.shape();
  desc.strides = copy.strides.data();
  const sdk::TensorRef dense(desc);
  if (copy_in) StridedCopy(t, dense);
  return dense;
}

void DenseCall::Finish() {
  for (size_t i = 0; i < original_.outputs.size(); ++i) {
    if (dense_.outputs[i].data() != original_.outputs[i].data()) {
      StridedCopy(dense_.outputs[i], original_.outputs[i]);
    }
  }
}

}  // namespace mixrt::cpu
