#include "tests/amp/autocast_ops.h"

#include "absl/status/statusor.h"
#include "core/functional/ops.h"
#include "core/tensor/factories.h"
#include "mixrt/status_macros.h"

namespace mixrt::testing {
namespace {

// Uniform in [low, high), converted to `dtype` without history.
absl::StatusOr<Tensor> Floats(const Device& d, DType dtype,
                              std::vector<int64_t> shape, double low = -1,
                              double high = 1) {
  MIXRT_ASSIGN_OR_RETURN(Tensor t, rand(shape, DType::kF32, d, low, high));
  return t.to(dtype);
}

AutocastOpCall UnaryOp(std::function<absl::StatusOr<Tensor>(const Tensor&)> f,
                       double low = -1, double high = 1) {
  return [f, low, high](const Device& d, DType t) -> absl::StatusOr<Tensor> {
    MIXRT_ASSIGN_OR_RETURN(Tensor x, Floats(d, t, {4, 3}, low, high));
    return f(x);
  };
}

AutocastOpCall BinaryOp(
    std::function<absl::StatusOr<Tensor>(const Tensor&, const Tensor&)> f,
    double low_b = -1, double high_b = 1) {
  return
      [f, low_b, high_b](const Device& d, DType t) -> absl::StatusOr<Tensor> {
        MIXRT_ASSIGN_OR_RETURN(Tensor a, Floats(d, t, {4, 3}));
        MIXRT_ASSIGN_OR_RETURN(Tensor b, Floats(d, t, {4, 3}, low_b, high_b));
        return f(a, b);
      };
}

AutocastOpCall Pool(MixrtPoolKind kind) {
  return [kind](const Device& d, DType t) -> absl::StatusOr<Tensor> {
    MIXRT_ASSIGN_OR_RETURN(Tensor x, Floats(d, t, {1, 2, 4, 4}));
    Pool2dOptions o;
    o.kind = kind;
    return pool2d(x, o);
  };
}

absl::StatusOr<Tensor> Classes(const Device& d) {
  return from_ints({0, 2, 1, 0}, {4}, DType::kI64, d);
}

std::map<std::string, AutocastOpCall>* MakeOps() {
  auto* ops = new std::map<std::string, AutocastOpCall>();
  auto& m = *ops;
  m["add"] = BinaryOp([](auto& a, auto& b) { return add(a, b); });
  m["sub"] = BinaryOp([](auto& a, auto& b) { return sub(a, b); });
  m["mul"] = BinaryOp([](auto& a, auto& b) { return mul(a, b); });
  m["div"] = BinaryOp([](auto& a, auto& b) { return div(a, b); }, 1, 2);
  m["neg"] = UnaryOp([](auto& x) { return neg(x); });
  m["relu"] = UnaryOp([](auto& x) { return relu(x); });
  m["leaky_relu"] = UnaryOp([](auto& x) { return leaky_relu(x, 0.1); });
  m["gelu"] = UnaryOp([](auto& x) { return gelu(x); });
  m["silu"] = UnaryOp([](auto& x) { return silu(x); });
  m["sigmoid"] = UnaryOp([](auto& x) { return sigmoid(x); });
  m["tanh"] = UnaryOp([](auto& x) { return tanh(x); });
  m["exp"] = UnaryOp([](auto& x) { return exp(x); });
  m["log"] = UnaryOp([](auto& x) { return log(x); }, 1, 2);
  m["sqrt"] = UnaryOp([](auto& x) { return sqrt(x); }, 1, 2);
  m["pow"] = UnaryOp([](auto& x) { return pow(x, 2.0); });
  m["clamp"] = UnaryOp([](auto& x) { return clamp(x, -0.5, 0.5); });
  m["sum"] = UnaryOp([](auto& x) { return sum(x); });
  m["mean"] = UnaryOp([](auto& x) { return mean(x); });
  m["softmax"] = UnaryOp([](auto& x) { return softmax(x, 1); });
  m["log_softmax"] = UnaryOp([](auto& x) { return log_softmax(x, 1); });
  m["matmul"] = [](const Device& d, DType t) -> absl::StatusOr<Tensor> {
    MIXRT_ASSIGN_OR_RETURN(Tensor a, Floats(d, t, {4, 3}));
    MIXRT_ASSIGN_OR_RETURN(Tensor b, Floats(d, t, {3, 5}));
    return matmul(a, b);
  };
  m["linear"] = [](const Device& d, DType t) -> absl::StatusOr<Tensor> {
    MIXRT_ASSIGN_OR_RETURN(Tensor x, Floats(d, t, {4, 3}));
    MIXRT_ASSIGN_OR_RETURN(Tensor w, Floats(d, t, {5, 3}));
    MIXRT_ASSIGN_OR_RETURN(Tensor b, Floats(d, t, {5}));
    return linear(x, w, b);
  };
  m["layer_norm"] = [](const Device& d, DType t) -> absl::StatusOr<Tensor> {
    MIXRT_ASSIGN_OR_RETURN(Tensor x, Floats(d, t, {4, 3}));
    MIXRT_ASSIGN_OR_RETURN(Tensor w, Floats(d, t, {3}));
    MIXRT_ASSIGN_OR_RETURN(Tensor b, Floats(d, t, {3}));
    return layer_norm(x, 1, w, b);
  };
  m["embedding"] = [](const Device& d, DType t) -> absl::StatusOr<Tensor> {
    MIXRT_ASSIGN_OR_RETURN(Tensor w, Floats(d, t, {3, 4}));
    MIXRT_ASSIGN_OR_RETURN(Tensor i, from_ints({0, 2, 1}, {3}, DType::kI64, d));
    return embedding(w, i);
  };
  m["conv2d"] = [](const Device& d, DType t) -> absl::StatusOr<Tensor> {
    MIXRT_ASSIGN_OR_RETURN(Tensor x, Floats(d, t, {1, 2, 5, 5}));
    MIXRT_ASSIGN_OR_RETURN(Tensor w, Floats(d, t, {3, 2, 3, 3}));
    MIXRT_ASSIGN_OR_RETURN(Tensor b, Floats(d, t, {3}));
    return conv2d(x, w, b);
  };
  m["cat"] = BinaryOp([](auto& a, auto& b) { return cat({a, b}, 0); });
  m["stack"] = BinaryOp([](auto& a, auto& b) { return stack({a, b}, 0); });
  m["scaled_dot_product_attention"] = [](const Device& d,
                                         DType t) -> absl::StatusOr<Tensor> {
    MIXRT_ASSIGN_OR_RETURN(Tensor q, Floats(d, t, {2, 4, 3}));
    MIXRT_ASSIGN_OR_RETURN(Tensor k, Floats(d, t, {2, 5, 3}));
    MIXRT_ASSIGN_OR_RETURN(Tensor v, Floats(d, t, {2, 5, 3}));
    return scaled_dot_product_attention(q, k, v);
  };
  m["max_pool2d"] = Pool(MIXRT_POOL_MAX);
  m["avg_pool2d"] = Pool(MIXRT_POOL_AVG);
  m["cross_entropy"] = [](const Device& d, DType t) -> absl::StatusOr<Tensor> {
    MIXRT_ASSIGN_OR_RETURN(Tensor x, Floats(d, t, {4, 3}));
    MIXRT_ASSIGN_OR_RETURN(Tensor y, Classes(d));
    return cross_entropy(x, y);
  };
  m["nll_loss"] = [](const Device& d, DType t) -> absl::StatusOr<Tensor> {
    MIXRT_ASSIGN_OR_RETURN(Tensor x, Floats(d, t, {4, 3}));
    MIXRT_ASSIGN_OR_RETURN(Tensor y, Classes(d));
    return nll_loss(x, y);
  };
  m["mse_loss"] = BinaryOp([](auto& a, auto& b) { return mse_loss(a, b); });
  m["l1_loss"] = BinaryOp([](auto& a, auto& b) { return l1_loss(a, b); });
  m["smooth_l1_loss"] =
      BinaryOp([](auto& a, auto& b) { return smooth_l1_loss(a, b); });
  m["binary_cross_entropy_with_logits"] = BinaryOp(
      [](auto& a, auto& b) { return binary_cross_entropy_with_logits(a, b); },
      0, 1);
  m["binary_cross_entropy"] = [](const Device& d,
                                 DType t) -> absl::StatusOr<Tensor> {
    MIXRT_ASSIGN_OR_RETURN(Tensor p, Floats(d, t, {4, 3}, 0.1, 0.9));
    MIXRT_ASSIGN_OR_RETURN(Tensor y, Floats(d, t, {4, 3}, 0, 1));
    return binary_cross_entropy(p, y);
  };
  return ops;
}

}  // namespace

const std::map<std::string, AutocastOpCall>& AutocastOps() {
  static const auto* ops = MakeOps();
  return *ops;
}

}  // namespace mixrt::testing
