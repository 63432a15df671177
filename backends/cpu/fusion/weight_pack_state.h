// When a fused kernel reads a WEIGHT from a copy packed into oneDNN's
// preferred layout (fused_matmul.h, fused_conv.h): packing pays when a
// version serves several runs (serving); a weight whose version changes
// before its pack served two runs (an optimizer stepping it) runs plain
// from then on, as eager does. A kernel never told a version packs nothing.
#ifndef MIXRT_BACKENDS_CPU_FUSION_WEIGHT_PACK_STATE_H_
#define MIXRT_BACKENDS_CPU_FUSION_WEIGHT_PACK_STATE_H_

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "mixrt/status_macros.h"

namespace mixrt::cpu {

class WeightPackState {
 public:
  // The version the next runs see (FusedKernel::SetWeightVersion).
  void SetVersion(uint64_t version) {
    if (told_ && packed_for_.has_value() && *packed_for_ != version &&
        runs_of_pack_ < 2) {
      plain_ = true;
    }
    told_ = true;
    version_ = version;
  }
  // Whether runs read the packed copy (else the weight as it is): then,
  // once packed, they never read the weight's memory while the version
  // stands (FusedKernel::KeepsCopyOf).
  bool Packs() const { return told_ && !plain_; }
  // Whether the copy must be packed from the current version first.
  bool Stale() const {
    return !packed_for_.has_value() || *packed_for_ != version_;
  }
  void Packed() {
    packed_for_ = version_;
    runs_of_pack_ = 0;
  }
  void Ran() { ++runs_of_pack_; }
  // The copy no longer holds what the runs need (a conv's folded scale
  // changed): the next run packs from the weight.
  void Forget() { packed_for_.reset(); }

  // run() on the packed copy, after pack(from_copy) where it is stale or
  // `repack` says its layout no longer fits; packed again once when run()
  // answers FAILED_PRECONDITION (the primitive now wants another layout).
  // from_copy: the copy already holds this version and only needs another
  // layout, so pack may re-lay it out instead of reading the weight, whose
  // memory the host may have released (KeepsCopyOf).
  template <typename Pack, typename Run>
  absl::Status RunPacked(bool repack, Pack pack, Run run) {
    for (int attempt = 0; attempt < 2; ++attempt) {
      if (Stale() || repack || attempt > 0) {
        MIXRT_RETURN_IF_ERROR(pack(/*from_copy=*/!Stale()));
        Packed();
      }
      Ran();
      const absl::Status status = run();
      if (!absl::IsFailedPrecondition(status)) return status;
    }
    return absl::InternalError("the packed weights' layout keeps changing");
  }

 private:
  bool told_ = false;
  bool plain_ = false;
  uint64_t version_ = 0;
  std::optional<uint64_t> packed_for_;
  int runs_of_pack_ = 0;
};

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_FUSION_WEIGHT_PACK_STATE_H_
