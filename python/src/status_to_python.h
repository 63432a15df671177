// The core's absl::Status as the Python exception PyTorch raises for the
// same mistake, with the core's message: InvalidArgument -> ValueError,
// OutOfRange -> IndexError, Unimplemented -> NotImplementedError,
// ResourceExhausted -> MemoryError, anything else -> RuntimeError.
#ifndef MIXRT_PYTHON_SRC_STATUS_TO_PYTHON_H_
#define MIXRT_PYTHON_SRC_STATUS_TO_PYTHON_H_

#include <stdexcept>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mixrt::python {

struct NotImplemented : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct OutOfMemory : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// Makes NotImplemented and OutOfMemory NotImplementedError and MemoryError.
void RegisterExceptionTranslators();

// Throws the exception for a failed status (a C++ exception nanobind
// turns into the Python one); returns for OK.
void ThrowIfError(const absl::Status& status);

template <typename T>
T ValueOrThrow(absl::StatusOr<T> value) {
  ThrowIfError(value.status());
  return *std::move(value);
}

}  // namespace mixrt::python

#endif  // MIXRT_PYTHON_SRC_STATUS_TO_PYTHON_H_
