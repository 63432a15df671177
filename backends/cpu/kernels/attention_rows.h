// Where the CPU plugin's attention forward reads and writes its operands'
// rows. The operator hands it dense [G, R, C] tensors; a fused kernel
// (fused_attention.h) hands it the heads where a packed projection wrote
// them, [B, T, 3, H, D] read as q, k and v [B * H, T, D] through strides,
// so the head split's copies never happen.
#ifndef MIXRT_BACKENDS_CPU_KERNELS_ATTENTION_ROWS_H_
#define MIXRT_BACKENDS_CPU_KERNELS_ATTENTION_ROWS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "mixrt/plugin_api.h"
#include "plugins/sdk/call_decoders.h"

namespace mixrt::cpu {

// Row r of group g (g = b * heads + h) starts b * batch_stride +
// h * head_stride + r * row_stride elements from `data`; its elements are
// contiguous.
struct GroupRows {
  void* data = nullptr;
  MixrtDtype dtype = MIXRT_DTYPE_F32;
  int64_t heads = 1, batch_stride = 0, head_stride = 0, row_stride = 0;

  // A contiguous [G, rows, cols] tensor's.
  static GroupRows Dense(void* data, MixrtDtype dtype, int64_t rows,
                         int64_t cols);
  int64_t Offset(int64_t g, int64_t r) const {
    return (g / heads) * batch_stride + (g % heads) * head_stride +
           r * row_stride;
  }
  // Whether a group's `rows` rows of `cols` lie back to back.
  bool Packed(int64_t cols) const { return row_stride == cols; }
};

struct AttentionForwardRows {
  GroupRows q, k, v, out;
  float* lse = nullptr;  // [G, L], dense.
};

// MIXRT_OP_SCALED_DOT_PRODUCT_ATTENTION of `a` (its attrs, sizes and mask;
// its tensors' dtype) on the rows `rows` names.
absl::Status RunAttentionForward(const sdk::AttentionCall& a,
                                 const AttentionForwardRows& rows);

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_KERNELS_ATTENTION_ROWS_H_
