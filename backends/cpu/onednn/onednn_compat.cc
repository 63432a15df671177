#include "backends/cpu/onednn/onednn_compat.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backends/cpu/onednn/onednn_context.h"

namespace mixrt::cpu {

using dnnl::algorithm;
using dnnl::prop_kind;

#if DNNL_VERSION_MAJOR >= 3

dnnl::memory::data_type DataType(const dnnl::memory::desc& md) {
  return md.get_data_type();
}

dnnl::memory::dims Dims(const dnnl::memory::desc& md) { return md.get_dims(); }

std::string DescIdentity(const dnnl::memory::desc& md) {
  return absl::StrCat(static_cast<int>(md.get_data_type()), "|",
                      absl::StrJoin(md.get_dims(), ","), "|",
                      static_cast<int>(md.get_format_kind()), "|",
                      absl::StrJoin(md.get_strides(), ","), "|",
                      absl::StrJoin(md.get_inner_blks(), ","), "|",
                      absl::StrJoin(md.get_inner_idxs(), ","));
}

dnnl::matmul::primitive_desc MatmulPd(const dnnl::memory::desc& src,
                                      const dnnl::memory::desc& weights,
                                      const dnnl::memory::desc* bias,
                                      const dnnl::memory::desc& dst,
                                      const dnnl::primitive_attr& attr) {
  return bias != nullptr
             ? dnnl::matmul::primitive_desc(Engine(), src, weights, *bias, dst,
                                            attr)
             : dnnl::matmul::primitive_desc(Engine(), src, weights, dst, attr);
}

dnnl::reduction::primitive_desc ReductionPd(algorithm a,
                                            const dnnl::memory::desc& src,
                                            const dnnl::memory::desc& dst) {
  return dnnl::reduction::primitive_desc(Engine(), a, src, dst, 0.f, 0.f);
}

SoftmaxPrimitive MakeSoftmax(bool log, const dnnl::memory::desc& src,
                             const dnnl::memory::desc& dst, int axis) {
  const dnnl::softmax_forward::primitive_desc pd(
      Engine(), prop_kind::forward_training,
      log ? algorithm::softmax_log : algorithm::softmax_accurate, src, dst,
      axis);
  return {dnnl::softmax_forward(pd), pd.impl_info_str()};
}

dnnl::eltwise_forward::primitive_desc EltwiseForwardPd(
    algorithm a, const dnnl::memory::desc& md, float alpha, float beta) {
  return dnnl::eltwise_forward::primitive_desc(
      Engine(), prop_kind::forward_training, a, md, md, alpha, beta);
}

dnnl::eltwise_backward::primitive_desc EltwiseBackwardPd(
    algorithm a, const dnnl::memory::desc& md, float alpha, float beta,
    const dnnl::eltwise_forward::primitive_desc& hint) {
  return dnnl::eltwise_backward::primitive_desc(Engine(), a, md, md, md, alpha,
                                                beta, hint);
}

dnnl::binary::primitive_desc BinaryPd(algorithm a,
                                      const dnnl::memory::desc& md) {
  return dnnl::binary::primitive_desc(Engine(), a, md, md, md);
}

void AppendEltwise(dnnl::post_ops* ops, algorithm a, float alpha, float beta) {
  ops->append_eltwise(a, alpha, beta);
}

dnnl::convolution_forward::primitive_desc ConvForwardPd(
    const dnnl::memory::desc& src, const dnnl::memory::desc& weights,
    const dnnl::memory::desc* bias, const dnnl::memory::desc& dst,
    const ConvGeometry& g, const dnnl::primitive_attr& attr) {
  return bias != nullptr
             ? dnnl::convolution_forward::primitive_desc(
                   Engine(), prop_kind::forward_training,
                   algorithm::convolution_direct, src, weights, *bias, dst,
                   g.strides, g.dilates, g.padding, g.padding, attr)
             : dnnl::convolution_forward::primitive_desc(
                   Engine(), prop_kind::forward_training,
                   algorithm::convolution_direct, src, weights, dst, g.strides,
                   g.dilates, g.padding, g.padding, attr);
}

dnnl::convolution_backward_data::primitive_desc ConvBackwardDataPd(
    const dnnl::memory::desc& diff_src, const dnnl::memory::desc& weights,
    const dnnl::memory::desc& diff_dst, const ConvGeometry& g,
    const dnnl::convolution_forward::primitive_desc& hint) {
  return dnnl::convolution_backward_data::primitive_desc(
      Engine(), algorithm::convolution_direct, diff_src, weights, diff_dst,
      g.strides, g.dilates, g.padding, g.padding, hint);
}

dnnl::convolution_backward_weights::primitive_desc ConvBackwardWeightsPd(
    const dnnl::memory::desc& src, const dnnl::memory::desc& diff_weights,
    const dnnl::memory::desc* diff_bias, const dnnl::memory::desc& diff_dst,
    const ConvGeometry& g,
    const dnnl::convolution_forward::primitive_desc& hint) {
  return diff_bias != nullptr
             ? dnnl::convolution_backward_weights::primitive_desc(
                   Engine(), algorithm::convolution_direct, src, diff_weights,
                   *diff_bias, diff_dst, g.strides, g.dilates, g.padding,
                   g.padding, hint)
             : dnnl::convolution_backward_weights::primitive_desc(
                   Engine(), algorithm::convolution_direct, src, diff_weights,
                   diff_dst, g.strides, g.dilates, g.padding, g.padding, hint);
}

dnnl::pooling_forward::primitive_desc MaxPoolInferencePd(
    const dnnl::memory::desc& src, const dnnl::memory::desc& dst,
    const dnnl::memory::dims& kernel, const dnnl::memory::dims& strides,
    const dnnl::memory::dims& padding) {
  return dnnl::pooling_forward::primitive_desc(
      Engine(), prop_kind::forward_inference, algorithm::pooling_max, src, dst,
      strides, kernel, {0, 0}, padding, padding);
}

#else  // oneDNN 2.x

dnnl::memory::data_type DataType(const dnnl::memory::desc& md) {
  return md.data_type();
}

dnnl::memory::dims Dims(const dnnl::memory::desc& md) { return md.dims(); }

std::string DescIdentity(const dnnl::memory::desc& md) {
  return std::string(reinterpret_cast<const char*>(&md.data), sizeof(md.data));
}

dnnl::matmul::primitive_desc MatmulPd(const dnnl::memory::desc& src,
                                      const dnnl::memory::desc& weights,
                                      const dnnl::memory::desc* bias,
                                      const dnnl::memory::desc& dst,
                                      const dnnl::primitive_attr& attr) {
  const dnnl::matmul::desc desc =
      bias != nullptr ? dnnl::matmul::desc(src, weights, *bias, dst)
                      : dnnl::matmul::desc(src, weights, dst);
  return dnnl::matmul::primitive_desc(desc, attr, Engine());
}

dnnl::reduction::primitive_desc ReductionPd(algorithm a,
                                            const dnnl::memory::desc& src,
                                            const dnnl::memory::desc& dst) {
  return dnnl::reduction::primitive_desc(
      dnnl::reduction::desc(a, src, dst, 0.f, 0.f), Engine());
}

SoftmaxPrimitive MakeSoftmax(bool log, const dnnl::memory::desc& src,
                             const dnnl::memory::desc& dst, int axis) {
  const dnnl::softmax_v2_forward::primitive_desc pd(
      dnnl::softmax_v2_forward::desc(
          prop_kind::forward_training,
          log ? algorithm::softmax_log : algorithm::softmax_accurate, src, dst,
          axis),
      Engine());
  return {dnnl::softmax_v2_forward(pd), pd.impl_info_str()};
}

dnnl::eltwise_forward::primitive_desc EltwiseForwardPd(
    algorithm a, const dnnl::memory::desc& md, float alpha, float beta) {
  return dnnl::eltwise_forward::primitive_desc(
      dnnl::eltwise_forward::desc(prop_kind::forward_training, a, md, alpha,
                                  beta),
      Engine());
}

dnnl::eltwise_backward::primitive_desc EltwiseBackwardPd(
    algorithm a, const dnnl::memory::desc& md, float alpha, float beta,
    const dnnl::eltwise_forward::primitive_desc& hint) {
  return dnnl::eltwise_backward::primitive_desc(
      dnnl::eltwise_backward::desc(a, md, md, alpha, beta), Engine(), hint);
}

dnnl::binary::primitive_desc BinaryPd(algorithm a,
                                      const dnnl::memory::desc& md) {
  return dnnl::binary::primitive_desc(dnnl::binary::desc(a, md, md, md),
                                      Engine());
}

void AppendEltwise(dnnl::post_ops* ops, algorithm a, float alpha, float beta) {
  ops->append_eltwise(1.0f, a, alpha, beta);  // 2.x's first argument: a scale.
}

dnnl::convolution_forward::primitive_desc ConvForwardPd(
    const dnnl::memory::desc& src, const dnnl::memory::desc& weights,
    const dnnl::memory::desc* bias, const dnnl::memory::desc& dst,
    const ConvGeometry& g, const dnnl::primitive_attr& attr) {
  const auto desc =
      bias != nullptr
          ? dnnl::convolution_forward::desc(
                prop_kind::forward_training, algorithm::convolution_direct, src,
                weights, *bias, dst, g.strides, g.dilates, g.padding, g.padding)
          : dnnl::convolution_forward::desc(
                prop_kind::forward_training, algorithm::convolution_direct, src,
                weights, dst, g.strides, g.dilates, g.padding, g.padding);
  return dnnl::convolution_forward::primitive_desc(desc, attr, Engine());
}

dnnl::convolution_backward_data::primitive_desc ConvBackwardDataPd(
    const dnnl::memory::desc& diff_src, const dnnl::memory::desc& weights,
    const dnnl::memory::desc& diff_dst, const ConvGeometry& g,
    const dnnl::convolution_forward::primitive_desc& hint) {
  return dnnl::convolution_backward_data::primitive_desc(
      dnnl::convolution_backward_data::desc(
          algorithm::convolution_direct, diff_src, weights, diff_dst, g.strides,
          g.dilates, g.padding, g.padding),
      Engine(), hint);
}

dnnl::convolution_backward_weights::primitive_desc ConvBackwardWeightsPd(
    const dnnl::memory::desc& src, const dnnl::memory::desc& diff_weights,
    const dnnl::memory::desc* diff_bias, const dnnl::memory::desc& diff_dst,
    const ConvGeometry& g,
    const dnnl::convolution_forward::primitive_desc& hint) {
  const auto desc =
      diff_bias != nullptr
          ? dnnl::convolution_backward_weights::desc(
                algorithm::convolution_direct, src, diff_weights, *diff_bias,
                diff_dst, g.strides, g.dilates, g.padding, g.padding)
          : dnnl::convolution_backward_weights::desc(
                algorithm::convolution_direct, src, diff_weights, diff_dst,
                g.strides, g.dilates, g.padding, g.padding);
  return dnnl::convolution_backward_weights::primitive_desc(desc, Engine(),
                                                            hint);
}

dnnl::pooling_forward::primitive_desc MaxPoolInferencePd(
    const dnnl::memory::desc& src, const dnnl::memory::desc& dst,
    const dnnl::memory::dims& kernel, const dnnl::memory::dims& strides,
    const dnnl::memory::dims& padding) {
  const dnnl::pooling_forward::desc desc(prop_kind::forward_inference,
                                         algorithm::pooling_max, src, dst,
                                         strides, kernel, padding, padding);
  return dnnl::pooling_forward::primitive_desc(desc, Engine());
}

#endif

std::string IsaName(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41:
      return "sse41";
    case dnnl::cpu_isa::avx:
      return "avx";
    case dnnl::cpu_isa::avx2:
      return "avx2";
    case dnnl::cpu_isa::avx2_vnni:
      return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
#if DNNL_VERSION_MAJOR >= 3
    case dnnl::cpu_isa::avx512_core_fp16:
      return "avx512_core_fp16";
#endif
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
    default:
      return absl::StrCat("isa ", static_cast<int>(isa));
  }
}

}  // namespace mixrt::cpu
