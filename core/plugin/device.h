// A device: one of a backend's devices, e.g. "cpu:0".
#ifndef MIXRT_CORE_PLUGIN_DEVICE_H_
#define MIXRT_CORE_PLUGIN_DEVICE_H_

#include <string>

#include "absl/strings/str_cat.h"
#include "core/plugin/backend.h"

namespace mixrt {

class Device {
 public:
  Device() = default;
  Device(const Backend* backend, int index)
      : backend_(backend), index_(index) {}

  const Backend* backend() const { return backend_; }
  int index() const { return index_; }
  bool valid() const { return backend_ != nullptr; }
  const DeviceInfo& info() const { return backend_->devices().at(index_); }
  bool has_flag(uint32_t flag) const { return (info().flags & flag) != 0; }
  // The autocast policy family ("cpu", "cuda").
  const std::string& type() const { return backend_->identity().device_type; }

  std::string ToString() const {
    return backend_ == nullptr ? "none"
                               : absl::StrCat(backend_->name(), ":", index_);
  }

  friend bool operator==(const Device& a, const Device& b) {
    return a.backend_ == b.backend_ && a.index_ == b.index_;
  }
  friend bool operator!=(const Device& a, const Device& b) { return !(a == b); }

 private:
  const Backend* backend_ = nullptr;
  int index_ = 0;
};

}  // namespace mixrt

#endif  // MIXRT_CORE_PLUGIN_DEVICE_H_
