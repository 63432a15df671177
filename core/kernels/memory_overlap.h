// Whether a write and what it reads share memory, as PyTorch decides it
// (ATen's MemoryOverlap): its verdicts are the contract, so that code that
// runs there runs here and code it refuses is refused here, never run to a
// silently corrupted result (`m[:, :] = m.T` wrote the transpose over the
// rows it was still reading).
//
//   kNo       different memory, or one side empty
//   kFull     the same elements in the same layout (x.copy_(x))
//   kPartial  both dense, overlapping, not the same layout: PyTorch refuses
//   kTooHard  one side has gaps or repeats, so PyTorch does not look: it
//             runs in its loop order; mixrt reads through a copy when the
//             two may overlap, so the write sees the source as it was
#ifndef MIXRT_CORE_KERNELS_MEMORY_OVERLAP_H_
#define MIXRT_CORE_KERNELS_MEMORY_OVERLAP_H_

#include "absl/status/status.h"
#include "core/tensor/tensor.h"

namespace mixrt::kernels {

enum class MemoryOverlap { kNo, kFull, kPartial, kTooHard };

// PyTorch's get_overlap_status(a, b).
MemoryOverlap OverlapOf(const Tensor& a, const Tensor& b);

// Whether `t` is laid out without gaps or repeats (some order of its dims
// is contiguous): PyTorch's is_non_overlapping_and_dense.
bool IsNonOverlappingAndDense(const Tensor& t);

// Whether some element of `t` is written twice (a dim of size > 1 with
// stride 0, an expand): FailedPrecondition with PyTorch's message
// (RuntimeError in Python, as PyTorch raises).
absl::Status CheckNoInternalOverlap(const Tensor& t);

// Refuses, with PyTorch's message, a write into `dst` that reads `src`
// where the two partly overlap (kPartial).
absl::Status CheckNoPartialOverlap(const Tensor& dst, const Tensor& src);

// Whether the byte ranges of `a` and `b` (first to last element) meet in
// one storage: reading `b` while writing `a` may then see new values.
bool MayShareElements(const Tensor& a, const Tensor& b);

}  // namespace mixrt::kernels

#endif  // MIXRT_CORE_KERNELS_MEMORY_OVERLAP_H_
