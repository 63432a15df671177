// The few oneDNN calls whose spelling changed between 2.x (Debian's 2.6.3,
// the default) and 3.x (PyPI's onednn-cpu-gomp, `--config=onednn3`): 3.x
// dropped the op descriptors and builds primitive descriptors directly. All
// primitive creation in the plugin goes through these functions.
#ifndef MIXRT_BACKENDS_CPU_ONEDNN_ONEDNN_COMPAT_H_
#define MIXRT_BACKENDS_CPU_ONEDNN_ONEDNN_COMPAT_H_

#include <string>

#include "oneapi/dnnl/dnnl.hpp"

namespace mixrt::cpu {

#if DNNL_VERSION_MAJOR >= 3
inline constexpr bool kOneDnn3 = true;
#else
inline constexpr bool kOneDnn3 = false;
#endif

dnnl::memory::data_type DataType(const dnnl::memory::desc& md);
dnnl::memory::dims Dims(const dnnl::memory::desc& md);
// Bytes that identify a memory descriptor, for cache keys.
std::string DescIdentity(const dnnl::memory::desc& md);
std::string IsaName(dnnl::cpu_isa isa);

dnnl::matmul::primitive_desc MatmulPd(const dnnl::memory::desc& src,
                                      const dnnl::memory::desc& weights,
                                      const dnnl::memory::desc* bias,
                                      const dnnl::memory::desc& dst,
                                      const dnnl::primitive_attr& attr = {});

dnnl::reduction::primitive_desc ReductionPd(dnnl::algorithm algorithm,
                                            const dnnl::memory::desc& src,
                                            const dnnl::memory::desc& dst);

// softmax_accurate or softmax_log along `axis`; a primitive, since the 2.x
// and 3.x primitive types differ (softmax_v2_forward / softmax_forward).
struct SoftmaxPrimitive {
  dnnl::primitive primitive;
  std::string implementation;
};
SoftmaxPrimitive MakeSoftmax(bool log, const dnnl::memory::desc& src,
                             const dnnl::memory::desc& dst, int axis);

dnnl::eltwise_forward::primitive_desc EltwiseForwardPd(
    dnnl::algorithm algorithm, const dnnl::memory::desc& md, float alpha,
    float beta);
dnnl::eltwise_backward::primitive_desc EltwiseBackwardPd(
    dnnl::algorithm algorithm, const dnnl::memory::desc& md, float alpha,
    float beta, const dnnl::eltwise_forward::primitive_desc& hint);

dnnl::binary::primitive_desc BinaryPd(dnnl::algorithm algorithm,
                                      const dnnl::memory::desc& md);

void AppendEltwise(dnnl::post_ops* ops, dnnl::algorithm algorithm, float alpha,
                   float beta);

struct ConvGeometry {
  dnnl::memory::dims strides, dilates, padding;
};
dnnl::convolution_forward::primitive_desc ConvForwardPd(
    const dnnl::memory::desc& src, const dnnl::memory::desc& weights,
    const dnnl::memory::desc* bias, const dnnl::memory::desc& dst,
    const ConvGeometry& g, const dnnl::primitive_attr& attr = {});
dnnl::convolution_backward_data::primitive_desc ConvBackwardDataPd(
    const dnnl::memory::desc& diff_src, const dnnl::memory::desc& weights,
    const dnnl::memory::desc& diff_dst, const ConvGeometry& g,
    const dnnl::convolution_forward::primitive_desc& hint);
dnnl::convolution_backward_weights::primitive_desc ConvBackwardWeightsPd(
    const dnnl::memory::desc& src, const dnnl::memory::desc& diff_weights,
    const dnnl::memory::desc* diff_bias, const dnnl::memory::desc& diff_dst,
    const ConvGeometry& g,
    const dnnl::convolution_forward::primitive_desc& hint);
// Max pooling for inference (no workspace); padding counts as -inf.
dnnl::pooling_forward::primitive_desc MaxPoolInferencePd(
    const dnnl::memory::desc& src, const dnnl::memory::desc& dst,
    const dnnl::memory::dims& kernel, const dnnl::memory::dims& strides,
    const dnnl::memory::dims& padding);

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_ONEDNN_ONEDNN_COMPAT_H_
