// Span<T>: a pointer and a length over contiguous elements (std::span's
// subset the SDK uses; C++17 has none), made from any container with
// data() and size() (std::vector, std::array, absl::Span, SmallVector) or
// from an initializer list.
#ifndef MIXRT_PLUGINS_SDK_SPAN_H_
#define MIXRT_PLUGINS_SDK_SPAN_H_

#include <cstddef>
#include <initializer_list>
#include <type_traits>
#include <utility>

namespace mixrt::sdk {

template <typename T>
class Span {
 public:
  using value_type = std::remove_cv_t<T>;
  using iterator = T*;
  using const_iterator = T*;

  constexpr Span() = default;
  constexpr Span(T* data, size_t size) : data_(data), size_(size) {}
  template <typename C,
            typename = std::enable_if_t<
                !std::is_same_v<std::decay_t<C>, Span> &&
                std::is_convertible_v<decltype(std::declval<C&>().data()), T*>>,
            typename = decltype(std::declval<C&>().size())>
  constexpr Span(C& c)  // NOLINT: implicit, as absl::Span and std::span.
      : data_(c.data()), size_(c.size()) {}
  template <
      typename C,
      typename = std::enable_if_t<
          !std::is_same_v<std::decay_t<C>, Span> && std::is_const_v<T> &&
          std::is_convertible_v<decltype(std::declval<const C&>().data()), T*>>,
      typename = decltype(std::declval<const C&>().size())>
  constexpr Span(const C& c)  // NOLINT
      : data_(c.data()), size_(c.size()) {}
  // The list's elements live until the end of the full expression: pass a
  // braced list to a function taking a Span, never keep such a Span (as
  // absl::Span; GCC warns at every use, hence the pragma).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winit-list-lifetime"
#endif
  template <typename U = T, typename = std::enable_if_t<std::is_const_v<U>>>
  constexpr Span(std::initializer_list<value_type> list)  // NOLINT
      : data_(list.begin()), size_(list.size()) {}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
  template <size_t N>
  constexpr Span(T (&array)[N])  // NOLINT
      : data_(array), size_(N) {}

  constexpr T* data() const { return data_; }
  constexpr size_t size() const { return size_; }
  constexpr bool empty() const { return size_ == 0; }
  constexpr T& operator[](size_t i) const { return data_[i]; }
  constexpr T& front() const { return data_[0]; }
  constexpr T& back() const { return data_[size_ - 1]; }
  constexpr T* begin() const { return data_; }
  constexpr T* end() const { return data_ + size_; }
  constexpr Span subspan(size_t offset, size_t count = size_t(-1)) const {
    const size_t start = offset < size_ ? offset : size_;
    const size_t left = size_ - start;
    return Span(data_ + start, count < left ? count : left);
  }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
};

template <typename T>
constexpr Span<const T> MakeConstSpan(const T* data, size_t size) {
  return Span<const T>(data, size);
}
template <typename C>
constexpr auto MakeConstSpan(const C& c) {
  return Span<const std::remove_pointer_t<decltype(c.data())>>(c.data(),
                                                               c.size());
}

}  // namespace mixrt::sdk

#endif  // MIXRT_PLUGINS_SDK_SPAN_H_
