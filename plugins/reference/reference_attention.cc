// scaled_dot_product_attention and its backward, naively in double, one
// query row at a time: the oracle the fused kernels are checked against.
#include <cmath>
#include <vector>

#include "mixrt/status_macros.h"
#include "plugins/reference/reference_kernels.h"
#include "plugins/sdk/attention_math.h"

namespace mixrt::reference {
namespace {

using sdk::AttentionCall;

double At(const sdk::TensorRef& t, int64_t g, int64_t r, int64_t c) {
  return t.LoadFloat((g * t.dim(1) + r) * t.dim(2) + c);
}

// Softmax weights of query (g, i) before dropout, from the scores; returns
// the log-normalizer (-inf when every key is hidden).
double Weights(const AttentionCall& a, int64_t g, int64_t i,
               std::vector<double>* p) {
  double max = -INFINITY;
  for (int64_t j = 0; j < a.keys; ++j) {
    double dot = 0;
    for (int64_t e = 0; e < a.head_dim; ++e) {
      dot += At(*a.q, g, i, e) * At(*a.k, g, j, e);
    }
    (*p)[j] = dot * a.attrs->scale + sdk::AttentionBias(a, g, i, j);
    max = std::max(max, (*p)[j]);
  }
  // A NaN score makes the whole row NaN (softmax's sum includes it); a
  // backend must never drop it as if the key were hidden.
  for (double x : *p) {
    if (std::isnan(x)) {
      std::fill(p->begin(), p->end(), NAN);
      return NAN;
    }
  }
  if (max == -INFINITY) {
    std::fill(p->begin(), p->end(), 0.0);
    return -INFINITY;
  }
  double total = 0;
  for (int64_t j = 0; j < a.keys; ++j)
    total += (*p)[j] = std::exp((*p)[j] - max);
  for (int64_t j = 0; j < a.keys; ++j) (*p)[j] /= total;
  return max + std::log(total);
}

void Forward(const AttentionCall& a) {
  std::vector<double> p(a.keys);
  for (int64_t g = 0; g < a.groups; ++g) {
    for (int64_t i = 0; i < a.queries; ++i) {
      const double lse = Weights(a, g, i, &p);
      a.lse->StoreFloat(g * a.queries + i, static_cast<float>(lse));
      for (int64_t c = 0; c < a.value_dim; ++c) {
        double acc = 0;
        for (int64_t j = 0; j < a.keys; ++j) {
          acc += p[j] * sdk::AttentionDropoutFactor(a, g, i, j) *
                 At(*a.v, g, j, c);
        }
        a.out->StoreFloat((g * a.queries + i) * a.value_dim + c,
                          static_cast<float>(acc));
      }
    }
  }
}

void Backward(const AttentionCall& a) {
  std::vector<double> p(a.keys), dq(a.head_dim);
  std::vector<double> dk(a.keys * a.head_dim), dv(a.keys * a.value_dim);
  for (int64_t g = 0; g < a.groups; ++g) {
    std::fill(dk.begin(), dk.end(), 0.0);
    std::fill(dv.begin(), dv.end(), 0.0);
    for (int64_t i = 0; i < a.queries; ++i) {
      Weights(a, g, i, &p);
      // D_i = sum_c dO_ic O_ic = sum_j p_ij dp_ij.
      double d = 0;
      for (int64_t c = 0; c < a.value_dim; ++c) {
        d += At(*a.grad_out, g, i, c) * At(*a.out, g, i, c);
      }
      std::fill(dq.begin(), dq.end(), 0.0);
      for (int64_t j = 0; j < a.keys; ++j) {
        if (p[j] == 0) continue;
        const double factor = sdk::AttentionDropoutFactor(a, g, i, j);
        double dp = 0;  // d loss / d (dropped weight), then / d weight.
        for (int64_t c = 0; c < a.value_dim; ++c) {
          const double go = At(*a.grad_out, g, i, c);
          dv[j * a.value_dim + c] += p[j] * factor * go;
          dp += go * At(*a.v, g, j, c);
        }
        const double ds = p[j] * (dp * factor - d) * a.attrs->scale;
        for (int64_t e = 0; e < a.head_dim; ++e) {
          dq[e] += ds * At(*a.k, g, j, e);
          dk[j * a.head_dim + e] += ds * At(*a.q, g, i, e);
        }
      }
      for (int64_t e = 0; e < a.head_dim; ++e) {
        a.grad_q->StoreFloat((g * a.queries + i) * a.head_dim + e,
                             static_cast<float>(dq[e]));
      }
    }
    for (int64_t n = 0; n < a.keys * a.head_dim; ++n) {
      a.grad_k->StoreFloat(g * a.keys * a.head_dim + n,
                           static_cast<float>(dk[n]));
    }
    for (int64_t n = 0; n < a.keys * a.value_dim; ++n) {
      a.grad_v->StoreFloat(g * a.keys * a.value_dim + n,
                           static_cast<float>(dv[n]));
    }
  }
}

}  // namespace

namespace {

sdk::Status Attention(const sdk::KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(const AttentionCall a, sdk::DecodeAttention(call));
  if (a.backward) {
    Backward(a);
  } else {
    Forward(a);
  }
  return sdk::OkStatus();
}

}  // namespace

std::vector<sdk::OpTable::Row> AttentionOps() {
  return {
      {MIXRT_OP_SCALED_DOT_PRODUCT_ATTENTION, Attention},
      {MIXRT_OP_SCALED_DOT_PRODUCT_ATTENTION_BACKWARD, Attention},
  };
}

}  // namespace mixrt::reference
