// SmallVector<T, N>: a vector whose first N elements live inside it, so a
// kernel launch of a few tensors allocates nothing (two heap allocations
// per launch were a tenth of a small model's step). For trivially copyable
// T only (TensorRef), which keeps it a few lines.
#ifndef MIXRT_PLUGINS_SDK_SMALL_VECTOR_H_
#define MIXRT_PLUGINS_SDK_SMALL_VECTOR_H_

#include <cstddef>
#include <initializer_list>
#include <new>
#include <type_traits>
#include <vector>

namespace mixrt::sdk {

template <typename T, size_t N>
class SmallVector {
  static_assert(std::is_trivially_copyable_v<T> &&
                    std::is_trivially_destructible_v<T>,
                "SmallVector holds trivially copyable values");

 public:
  using value_type = T;
  using iterator = T*;
  using const_iterator = const T*;

  SmallVector() = default;
  SmallVector(std::initializer_list<T> values) { *this = values; }
  SmallVector& operator=(std::initializer_list<T> values) {
    clear();
    reserve(values.size());
    for (const T& v : values) push_back(v);
    return *this;
  }
  SmallVector(const SmallVector& other) { *this = other; }
  SmallVector& operator=(const SmallVector& other) {
    if (this == &other) return *this;
    clear();
    reserve(other.size());
    for (const T& v : other) push_back(v);
    return *this;
  }

  void push_back(const T& v) {
    if (size_ < N) {
      new (inline_data() + size_) T(v);
    } else {
      if (heap_.empty()) heap_.assign(inline_data(), inline_data() + N);
      heap_.push_back(v);
    }
    ++size_;
  }
  template <typename... Args>
  T& emplace_back(Args&&... args) {
    push_back(T(static_cast<Args&&>(args)...));
    return back();
  }
  void reserve(size_t n) {
    if (n > N) heap_.reserve(n);
  }
  void clear() {
    size_ = 0;
    heap_.clear();
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* data() { return size_ > N ? heap_.data() : inline_data(); }
  const T* data() const { return size_ > N ? heap_.data() : inline_data(); }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  T& front() { return data()[0]; }
  const T& front() const { return data()[0]; }
  T& back() { return data()[size_ - 1]; }
  const T& back() const { return data()[size_ - 1]; }
  T* begin() { return data(); }
  T* end() { return data() + size_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }

 private:
  T* inline_data() { return reinterpret_cast<T*>(inline_); }
  const T* inline_data() const { return reinterpret_cast<const T*>(inline_); }

  size_t size_ = 0;
  // Raw storage: T need not be default-constructible (TensorRef is not).
  alignas(T) unsigned char inline_[N * sizeof(T)];
  std::vector<T> heap_;  // All elements once there are more than N.
};

}  // namespace mixrt::sdk

#endif  // MIXRT_PLUGINS_SDK_SMALL_VECTOR_H_
