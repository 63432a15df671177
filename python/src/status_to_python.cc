#include "python/src/status_to_python.h"

#include <string>

#include "absl/status/status.h"
#include "nanobind/nanobind.h"

namespace nb = nanobind;

namespace mixrt::python {

void ThrowIfError(const absl::Status& status) {
  if (status.ok()) return;
  const std::string message(status.message());
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
      throw nb::value_error(message.c_str());
    case absl::StatusCode::kOutOfRange:
      throw nb::index_error(message.c_str());
    case absl::StatusCode::kUnimplemented:
      throw NotImplemented(message);
    case absl::StatusCode::kResourceExhausted:
      throw OutOfMemory(message);
    default:
      throw std::runtime_error(message);
  }
}

void RegisterExceptionTranslators() {
  // Translated with the GIL held (a kernel's failure is thrown while the
  // GIL is released).
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const NotImplemented& e) {
      PyErr_SetString(PyExc_NotImplementedError, e.what());
    } catch (const OutOfMemory& e) {
      PyErr_SetString(PyExc_MemoryError, e.what());
    }
  });
}

}  // namespace mixrt::python
