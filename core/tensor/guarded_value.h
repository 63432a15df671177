// A host value that compiled functions guard, as Dynamo guards the Python
// values a frame reads: a traced function that reads it with get() replays
// only while it still holds the value the trace read; after set() to
// another value the next call traces again (with the new value baked in).
// Plain C++ values a compiled function closes over are constants of its
// graph, as in jax.jit: hold the ones that change between calls in a
// GuardedValue (or pass them as tensors).
//
//   mixrt::GuardedValue<double> temperature(2.0, "temperature");
//   auto f = *mixrt::compile([&](const std::vector<Tensor>& in) {
//     return std::vector<Tensor>{*mixrt::scale(in[0], 1 / temperature.get())};
//   });
//   temperature.set(3.0);  // f's next call traces again.
#ifndef MIXRT_CORE_TENSOR_GUARDED_VALUE_H_
#define MIXRT_CORE_TENSOR_GUARDED_VALUE_H_

#include <atomic>
#include <memory>
#include <sstream>
#include <string>
#include <type_traits>

#include "core/tensor/capture_hooks.h"

namespace mixrt {

template <typename T>
class GuardedValue {
  static_assert(std::is_trivially_copyable_v<T>,
                "GuardedValue holds plain values (bool, integers, floats)");

 public:
  explicit GuardedValue(T value, std::string name = "a GuardedValue")
      : cell_(std::make_shared<Cell>(value, std::move(name))) {}
  // A copy is a value of its own, with the same value and name.
  GuardedValue(const GuardedValue& other)
      : GuardedValue(other.cell_->value.load(), other.cell_->name) {}
  GuardedValue& operator=(const GuardedValue& other) {
    set(other.get_unguarded());
    return *this;
  }

  // The value; inside a trace, also a guard on it.
  T get() const {
    const T value = cell_->value.load(std::memory_order_acquire);
    if (ActiveCaptureHooks() != nullptr) {
      std::weak_ptr<Cell> weak = cell_;
      std::ostringstream what;
      what << std::boolalpha << cell_->name << " = " << value;
      ReportHostGuard({cell_.get(), what.str(), [weak, value] {
                         const std::shared_ptr<Cell> cell = weak.lock();
                         return cell != nullptr &&
                                cell->value.load(std::memory_order_acquire) ==
                                    value;
                       }});
    }
    return value;
  }
  // The value without a guard: for code outside compiled functions that
  // must not make one (a wrapper choosing which compiled function to call).
  T get_unguarded() const {
    return cell_->value.load(std::memory_order_acquire);
  }
  void set(T value) { cell_->value.store(value, std::memory_order_release); }

 private:
  struct Cell {
    Cell(T v, std::string n) : value(v), name(std::move(n)) {}
    std::atomic<T> value;
    const std::string name;
  };
  std::shared_ptr<Cell> cell_;
};

}  // namespace mixrt

#endif  // MIXRT_CORE_TENSOR_GUARDED_VALUE_H_
