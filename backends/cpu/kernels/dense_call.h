// Gives a kernel contiguous tensors: inputs that are strided (or broadcast
// with stride 0) are gathered into owned dense buffers, outputs that are
// strided are computed in dense buffers (starting as copies, for in-place
// ops) and scattered back by Finish(). Already-dense tensors pass through.
#ifndef MIXRT_BACKENDS_CPU_KERNELS_DENSE_CALL_H_
#define MIXRT_BACKENDS_CPU_KERNELS_DENSE_CALL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "plugins/sdk/plugin.h"
#include "plugins/sdk/tensor_ref.h"

namespace mixrt::cpu {

using sdk::DtypeBytes;
using sdk::DtypeName;

// Copies the elements of `src` into `dst` (same shape and dtype), honouring
// both tensors' strides.
void StridedCopy(const sdk::TensorRef& src, const sdk::TensorRef& dst);

class DenseCall {
 public:
  explicit DenseCall(const sdk::KernelCall& call);
  DenseCall(const DenseCall&) = delete;
  DenseCall& operator=(const DenseCall&) = delete;

  const sdk::KernelCall& call() const { return dense_; }
  // Writes dense outputs back into the caller's strided outputs.
  void Finish();

 private:
  sdk::TensorRef Densify(const sdk::TensorRef& t, bool copy_in);

  // A dense copy of one strided tensor: its descriptor points into it, so it
  // must not move. Made only for tensors that need one (two std::deques
  // here allocated on every launch, dense or not).
  struct Copy {
    MixrtTensorDesc desc{};
    std::vector<int64_t> strides;
    std::unique_ptr<uint8_t[]> buffer;
  };

  const sdk::KernelCall& original_;
  sdk::KernelCall dense_;
  std::vector<std::unique_ptr<Copy>> copies_;
};

// `kernel` on `call` made dense; its dense outputs written back when it
// succeeds.
template <typename Kernel>
absl::Status RunDense(const sdk::KernelCall& call, Kernel&& kernel) {
  DenseCall dense(call);
  absl::Status status = kernel(dense.call());
  if (status.ok()) dense.Finish();
  return status;
}

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_KERNELS_DENSE_CALL_H_
