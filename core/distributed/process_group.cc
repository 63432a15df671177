#include "core/distributed/process_group.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/shared_library.h"
#include "core/plugin/backend.h"
#include "core/plugin/plugin_search_path.h"
#include "core/tensor/factories.h"
#include "mixrt/status_macros.h"
#include "tools/cpp/runfiles/runfiles.h"

namespace mixrt::distributed {
namespace {

constexpr size_t kErrorSize = 2048;

absl::Status FromCode(int code, const std::string& message) {
  return StatusFromErrorCode(static_cast<MixrtErrorCode>(code), message);
}

bool IsFile(const std::string& path) {
  struct stat st;
  return !path.empty() && stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The plugin built in this workspace (Bazel runfiles of the running
// binary), else one installed beside the library holding the core.
std::string FindPlugin(const std::string& backend, std::string* looked) {
  const std::string file = "libmixrtcomm_" + backend + ".so";
  std::string error;
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  std::unique_ptr<bazel::tools::cpp::runfiles::Runfiles> runfiles;
  if (n > 0) {
    exe[n] = '\0';
    runfiles.reset(bazel::tools::cpp::runfiles::Runfiles::Create(exe, &error));
  }
  if (runfiles == nullptr) {
    runfiles.reset(
        bazel::tools::cpp::runfiles::Runfiles::CreateForTest(&error));
  }
  if (runfiles != nullptr) {
    for (const char* dir : {"mixrt/backends/mpi/", "mixrt/backends/cuda/"}) {
      const std::string path = runfiles->Rlocation(dir + file);
      if (IsFile(path)) return path;
    }
  }
  const std::string dir = CoreObjectDirectory();
  const std::string beside = dir.empty() ? "" : dir + "/" + file;
  *looked = absl::StrCat("the Bazel runfiles and ",
                         beside.empty() ? "the core's directory" : beside);
  return IsFile(beside) ? beside : "";
}

MixrtCollectiveOp ToAbi(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return MIXRT_COLLECTIVE_SUM;
    case ReduceOp::kAvg:
      return MIXRT_COLLECTIVE_AVG;
    case ReduceOp::kMax:
      return MIXRT_COLLECTIVE_MAX;
  }
  return MIXRT_COLLECTIVE_SUM;
}

}  // namespace

Work::Work(Work&& other) noexcept { *this = std::move(other); }

Work& Work::operator=(Work&& other) noexcept {
  if (this != &other) {
    if (work_ != nullptr) Wait().IgnoreError();
    api_ = other.api_;
    work_ = other.work_;
    keep_alive_ = std::move(other.keep_alive_);
    written_ = std::move(other.written_);
    status_ = std::move(other.status_);
    other.work_ = nullptr;
  }
  return *this;
}

Work::~Work() {
  // The plugin still writes into the kept tensors until it is done.
  if (work_ != nullptr) Wait().IgnoreError();
}

absl::Status Work::Wait(double timeout_s) {
  if (work_ == nullptr) return status_;
  char error[kErrorSize] = "";
  const int code = api_->wait(work_, timeout_s, error, sizeof(error));
  api_->release_work(work_);
  work_ = nullptr;
  if (code == MIXRT_ERROR_CODE_OK) {
    for (const Tensor& t : written_) t.storage()->BumpVersion();
  }
  keep_alive_.clear();
  written_.clear();
  status_ = FromCode(code, error);
  return status_;
}

absl::StatusOr<std::shared_ptr<ProcessGroup>> ProcessGroup::Create(
    ProcessGroupOptions options) {
  std::string path = options.plugin_path;
  if (path.empty()) {
    if (const char* env = std::getenv(kCommPluginEnv); env && env[0]) {
      path = env;
    }
  }
  std::string looked;
  if (path.empty()) path = FindPlugin(options.backend, &looked);
  if (path.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "distributed: no collectives plugin libmixrtcomm_", options.backend,
        ".so in ", looked, "; build //backends/mpi, or name the file in ",
        kCommPluginEnv));
  }
  files::SharedLibraryOptions load;
  load.what = "collectives plugin";
  // Named in code: the caller's explicit choice. Found, or named in the
  // environment: it must lie where only root or this user can write.
  load.trusted_location = options.plugin_path.empty();
  // RTLD_GLOBAL: Open MPI dlopens its components, which resolve libmpi's
  // symbols from the global scope.
  load.flags = RTLD_NOW | RTLD_GLOBAL;
  absl::StatusOr<void*> loaded = files::LoadSharedLibrary(path, load);
  if (!loaded.ok()) {
    const std::string why(loaded.status().message());
    return absl::Status(
        loaded.status().code(),
        absl::StrCat("distributed: cannot load ", path, ": ", why,
                     why.find("libmpi") != std::string::npos
                         ? " (Open MPI is not installed: Debian's "
                           "libopenmpi3 and openmpi-bin; "
                           "scripts/setup.sh installs them)"
                         : ""));
  }
  void* library = *loaded;
  auto* get_api = reinterpret_cast<MixrtCollectivesGetApiFn*>(
      dlsym(library, "MixrtCollectivesGetApi"));
  const MixrtCollectivesApi* api = get_api ? get_api() : nullptr;
  if (api == nullptr || api->struct_size < sizeof(MixrtCollectivesApi) ||
      api->abi_version != MIXRT_COLLECTIVES_ABI_VERSION) {
    return absl::FailedPreconditionError(absl::StrCat(
        "distributed: ", path, " is not a collectives plugin of ABI version ",
        MIXRT_COLLECTIVES_ABI_VERSION,
        api ? absl::StrCat(" (it has version ", api->abi_version, ")")
            : " (no MixrtCollectivesGetApi)"));
  }
  if (!options.expected_world_size.has_value()) {
    if (const char* env = std::getenv(kExpectedWorldSizeEnv); env && env[0]) {
      int n = 0;
      if (!absl::SimpleAtoi(env, &n) || n < 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            kExpectedWorldSizeEnv, "=", env, " is not a number of ranks >= 1"));
      }
      options.expected_world_size = n;
    }
  }
  double timeout = options.timeout_s;
  if (timeout <= 0) {
    timeout = 300;
    if (const char* env = std::getenv(kTimeoutEnv); env && env[0]) {
      if (!absl::SimpleAtod(env, &timeout) || !(timeout > 0)) {
        return absl::InvalidArgumentError(absl::StrCat(
            kTimeoutEnv, "=", env, " is not a positive number of seconds"));
      }
    }
  }
  MixrtCommunicatorOptions comm_options{};
  comm_options.struct_size = sizeof(MixrtCommunicatorOptions);
  comm_options.timeout_s = timeout;
  std::shared_ptr<ProcessGroup> bootstrap = options.bootstrap;
  if (std::string(api->name) != "mpi") {
    if (bootstrap == nullptr) {
      MIXRT_ASSIGN_OR_RETURN(bootstrap, Create({.timeout_s = timeout}));
    }
    if (bootstrap->device_memory_) {
      return absl::InvalidArgumentError(
          "distributed: the bootstrap group must move host memory (MPI)");
    }
    comm_options.rank = bootstrap->rank();
    comm_options.world_size = bootstrap->world_size();
    // One device per rank on a node: the local rank picks it.
    if (const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK")) {
      absl::SimpleAtoi(local, &comm_options.device_index);
    }
    comm_options.bootstrap_broadcast = &ProcessGroup::BootstrapBroadcast;
    comm_options.bootstrap_context = bootstrap.get();
  }
  MixrtCommunicator* comm = nullptr;
  char error[kErrorSize] = "";
  const int code = api->create(&comm_options, &comm, error, sizeof(error));
  if (code != MIXRT_ERROR_CODE_OK) {
    return FromCode(code, absl::StrCat("distributed: ", api->name,
                                       " could not join the job: ", error));
  }
  std::shared_ptr<ProcessGroup> group(new ProcessGroup);
  group->library_ = library;
  group->api_ = api;
  group->comm_ = comm;
  group->backend_ = api->name;
  group->timeout_s_ = timeout;
  group->bootstrap_ = std::move(bootstrap);
  MixrtCommunicatorInfo info{sizeof(MixrtCommunicatorInfo)};
  if (api->get_info(comm, &info, error, sizeof(error)) != 0) {
    return absl::InternalError(absl::StrCat("distributed: ", error));
  }
  group->rank_ = info.rank;
  group->world_size_ = info.world_size;
  group->device_memory_ = info.device_memory != 0;
  group->library_name_ = info.library ? info.library : "";
  if (options.expected_world_size.has_value() &&
      *options.expected_world_size != info.world_size) {
    const std::string reason = absl::StrCat(
        "distributed: this job was launched with ", info.world_size,
        " ranks but expects ", *options.expected_world_size,
        " (check mpirun's -np and the hostfile's slots)");
    return absl::FailedPreconditionError(reason);
  }
  return group;
}

ProcessGroup::~ProcessGroup() {
  if (comm_ != nullptr) api_->destroy(comm_, nullptr);
  // The library stays loaded: MPI cannot be initialized twice anyway, and
  // its atexit handlers live in it.
}

int ProcessGroup::BootstrapBroadcast(void* context, void* data, size_t bytes) {
  auto* group = static_cast<ProcessGroup*>(context);
  char error[kErrorSize] = "";
  MixrtCollectiveWork* work = nullptr;
  int code = group->api_->broadcast(group->comm_, data, bytes, 0, &work, error,
                                    sizeof(error));
  if (code != MIXRT_ERROR_CODE_OK) return code;
  code = group->api_->wait(work, 0, error, sizeof(error));
  group->api_->release_work(work);
  return code;
}

std::string ProcessGroup::description() const {
  return absl::StrCat(backend_, " (", library_name_, ")");
}

void ProcessGroup::Abort(const std::string& reason) {
  MixrtCommunicator* comm = comm_;
  comm_ = nullptr;
  api_->destroy(comm, reason.empty() ? "aborted" : reason.c_str());
  std::_Exit(1);
}

absl::Status ProcessGroup::CheckTensor(const Tensor& t, const char* op) const {
  MIXRT_RETURN_IF_ERROR(CheckDefined(t, op));
  if (!t.is_contiguous()) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": the tensor must be contiguous (call contiguous() first)"));
  }
  const bool host = t.device().has_flag(MIXRT_DEVICE_FLAG_HOST_MEMORY);
  if (host == device_memory_) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": the ", backend_, " collectives move ",
                     device_memory_ ? "device" : "host", " memory, and ",
                     t.device().ToString(), " holds ", host ? "host" : "device",
                     " memory (use the ", device_memory_ ? "mpi" : "nccl",
                     " collectives for it)"));
  }
  // The plugin reads the memory from its own thread: every kernel that
  // writes it must have finished.
  return t.device().backend()->Synchronize(t.device().index());
}

absl::StatusOr<Work> ProcessGroup::Finish(int code, MixrtCollectiveWork* work,
                                          std::string what,
                                          std::vector<Tensor> keep,
                                          std::vector<Tensor> written) {
  if (code != MIXRT_ERROR_CODE_OK) return FromCode(code, what);
  Work w;
  w.api_ = api_;
  w.work_ = work;
  w.keep_alive_ = std::move(keep);
  w.written_ = std::move(written);
  return w;
}

absl::StatusOr<Work> ProcessGroup::AllReduce(const Tensor& tensor,
                                             ReduceOp op) {
  MIXRT_RETURN_IF_ERROR(CheckTensor(tensor, "all_reduce"));
  if (!IsFloating(tensor.dtype())) {
    return absl::InvalidArgumentError(
        absl::StrCat("all_reduce: the tensor must be f32, bf16 or f16, not ",
                     DTypeName(tensor.dtype())));
  }
  char error[kErrorSize] = "";
  MixrtCollectiveWork* work = nullptr;
  const int code = api_->all_reduce(
      comm_, tensor.data_ptr(), static_cast<size_t>(tensor.numel()),
      mixrt::ToAbi(tensor.dtype()), ToAbi(op), &work, error, sizeof(error));
  return Finish(code, work, absl::StrCat("all_reduce: ", error), {}, {tensor});
}

absl::StatusOr<Work> ProcessGroup::Broadcast(const Tensor& tensor, int root) {
  MIXRT_RETURN_IF_ERROR(CheckTensor(tensor, "broadcast"));
  char error[kErrorSize] = "";
  MixrtCollectiveWork* work = nullptr;
  const int code = api_->broadcast(
      comm_, tensor.data_ptr(),
      static_cast<size_t>(tensor.numel()) * DTypeSize(tensor.dtype()), root,
      &work, error, sizeof(error));
  return Finish(code, work, absl::StrCat("broadcast: ", error), {}, {tensor});
}

absl::StatusOr<Work> ProcessGroup::AllGather(const Tensor& input,
                                             const Tensor& output) {
  MIXRT_RETURN_IF_ERROR(CheckTensor(input, "all_gather"));
  MIXRT_RETURN_IF_ERROR(CheckTensor(output, "all_gather"));
  const size_t bytes =
      static_cast<size_t>(input.numel()) * DTypeSize(input.dtype());
  if (input.dtype() != output.dtype() ||
      static_cast<size_t>(output.numel()) * DTypeSize(output.dtype()) !=
          bytes * world_size_) {
    return absl::InvalidArgumentError(
        absl::StrCat("all_gather: the output must hold world_size (",
                     world_size_, ") copies of the input's ", input.numel(),
                     " ", DTypeName(input.dtype()), " elements; it has ",
                     output.numel(), " ", DTypeName(output.dtype())));
  }
  char error[kErrorSize] = "";
  MixrtCollectiveWork* work = nullptr;
  const int code =
      api_->all_gather(comm_, input.const_data_ptr(), output.data_ptr(), bytes,
                       &work, error, sizeof(error));
  return Finish(code, work, absl::StrCat("all_gather: ", error), {input},
                {output});
}

absl::Status ProcessGroup::Barrier() {
  char error[kErrorSize] = "";
  MixrtCollectiveWork* work = nullptr;
  const int code = api_->barrier(comm_, &work, error, sizeof(error));
  MIXRT_ASSIGN_OR_RETURN(
      Work w, Finish(code, work, absl::StrCat("barrier: ", error), {}, {}));
  return w.Wait();
}

absl::Status AgreeOnOutcome(ProcessGroup& group, const Device& device,
                            const absl::Status& mine, const std::string& what) {
  MIXRT_ASSIGN_OR_RETURN(
      Tensor code,
      from_floats({static_cast<float>(static_cast<int>(mine.code()))}, {1},
                  DType::kF32, device));
  MIXRT_ASSIGN_OR_RETURN(Work work, group.AllReduce(code, ReduceOp::kMax));
  MIXRT_RETURN_IF_ERROR(work.Wait());
  MIXRT_ASSIGN_OR_RETURN(double worst, code.item());
  if (!mine.ok()) return mine;
  if (worst != 0) {
    return absl::Status(
        static_cast<absl::StatusCode>(static_cast<int>(worst)),
        absl::StrCat(what, " failed on another rank (its own error says why)"));
  }
  return absl::OkStatus();
}

}  // namespace mixrt::distributed
