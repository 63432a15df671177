#include "core/plugin/isolation/kernel_graph_codec.h"

#include <algorithm>
#include <cstring>

#include "core/plugin/isolation/fusion_graph_codec.h"

namespace mixrt::isolation {
namespace {

constexpr int32_t kMaxSteps = 1 << 16;

WireTensorDesc Shape(const MixrtTensorDesc& d) {
  WireTensorDesc w;
  w.dtype = d.dtype;
  w.ndim = std::max(0, std::min<int32_t>(d.ndim, MIXRT_MAX_DIMS));
  for (int k = 0; k < w.ndim; ++k) {
    w.shape[k] = d.shape[k];
    w.strides[k] = d.strides[k];
  }
  return w;
}

}  // namespace

bool WriteKernelGraphSteps(
    const MixrtKernelGraphStep* steps, int32_t count,
    const std::function<uint64_t(const MixrtFusedKernel*)>& plugin_kernel,
    MessageWriter& out) {
  out.Put(count);
  for (int32_t i = 0; i < count; ++i) {
    const MixrtKernelGraphStep& s = steps[i];
    const int32_t n_in = std::max(0, s.num_inputs);
    const int32_t n_out = std::max(0, s.num_outputs);
    out.Put(s.op);
    out.Put(n_in);
    out.Put(n_out);
    for (int32_t k = 0; k < n_in; ++k) out.Put(Shape(s.inputs[k]));
    for (int32_t k = 0; k < n_out; ++k) out.Put(Shape(s.outputs[k]));
    out.PutBytes(s.input_buffers, sizeof(int32_t) * n_in);
    out.PutBytes(s.input_offsets, sizeof(uint64_t) * n_in);
    out.PutBytes(s.output_buffers, sizeof(int32_t) * n_out);
    out.PutBytes(s.output_offsets, sizeof(uint64_t) * n_out);
    const uint32_t attr_bytes = AttrSize(s.attrs);
    out.Put(attr_bytes);
    out.PutBytes(s.attrs, attr_bytes);
    const bool fused =
        MIXRT_STRUCT_HAS(&s, MixrtKernelGraphStep, fused_values) &&
        s.fused_kernel != nullptr;
    out.Put(fused ? plugin_kernel(s.fused_kernel) : uint64_t{0});
    if (fused) {
      out.PutBytes(s.fused_values, sizeof(int32_t) * (n_in + n_out));
    }
  }
  return !out.overflowed();
}

bool DecodedKernelGraphSteps::Read(MessageReader& in, int32_t num_buffers) {
  int32_t count = 0;
  if (!in.Get(&count) || count < 0 || count > kMaxSteps) return false;
  storage_.clear();
  steps_.assign(count, MixrtKernelGraphStep{});
  for (int32_t i = 0; i < count; ++i) {
    storage_.push_back(std::make_unique<Step>());
    Step& st = *storage_.back();
    MixrtKernelGraphStep& s = steps_[i];
    s.struct_size = sizeof(s);
    int32_t n_in = 0, n_out = 0;
    // Each count bounded alone first: their sum could overflow.
    if (!in.Get(&s.op) || !in.Get(&n_in) || !in.Get(&n_out) || n_in < 0 ||
        n_out < 0 || n_in > kMaxLaunchTensors ||
        n_out > kMaxLaunchTensors - n_in) {
      return false;
    }
    const int32_t n = n_in + n_out;
    st.wire.resize(n);
    st.descs.resize(n);
    for (int32_t k = 0; k < n; ++k) {
      WireTensorDesc& w = st.wire[k];
      if (!in.Get(&w) || w.ndim < 0 || w.ndim > MIXRT_MAX_DIMS) return false;
      MixrtTensorDesc& d = st.descs[k];
      d = MixrtTensorDesc{};
      d.struct_size = sizeof(d);
      d.dtype = w.dtype;
      d.ndim = w.ndim;
      d.shape = w.shape;
      d.strides = w.strides;
    }
    st.buffers.resize(n);
    st.offsets.resize(n);
    if (!in.GetBytes(st.buffers.data(), sizeof(int32_t) * n_in) ||
        !in.GetBytes(st.offsets.data(), sizeof(uint64_t) * n_in) ||
        !in.GetBytes(st.buffers.data() + n_in, sizeof(int32_t) * n_out) ||
        !in.GetBytes(st.offsets.data() + n_in, sizeof(uint64_t) * n_out)) {
      return false;
    }
    if (!std::all_of(st.buffers.begin(), st.buffers.end(),
                     [&](int32_t b) { return b >= 0 && b < num_buffers; })) {
      return false;
    }
    uint32_t attr_bytes = 0;
    if (!in.Get(&attr_bytes) || attr_bytes > kMaxAttrBytes ||
        !in.GetBytes(st.attrs, attr_bytes)) {
      return false;
    }
    if (attr_bytes >= sizeof(size_t) + sizeof(void*)) {
      std::memset(st.attrs + sizeof(size_t), 0, sizeof(void*));
    }
    uint64_t fused = 0;
    if (!in.Get(&fused)) return false;
    if (fused != 0) {
      st.fused_values.resize(n);
      if (!in.GetBytes(st.fused_values.data(), sizeof(int32_t) * n)) {
        return false;
      }
      s.fused_kernel = reinterpret_cast<MixrtFusedKernel*>(fused);
      s.fused_values = st.fused_values.data();
    }
    s.num_inputs = n_in;
    s.inputs = st.descs.data();
    s.num_outputs = n_out;
    s.outputs = st.descs.data() + n_in;
    s.input_buffers = st.buffers.data();
    s.input_offsets = st.offsets.data();
    s.output_buffers = st.buffers.data() + n_in;
    s.output_offsets = st.offsets.data() + n_in;
    s.attrs = attr_bytes > 0 ? st.attrs : nullptr;
  }
  return true;
}

}  // namespace mixrt::isolation
