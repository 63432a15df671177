#include "core/plugin/backend.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/allocator/caching_allocator.h"

namespace mixrt {

absl::string_view OpClassName(MixrtOpClass op_class) {
  static constexpr absl::string_view kNames[MIXRT_OP_CLASS_COUNT] = {
      "matmul",    "conv",    "pool",          "elementwise",
      "reduction", "softmax", "normalization", "loss",
      "embedding", "cast",    "optimizer"};
  return op_class < MIXRT_OP_CLASS_COUNT ? kNames[op_class] : "?";
}

absl::string_view SupportLevelName(MixrtSupportLevel level) {
  switch (level) {
    case MIXRT_SUPPORT_NATIVE:
      return "native";
    case MIXRT_SUPPORT_SLOW:
      return "slow";
    default:
      return "unsupported";
  }
}

namespace {

// A plugin's message_size is not trusted: a wrong one must not make the host
// read past the string, so the length is the NUL's position, at most
// message_size and at most 4 KiB.
size_t BoundedMessageLength(const MixrtError_Message_Args& msg) {
  constexpr size_t kMaxMessage = 4096;
  return strnlen(msg.message, std::min(msg.message_size, kMaxMessage));
}

}  // namespace

absl::Status PluginErrorToStatus(const MixrtPluginApi* api, MixrtError* error,
                                 absl::string_view backend,
                                 absl::string_view what) {
  if (error == nullptr) return absl::OkStatus();
  MixrtError_Message_Args msg{};
  msg.struct_size = sizeof(msg);
  msg.error = error;
  api->error_message(&msg);
  MixrtError_GetCode_Args code{};
  code.struct_size = sizeof(code);
  code.error = error;
  code.code = MIXRT_ERROR_CODE_INTERNAL;
  api->error_get_code(&code);
  const std::string text = absl::StrCat(
      "backend '", backend, "' ", what, ": ",
      msg.message != nullptr
          ? absl::string_view(msg.message, BoundedMessageLength(msg))
          : absl::string_view("(no message)"));
  MixrtError_Destroy_Args destroy{};
  destroy.struct_size = sizeof(destroy);
  destroy.error = error;
  api->error_destroy(&destroy);
  switch (code.code) {
    case MIXRT_ERROR_CODE_INVALID_ARGUMENT:
      return absl::InvalidArgumentError(text);
    case MIXRT_ERROR_CODE_UNIMPLEMENTED:
      return absl::UnimplementedError(text);
    case MIXRT_ERROR_CODE_OUT_OF_MEMORY:
      return absl::ResourceExhaustedError(text);
    case MIXRT_ERROR_CODE_NO_DEVICE:
      return absl::NotFoundError(text);
    case MIXRT_ERROR_CODE_FAILED_PRECONDITION:
      return absl::FailedPreconditionError(text);
    case MIXRT_ERROR_CODE_UNAVAILABLE:
      return absl::UnavailableError(text);
    default:
      return absl::InternalError(text);
  }
}

Backend::Backend(void* handle, const MixrtPluginApi* api,
                 BackendIdentity identity, std::vector<DeviceInfo> devices,
                 std::string no_device_reason)
    : handle_(handle),
      api_(api),
      identity_(std::move(identity)),
      devices_(std::move(devices)),
      no_device_reason_(std::move(no_device_reason)) {
  for (const DeviceInfo& device : devices_) {
    allocators_.push_back(
        std::make_unique<CachingAllocator>(this, device.index));
  }
}

// Plugins stay mapped: code and static data of the plugin may still be
// referenced by the process (see the header).
Backend::~Backend() = default;

absl::Status Backend::CheckDevice(int device) const {
  if (device < 0 || device >= static_cast<int>(devices_.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("backend '", name(), "' has no device ", device,
                     " (it has ", devices_.size(), ")"));
  }
  return absl::OkStatus();
}

CachingAllocator& Backend::allocator(int device) const {
  return *allocators_.at(device);
}

absl::StatusOr<void*> Backend::Allocate(int device, uint64_t bytes) const {
  if (absl::Status s = CheckDevice(device); !s.ok()) return s;
  MixrtMemory_Allocate_Args args{};
  args.struct_size = sizeof(args);
  args.device = device;
  args.bytes = bytes;
  absl::Status s = PluginErrorToStatus(api_, api_->memory_allocate(&args),
                                       name(), "memory_allocate");
  if (!s.ok()) return s;
  if (args.ptr == nullptr && bytes > 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("backend '", name(), "' returned NULL allocating ", bytes,
                     " bytes on device ", device));
  }
  return args.ptr;
}

absl::Status Backend::Free(int device, void* ptr) const {
  if (absl::Status s = CheckDevice(device); !s.ok()) return s;
  MixrtMemory_Free_Args args{};
  args.struct_size = sizeof(args);
  args.device = device;
  args.ptr = ptr;
  return PluginErrorToStatus(api_, api_->memory_free(&args), name(),
                             "memory_free");
}

absl::Status Backend::Copy(int device, MixrtCopyKind kind, void* dst,
                           const void* src, uint64_t bytes) const {
  if (absl::Status s = CheckDevice(device); !s.ok()) return s;
  if (bytes == 0) return absl::OkStatus();
  MixrtMemory_Copy_Args args{};
  args.struct_size = sizeof(args);
  args.device = device;
  args.kind = kind;
  args.dst = dst;
  args.src = src;
  args.bytes = bytes;
  return PluginErrorToStatus(api_, api_->memory_copy(&args), name(),
                             "memory_copy");
}

absl::Status Backend::Memset(int device, void* dst, uint8_t value,
                             uint64_t bytes) const {
  if (absl::Status s = CheckDevice(device); !s.ok()) return s;
  if (bytes == 0) return absl::OkStatus();
  if (api_->memory_set == nullptr) {
    // Optional in the ABI: fall back to a host buffer and a copy.
    std::string host(bytes, static_cast<char>(value));
    return Copy(device, MIXRT_COPY_HOST_TO_DEVICE, dst, host.data(), bytes);
  }
  MixrtMemory_Set_Args args{};
  args.struct_size = sizeof(args);
  args.device = device;
  args.dst = dst;
  args.value = value;
  args.bytes = bytes;
  return PluginErrorToStatus(api_, api_->memory_set(&args), name(),
                             "memory_set");
}

absl::Status Backend::Synchronize(int device) const {
  if (absl::Status s = CheckDevice(device); !s.ok()) return s;
  MixrtDevice_Synchronize_Args args{};
  args.struct_size = sizeof(args);
  args.device = device;
  return PluginErrorToStatus(api_, api_->device_synchronize(&args), name(),
                             "device_synchronize");
}

absl::Status Backend::Launch(int device, MixrtOp op,
                             absl::Span<const MixrtTensorDesc> inputs,
                             absl::Span<const MixrtTensorDesc> outputs,
                             const void* attrs) const {
  if (absl::Status s = CheckDevice(device); !s.ok()) return s;
  MixrtKernel_Launch_Args args{};
  args.struct_size = sizeof(args);
  args.device = device;
  args.op = op;
  args.num_inputs = static_cast<int32_t>(inputs.size());
  args.inputs = inputs.data();
  args.num_outputs = static_cast<int32_t>(outputs.size());
  args.outputs = outputs.data();
  args.attrs = attrs;
  return PluginErrorToStatus(api_, api_->kernel_launch(&args), name(),
                             absl::StrCat("kernel_launch(op ", op, ")"));
}

}  // namespace mixrt
