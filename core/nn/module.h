// Modules: named parameters and buffers, train/eval mode, composition.
// Parameters are f32 leaves that require grad (master weights); autocast
// casts them per op.
//
//   auto model = mixrt::nn::MLP({4096, 4096, 4096, 4096}, device, &gen);
//   absl::StatusOr<mixrt::Tensor> y = (*model)->forward(x);
#ifndef MIXRT_CORE_NN_MODULE_H_
#define MIXRT_CORE_NN_MODULE_H_

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor/generator.h"
#include "core/tensor/guarded_value.h"
#include "core/tensor/tensor.h"

namespace mixrt::nn {

class Module {
 public:
  virtual ~Module() = default;

  virtual absl::StatusOr<Tensor> forward(const Tensor& x) = 0;

  // Depth-first, "layer.0.weight" style names.
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<std::pair<std::string, Tensor>> named_buffers() const;
  std::vector<Tensor> parameters() const;

  void train(bool on = true);
  void eval() { train(false); }
  // Inside a compiled function's trace, reading the mode is a guard: a
  // replay runs only while the module is in the mode the trace saw
  // (torch.compile guards `training` on every module it reads).
  bool is_training() const { return training_.get(); }

 protected:
  // The registered entry and the caller's Tensor are handles on the same
  // parameter (Tensor copies share storage and autograd state).
  const Tensor& register_parameter(std::string name, Tensor t);
  const Tensor& register_buffer(std::string name, Tensor t);
  void register_module(std::string name, std::shared_ptr<Module> m);

 private:
  void Collect(const std::string& prefix, bool buffers,
               std::vector<std::pair<std::string, Tensor>>* out) const;

  GuardedValue<bool> training_{true, "a module's training flag"};
  std::vector<std::pair<std::string, Tensor>> parameters_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

// y = x W^T + b, initialized as torch.nn.Linear: W and b uniform in
// +-1/sqrt(in_features) (kaiming_uniform with a = sqrt(5)).
class Linear : public Module {
 public:
  static absl::StatusOr<std::shared_ptr<Linear>> Create(
      int64_t in_features, int64_t out_features, const Device& device,
      Generator* generator = nullptr, bool bias = true);
  absl::StatusOr<Tensor> forward(const Tensor& x) override;
  const Tensor& weight() const { return weight_; }

 private:
  Linear() = default;
  Tensor weight_;
  Tensor bias_;
};

class ReLU : public Module {
 public:
  absl::StatusOr<Tensor> forward(const Tensor& x) override;
};

class GELU : public Module {
 public:
  explicit GELU(bool tanh_approximation = false) : tanh_(tanh_approximation) {}
  absl::StatusOr<Tensor> forward(const Tensor& x) override;

 private:
  bool tanh_;
};

class SiLU : public Module {
 public:
  absl::StatusOr<Tensor> forward(const Tensor& x) override;
};

class Flatten : public Module {
 public:
  absl::StatusOr<Tensor> forward(const Tensor& x) override;
};

class Dropout : public Module {
 public:
  // Draws from `generator` (shared: it may be destroyed before this
  // module), else from the default generator.
  explicit Dropout(double p, Generator* generator = nullptr)
      : p_(p), generator_(generator ? generator->Share() : nullptr) {}
  absl::StatusOr<Tensor> forward(const Tensor& x) override;

 private:
  double p_;
  std::shared_ptr<Generator> generator_;
};

class LayerNorm : public Module {
 public:
  static absl::StatusOr<std::shared_ptr<LayerNorm>> Create(
      int64_t normalized_size, const Device& device, double eps = 1e-5);
  absl::StatusOr<Tensor> forward(const Tensor& x) override;

 private:
  LayerNorm() = default;
  Tensor weight_;
  Tensor bias_;
  double eps_ = 1e-5;
};

class BatchNorm2d : public Module {
 public:
  static absl::StatusOr<std::shared_ptr<BatchNorm2d>> Create(
      int64_t channels, const Device& device, double momentum = 0.1,
      double eps = 1e-5);
  absl::StatusOr<Tensor> forward(const Tensor& x) override;

 private:
  BatchNorm2d() = default;
  Tensor weight_, bias_, running_mean_, running_var_;
  double momentum_ = 0.1, eps_ = 1e-5;
};

class Conv2d : public Module {
 public:
  static absl::StatusOr<std::shared_ptr<Conv2d>> Create(
      int64_t in_channels, int64_t out_channels, int kernel_size,
      const Device& device, Generator* generator = nullptr, int stride = 1,
      int padding = 0, int groups = 1, bool bias = true);
  absl::StatusOr<Tensor> forward(const Tensor& x) override;

 private:
  Conv2d() = default;
  Tensor weight_, bias_;
  int stride_ = 1, padding_ = 0, groups_ = 1;
};

class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(int kernel, int stride)
      : kernel_(kernel), stride_(stride) {}
  absl::StatusOr<Tensor> forward(const Tensor& x) override;

 private:
  int kernel_, stride_;
};

class Embedding : public Module {
 public:
  static absl::StatusOr<std::shared_ptr<Embedding>> Create(
      int64_t num_embeddings, int64_t dim, const Device& device,
      Generator* generator = nullptr,
      std::optional<int64_t> padding_idx = std::nullopt);
  absl::StatusOr<Tensor> forward(const Tensor& indices) override;
  const Tensor& weight() const { return weight_; }

 private:
  Embedding() = default;
  Tensor weight_;
  std::optional<int64_t> padding_idx_;  // A row index, as torch's.
};

class Sequential : public Module {
 public:
  Sequential() = default;
  void append(std::shared_ptr<Module> m);
  absl::StatusOr<Tensor> forward(const Tensor& x) override;
  size_t size() const { return layers_.size(); }

 private:
  std::vector<std::shared_ptr<Module>> layers_;
};

// Linear(sizes[0], sizes[1]), ReLU, ..., Linear(sizes[n-2], sizes[n-1]):
// the AMP recipe's network.
absl::StatusOr<std::shared_ptr<Sequential>> MLP(
    const std::vector<int64_t>& sizes, const Device& device,
    Generator* generator = nullptr);

}  // namespace mixrt::nn

#endif  // MIXRT_CORE_NN_MODULE_H_
