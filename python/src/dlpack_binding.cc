// Zero-copy exchange with NumPy, PyTorch and any array-API library:
// Tensor.__dlpack__ / __dlpack_device__ export a tensor's memory (host
// memory devices only), and _from_dlpack_capsule adopts another library's
// (mixrt.from_dlpack calls its __dlpack__ first). Memory shared either way
// is Storage::external(): writes from the other side bump no version, so
// nothing mixrt keeps is kept for it.
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/autograd/differentiable_cast.h"
#include "core/tensor/tensor.h"
#include "nanobind/nanobind.h"
#include "nanobind/stl/optional.h"
#include "nanobind/stl/pair.h"
#include "python/src/bindings.h"
#include "python/src/current_device.h"
#include "python/src/dlpack.h"
#include "python/src/status_to_python.h"

namespace nb = nanobind;

namespace mixrt::python {
namespace {

using namespace dlpack;  // NOLINT: the spec's names.

constexpr char kLegacyName[] = "dltensor";
constexpr char kVersionedName[] = "dltensor_versioned";
constexpr char kUsedLegacyName[] = "used_dltensor";
constexpr char kUsedVersionedName[] = "used_dltensor_versioned";

[[noreturn]] void BufferError(const std::string& message) {
  throw nb::builtin_exception(nb::exception_type::buffer_error,
                              message.c_str());
}

DLDataType ToDlpack(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return {kDLFloat, 32, 1};
    case DType::kF16:
      return {kDLFloat, 16, 1};
    case DType::kBF16:
      return {kDLBfloat, 16, 1};
    case DType::kI32:
      return {kDLInt, 32, 1};
    case DType::kI64:
      return {kDLInt, 64, 1};
    case DType::kBool:
      return {kDLBool, 8, 1};
  }
  return {kDLFloat, 32, 1};
}

std::optional<DType> FromDlpack(DLDataType t) {
  if (t.lanes != 1) return std::nullopt;
  if (t.code == kDLFloat && t.bits == 32) return DType::kF32;
  if (t.code == kDLFloat && t.bits == 16) return DType::kF16;
  if (t.code == kDLBfloat && t.bits == 16) return DType::kBF16;
  if (t.code == kDLInt && t.bits == 32) return DType::kI32;
  if (t.code == kDLInt && t.bits == 64) return DType::kI64;
  if (t.code == kDLBool && t.bits == 8) return DType::kBool;
  return std::nullopt;
}

// What an exported DLTensor points into: the tensor (its storage stays
// alive) and the shape and strides arrays the DLTensor points at.
struct Export {
  Tensor tensor;
  std::vector<int64_t> shape, strides;
};

template <typename Managed>
void DeleteExport(Managed* self) {
  delete static_cast<Export*>(self->manager_ctx);
  delete self;
}

template <typename Managed>
void FillExport(Managed* managed, Export* e) {
  const Tensor& t = e->tensor;
  managed->manager_ctx = e;
  managed->deleter = &DeleteExport<Managed>;
  DLTensor& d = managed->dl_tensor;
  d.data = static_cast<char*>(t.storage()->data()) +
           t.offset() * static_cast<int64_t>(DTypeSize(t.dtype()));
  d.device = {kDLCPU, 0};
  d.ndim = t.ndim();
  d.dtype = ToDlpack(t.dtype());
  d.shape = e->shape.data();
  d.strides = e->strides.data();
  d.byte_offset = 0;
}

// A capsule nobody consumed frees what it holds.
template <typename Managed>
void CapsuleDestructor(PyObject* capsule, const char* name) {
  if (!PyCapsule_IsValid(capsule, name)) return;  // Consumed ("used_...").
  auto* managed = static_cast<Managed*>(PyCapsule_GetPointer(capsule, name));
  if (managed != nullptr && managed->deleter != nullptr)
    managed->deleter(managed);
}

nb::object ExportTensor(const Tensor& tensor, nb::handle stream,
                        std::optional<std::pair<int, int>> max_version,
                        std::optional<std::pair<int, int>> dl_device,
                        std::optional<bool> copy) {
  (void)stream;  // Host memory: nothing to order.
  if (!tensor.device().has_flag(MIXRT_DEVICE_FLAG_HOST_MEMORY)) {
    BufferError("__dlpack__: tensor on " + tensor.device().ToString() +
                " is not in host memory (only host-memory devices export "
                "through DLPack yet)");
  }
  if (dl_device.has_value() && dl_device->first != kDLCPU) {
    BufferError("__dlpack__: cannot export to device type " +
                std::to_string(dl_device->first) +
                " (this tensor is in host memory, kDLCPU)");
  }
  if (tensor.requires_grad()) {
    throw std::runtime_error(
        "Can't export tensors that require gradient, use tensor.detach()");
  }
  auto* e = new Export{
      copy.value_or(false) ? ValueOrThrow(tensor.clone()) : tensor, {}, {}};
  e->shape.assign(e->tensor.shape().begin(), e->tensor.shape().end());
  e->strides.assign(e->tensor.strides().begin(), e->tensor.strides().end());
  e->tensor.storage()->MarkShared();
  const bool versioned = max_version.has_value() &&
                         max_version->first >= static_cast<int>(kMajorVersion);
  if (!versioned) {
    auto* managed = new DLManagedTensor{};
    FillExport(managed, e);
    PyObject* capsule = PyCapsule_New(managed, kLegacyName, [](PyObject* c) {
      CapsuleDestructor<DLManagedTensor>(c, kLegacyName);
    });
    if (capsule == nullptr) {
      DeleteExport(managed);
      throw nb::python_error();
    }
    return nb::steal(capsule);
  }
  auto* managed = new DLManagedTensorVersioned{};
  managed->version = {kMajorVersion, kMinorVersion};
  managed->flags = copy.value_or(false) ? kFlagIsCopied : 0;
  FillExport(managed, e);
  PyObject* capsule = PyCapsule_New(managed, kVersionedName, [](PyObject* c) {
    CapsuleDestructor<DLManagedTensorVersioned>(c, kVersionedName);
  });
  if (capsule == nullptr) {
    DeleteExport(managed);
    throw nb::python_error();
  }
  return nb::steal(capsule);
}

// Checks a DLTensor and the extent it covers, in bytes (a strided view
// reaches the byte after its last element).
uint64_t CheckedExtent(const DLTensor& d, DType dtype,
                       std::vector<int64_t>* shape,
                       std::vector<int64_t>* strides) {
  if (d.device.device_type != kDLCPU && d.device.device_type != kDLCUDAHost) {
    BufferError("from_dlpack: the array is on device type " +
                std::to_string(d.device.device_type) +
                "; mixrt adopts host memory only (kDLCPU)");
  }
  if (d.ndim < 0 || d.ndim > 64) {
    throw nb::value_error(
        ("from_dlpack: bad rank " + std::to_string(d.ndim)).c_str());
  }
  shape->assign(d.shape, d.shape + d.ndim);
  strides->resize(d.ndim);
  int64_t step = 1;
  for (int i = d.ndim - 1; i >= 0; --i) {
    if ((*shape)[i] < 0) throw nb::value_error("from_dlpack: negative size");
    (*strides)[i] = d.strides != nullptr ? d.strides[i] : step;
    step *= std::max<int64_t>((*shape)[i], 1);
  }
  int64_t last = 0;
  for (int i = 0; i < d.ndim; ++i) {
    if ((*shape)[i] == 0) return 0;
    if ((*strides)[i] < 0) {
      throw nb::value_error(
          "from_dlpack: negative strides are not supported (the array is a "
          "reversed view); pass a copy (numpy.ascontiguousarray)");
    }
    last += ((*shape)[i] - 1) * (*strides)[i];
  }
  const uint64_t size = DTypeSize(dtype);
  const auto address = reinterpret_cast<uintptr_t>(d.data) + d.byte_offset;
  if (address % size != 0) {
    throw nb::value_error(
        "from_dlpack: the data is not aligned to its element size");
  }
  return static_cast<uint64_t>(last + 1) * size;
}

template <typename Managed>
Tensor Adopt(Managed* managed, const DLTensor& d) {
  const std::optional<DType> dtype = FromDlpack(d.dtype);
  if (!dtype.has_value()) {
    throw nb::type_error(("from_dlpack: unsupported dtype (code " +
                          std::to_string(d.dtype.code) + ", " +
                          std::to_string(d.dtype.bits) + " bits, " +
                          std::to_string(d.dtype.lanes) +
                          " lanes); mixrt takes float32/16, bfloat16, "
                          "int32/64 and bool")
                             .c_str());
  }
  std::vector<int64_t> shape, strides;
  const uint64_t bytes = CheckedExtent(d, *dtype, &shape, &strides);
  void* data = static_cast<char*>(d.data) + d.byte_offset;
  // The owner's deleter may be Python (NumPy decrefs its array): it runs
  // with the GIL, and not at all once the interpreter is gone.
  std::shared_ptr<Storage> storage =
      Storage::Adopt(HostMemoryDevice(), data, bytes, [managed] {
        if (!Py_IsInitialized()) return;
        nb::gil_scoped_acquire gil;
        if (managed->deleter != nullptr) managed->deleter(managed);
      });
  return Tensor(std::move(storage), *dtype, Shape(shape.begin(), shape.end()),
                Strides(strides.begin(), strides.end()), 0);
}

Tensor FromCapsule(nb::handle capsule) {
  PyObject* c = capsule.ptr();
  if (PyCapsule_IsValid(c, kVersionedName)) {
    auto* managed = static_cast<DLManagedTensorVersioned*>(
        PyCapsule_GetPointer(c, kVersionedName));
    if (managed->version.major > kMajorVersion) {
      BufferError("from_dlpack: DLPack version " +
                  std::to_string(managed->version.major) + "." +
                  std::to_string(managed->version.minor) +
                  " is newer than mixrt reads (1.x)");
    }
    if ((managed->flags & kFlagReadOnly) != 0) {
      BufferError(
          "from_dlpack: the array is read-only; mixrt tensors are writable "
          "and share its memory: pass a writable array or a copy "
          "(mixrt.tensor(x) copies)");
    }
    Tensor t = Adopt(managed, managed->dl_tensor);
    PyCapsule_SetName(c, kUsedVersionedName);
    return t;
  }
  if (PyCapsule_IsValid(c, kLegacyName)) {
    auto* managed =
        static_cast<DLManagedTensor*>(PyCapsule_GetPointer(c, kLegacyName));
    Tensor t = Adopt(managed, managed->dl_tensor);
    PyCapsule_SetName(c, kUsedLegacyName);
    return t;
  }
  throw nb::type_error(
      "from_dlpack: expected a DLPack capsule (\"dltensor\" or "
      "\"dltensor_versioned\") that was not consumed yet");
}

}  // namespace

void BindDlpack(nb::module_& m, nb::class_<Tensor>& cls) {
  cls.def("__dlpack__", &ExportTensor, nb::kw_only(),
          nb::arg("stream") = nb::none(), nb::arg("max_version") = nb::none(),
          nb::arg("dl_device") = nb::none(), nb::arg("copy") = nb::none());
  cls.def("__dlpack_device__", [](const Tensor& t) {
    const bool host = t.device().has_flag(MIXRT_DEVICE_FLAG_HOST_MEMORY);
    return std::make_pair(
        host ? static_cast<int>(kDLCPU) : static_cast<int>(kDLCUDA),
        host ? 0 : t.device().index());
  });
  m.def("_from_dlpack_capsule", &FromCapsule);
  m.def("_mark_shared", [](const Tensor& t) { t.storage()->MarkShared(); });
}

}  // namespace mixrt::python
