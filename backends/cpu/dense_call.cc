#include "backends/cpu/dense_call.h"

#include <array>
#include <cstring>

#include "plugins/sdk/tensor_ref.h"

namespace mixrt::cpu {

size_t DtypeBytes(MixrtDtype dtype) {
  switch (dtype) {
    case MIXRT_DTYPE_F16:
    case MIXRT_DTYPE_BF16:
      return 2;
    case MIXRT_DTYPE_I64:
      return 8;
    case MIXRT_DTYPE_BOOL:
      return 1;
    default:
      return 4;
  }
}

void StridedCopy(const sdk::TensorRef& src, const sdk::TensorRef& dst) {
  const size_t bytes = DtypeBytes(src.dtype());
  const auto* s = static_cast<const uint8_t*>(src.data());
  auto* d = static_cast<uint8_t*>(dst.data());
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
  std::vector<int64_t>& strides = strides_.emplace_back(t.ndim());
  int64_t stride = 1;
  for (int i = t.ndim() - 1; i >= 0; --i) {
    strides[i] = stride;
    stride *= t.dim(i);
  }
  auto buffer = std::make_unique<uint8_t[]>(
      static_cast<size_t>(t.numel()) * DtypeBytes(t.dtype()) + 1);
  MixrtTensorDesc& desc = descs_.emplace_back();
  desc.struct_size = sizeof(desc);
  desc.data = buffer.get();
  desc.dtype = t.dtype();
  desc.ndim = t.ndim();
  desc.shape = t.shape();
  desc.strides = strides.data();
  buffers_.push_back(std::move(buffer));
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
