#include "core/nn/module.h"

#include <cmath>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/functional/ops.h"
#include "core/kernels/fill_copy.h"
#include "core/tensor/factories.h"
#include "mixrt/status_macros.h"

namespace mixrt::nn {
namespace {

absl::StatusOr<Tensor> Parameter(absl::Span<const int64_t> shape, double bound,
                                 const Device& device, Generator* generator) {
  MIXRT_ASSIGN_OR_RETURN(
      Tensor t, rand(shape, DType::kF32, device, -bound, bound, generator));
  MIXRT_RETURN_IF_ERROR(t.set_requires_grad(true));
  return t;
}

absl::StatusOr<Tensor> Constant(absl::Span<const int64_t> shape, double value,
                                const Device& device, bool trainable) {
  MIXRT_ASSIGN_OR_RETURN(Tensor t, full(shape, value, DType::kF32, device));
  if (trainable) MIXRT_RETURN_IF_ERROR(t.set_requires_grad(true));
  return t;
}

}  // namespace

void Module::Collect(const std::string& prefix, bool buffers,
                     std::vector<std::pair<std::string, Tensor>>* out) const {
  for (const auto& [name, t] : buffers ? buffers_ : parameters_) {
    out->emplace_back(prefix + name, t);
  }
  for (const auto& [name, child] : children_) {
    child->Collect(absl::StrCat(prefix, name, "."), buffers, out);
  }
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  Collect("", false, &out);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers() const {
  std::vector<std::pair<std::string, Tensor>> out;
  Collect("", true, &out);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters()) out.push_back(t);
  return out;
}

void Module::train(bool on) {
  training_.set(on);
  for (auto& [name, child] : children_) child->train(on);
}

const Tensor& Module::register_parameter(std::string name, Tensor t) {
  parameters_.emplace_back(std::move(name), std::move(t));
  return parameters_.back().second;
}

const Tensor& Module::register_buffer(std::string name, Tensor t) {
  buffers_.emplace_back(std::move(name), std::move(t));
  return buffers_.back().second;
}

void Module::register_module(std::string name, std::shared_ptr<Module> m) {
  children_.emplace_back(std::move(name), std::move(m));
}

absl::StatusOr<std::shared_ptr<Linear>> Linear::Create(int64_t in_features,
                                                       int64_t out_features,
                                                       const Device& device,
                                                       Generator* generator,
                                                       bool bias) {
  if (in_features <= 0 || out_features <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Linear: features must be positive, got ", in_features,
                     " -> ", out_features));
  }
  std::shared_ptr<Linear> m(new Linear());
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  MIXRT_ASSIGN_OR_RETURN(Tensor w, Parameter({out_features, in_features}, bound,
                                             device, generator));
  m->weight_ = m->register_parameter("weight", w);
  if (bias) {
    MIXRT_ASSIGN_OR_RETURN(Tensor b,
                           Parameter({out_features}, bound, device, generator));
    m->bias_ = m->register_parameter("bias", b);
  }
  return m;
}

absl::StatusOr<Tensor> Linear::forward(const Tensor& x) {
  return linear(x, weight_, bias_);
}

absl::StatusOr<Tensor> ReLU::forward(const Tensor& x) { return relu(x); }
absl::StatusOr<Tensor> GELU::forward(const Tensor& x) { return gelu(x, tanh_); }
absl::StatusOr<Tensor> SiLU::forward(const Tensor& x) { return silu(x); }
absl::StatusOr<Tensor> Flatten::forward(const Tensor& x) { return flatten(x); }

absl::StatusOr<Tensor> Dropout::forward(const Tensor& x) {
  if (!is_training() || p_ == 0) return x;
  return dropout(x, p_, generator_.get());
}

absl::StatusOr<std::shared_ptr<LayerNorm>> LayerNorm::Create(
    int64_t normalized_size, const Device& device, double eps) {
  std::shared_ptr<LayerNorm> m(new LayerNorm());
  m->eps_ = eps;
  MIXRT_ASSIGN_OR_RETURN(Tensor w,
                         Constant({normalized_size}, 1, device, true));
  MIXRT_ASSIGN_OR_RETURN(Tensor b,
                         Constant({normalized_size}, 0, device, true));
  m->weight_ = m->register_parameter("weight", w);
  m->bias_ = m->register_parameter("bias", b);
  return m;
}

absl::StatusOr<Tensor> LayerNorm::forward(const Tensor& x) {
  return layer_norm(x, 1, weight_, bias_, eps_);
}

absl::StatusOr<std::shared_ptr<BatchNorm2d>> BatchNorm2d::Create(
    int64_t channels, const Device& device, double momentum, double eps) {
  std::shared_ptr<BatchNorm2d> m(new BatchNorm2d());
  m->momentum_ = momentum;
  m->eps_ = eps;
  MIXRT_ASSIGN_OR_RETURN(Tensor w, Constant({channels}, 1, device, true));
  MIXRT_ASSIGN_OR_RETURN(Tensor b, Constant({channels}, 0, device, true));
  MIXRT_ASSIGN_OR_RETURN(Tensor rm, Constant({channels}, 0, device, false));
  MIXRT_ASSIGN_OR_RETURN(Tensor rv, Constant({channels}, 1, device, false));
  m->weight_ = m->register_parameter("weight", w);
  m->bias_ = m->register_parameter("bias", b);
  m->running_mean_ = m->register_buffer("running_mean", rm);
  m->running_var_ = m->register_buffer("running_var", rv);
  return m;
}

absl::StatusOr<Tensor> BatchNorm2d::forward(const Tensor& x) {
  return batch_norm(x, weight_, bias_, running_mean_, running_var_,
                    is_training(), momentum_, eps_);
}

absl::StatusOr<std::shared_ptr<Conv2d>> Conv2d::Create(
    int64_t in_channels, int64_t out_channels, int kernel_size,
    const Device& device, Generator* generator, int stride, int padding,
    int groups, bool bias) {
  if (groups <= 0 || in_channels % groups != 0 || out_channels % groups != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Conv2d: ", in_channels, " -> ", out_channels,
                     " channels do not divide into groups=", groups));
  }
  std::shared_ptr<Conv2d> m(new Conv2d());
  m->stride_ = stride;
  m->padding_ = padding;
  m->groups_ = groups;
  const int64_t fan_in = in_channels / groups * kernel_size * kernel_size;
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  MIXRT_ASSIGN_OR_RETURN(
      Tensor w,
      Parameter({out_channels, in_channels / groups, kernel_size, kernel_size},
                bound, device, generator));
  m->weight_ = m->register_parameter("weight", w);
  if (bias) {
    MIXRT_ASSIGN_OR_RETURN(Tensor b,
                           Parameter({out_channels}, bound, device, generator));
    m->bias_ = m->register_parameter("bias", b);
  }
  return m;
}

absl::StatusOr<Tensor> Conv2d::forward(const Tensor& x) {
  Conv2dOptions o;
  o.stride = {stride_, stride_};
  o.padding = {padding_, padding_};
  o.groups = groups_;
  return conv2d(x, weight_, bias_, o);
}

absl::StatusOr<Tensor> MaxPool2d::forward(const Tensor& x) {
  Pool2dOptions o;
  o.kind = MIXRT_POOL_MAX;
  o.kernel = {kernel_, kernel_};
  o.stride = {stride_, stride_};
  return pool2d(x, o);
}

absl::StatusOr<std::shared_ptr<Embedding>> Embedding::Create(
    int64_t num_embeddings, int64_t dim, const Device& device,
    Generator* generator, std::optional<int64_t> padding_idx) {
  if (padding_idx.has_value() &&
      (*padding_idx < -num_embeddings || *padding_idx >= num_embeddings)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Embedding: padding_idx ", *padding_idx,
                     " is outside its ", num_embeddings, " rows; expected -",
                     num_embeddings, " <= padding_idx < ", num_embeddings));
  }
  std::shared_ptr<Embedding> m(new Embedding());
  // torch.nn.Embedding draws N(0, 1), and zeros the padding row.
  MIXRT_ASSIGN_OR_RETURN(Tensor w, randn({num_embeddings, dim}, DType::kF32,
                                         device, 0, 1, generator));
  if (padding_idx.has_value()) {
    m->padding_idx_ =
        *padding_idx < 0 ? *padding_idx + num_embeddings : *padding_idx;
    MIXRT_ASSIGN_OR_RETURN(Tensor row,
                           w.slice(0, *m->padding_idx_, *m->padding_idx_ + 1));
    MIXRT_RETURN_IF_ERROR(kernels::fill_(row, 0.0));
  }
  MIXRT_RETURN_IF_ERROR(w.set_requires_grad(true));
  m->weight_ = m->register_parameter("weight", w);
  return m;
}

absl::StatusOr<Tensor> Embedding::forward(const Tensor& indices) {
  return embedding(weight_, indices, padding_idx_);
}

void Sequential::append(std::shared_ptr<Module> m) {
  register_module(std::to_string(layers_.size()), m);
  layers_.push_back(std::move(m));
}

absl::StatusOr<Tensor> Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (const std::shared_ptr<Module>& layer : layers_) {
    MIXRT_ASSIGN_OR_RETURN(h, layer->forward(h));
  }
  return h;
}

absl::StatusOr<std::shared_ptr<Sequential>> MLP(
    const std::vector<int64_t>& sizes, const Device& device,
    Generator* generator) {
  if (sizes.size() < 2) {
    return absl::InvalidArgumentError(
        "MLP: need at least input and output sizes");
  }
  auto seq = std::make_shared<Sequential>();
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    MIXRT_ASSIGN_OR_RETURN(
        auto layer, Linear::Create(sizes[i], sizes[i + 1], device, generator));
    seq->append(layer);
    if (i + 2 < sizes.size()) seq->append(std::make_shared<ReLU>());
  }
  return seq;
}

}  // namespace mixrt::nn
