// libmixrtcomm_nccl.so: the collectives ABI (include/mixrt/collectives_api.h)
// on NCCL, for buffers in CUDA device memory. Built here; never run (no
// GPU on the build machines): plugins/README.md's proof table says so.
//
// NCCL cannot find its peers by itself: the host runs it beside the MPI
// communicator, which says who this rank is and broadcasts rank 0's
// ncclUniqueId. Collectives run in issue order on the plugin's own stream;
// a work handle is a CUDA event recorded after its collective, and `wait`
// polls it against the deadline. On a timeout the communicator is aborted
// (ncclCommAbort, which releases the GPU-side kernels stuck waiting for a
// peer); NCCL does not say which rank is missing, and the message says so.
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

#include "mixrt/collectives_api.h"

namespace {

using Clock = std::chrono::steady_clock;

int Fail(char* error, size_t error_size, int code, const std::string& text) {
  if (error != nullptr && error_size > 0) {
    std::snprintf(error, error_size, "%s", text.c_str());
  }
  return code;
}

std::string NcclText(ncclResult_t r) { return ncclGetErrorString(r); }
std::string CudaText(cudaError_t e) { return cudaGetErrorString(e); }

}  // namespace

struct MixrtCommunicator {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  int device = 0;
  int rank = 0;
  int world_size = 1;
  double timeout_s = 300;
  float* scratch = nullptr;  // One float on the device, for barriers.
  bool broken = false;
  std::string broken_reason;
  uint64_t issued = 0;
  std::mutex mutex;
  std::string library;
};

struct MixrtCollectiveWork {
  MixrtCommunicator* comm;
  cudaEvent_t done;
  uint64_t sequence;
  std::string name;
};

namespace {

int Create(const MixrtCommunicatorOptions* options, MixrtCommunicator** out,
           char* error, size_t error_size) {
  if (options == nullptr || out == nullptr ||
      options->struct_size < sizeof(MixrtCommunicatorOptions)) {
    return Fail(error, error_size, MIXRT_ERROR_CODE_INVALID_ARGUMENT,
                "create: options (of this ABI's size) and out are required");
  }
  int devices = 0;
  const cudaError_t counted = cudaGetDeviceCount(&devices);
  if (counted != cudaSuccess || devices == 0) {
    return Fail(error, error_size, MIXRT_ERROR_CODE_NO_DEVICE,
                "no CUDA device for NCCL (" +
                    (counted != cudaSuccess ? CudaText(counted)
                                            : std::string("0 devices")) +
                    ")");
  }
  if (options->bootstrap_broadcast == nullptr || options->world_size < 1 ||
      options->rank < 0 || options->rank >= options->world_size) {
    return Fail(error, error_size, MIXRT_ERROR_CODE_INVALID_ARGUMENT,
                "create: NCCL needs the rank, the world size and a bootstrap "
                "broadcast from a host communicator");
  }
  if (options->device_index < 0 || options->device_index >= devices) {
    return Fail(error, error_size, MIXRT_ERROR_CODE_INVALID_ARGUMENT,
                "create: device " + std::to_string(options->device_index) +
                    " of " + std::to_string(devices));
  }
  ncclUniqueId id;
  if (options->rank == 0) {
    const ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) {
      return Fail(error, error_size, MIXRT_ERROR_CODE_UNAVAILABLE,
                  "ncclGetUniqueId: " + NcclText(r));
    }
  }
  if (options->bootstrap_broadcast(options->bootstrap_context, &id,
                                   sizeof(id)) != 0) {
    return Fail(error, error_size, MIXRT_ERROR_CODE_UNAVAILABLE,
                "the bootstrap broadcast of NCCL's unique id failed");
  }
  auto* c = new MixrtCommunicator;
  c->device = options->device_index;
  c->rank = options->rank;
  c->world_size = options->world_size;
  if (options->timeout_s > 0) c->timeout_s = options->timeout_s;
  int version = 0;
  ncclGetVersion(&version);
  c->library = "NCCL " + std::to_string(version / 10000) + "." +
               std::to_string(version / 100 % 100) + "." +
               std::to_string(version % 100);
  cudaError_t e = cudaSetDevice(c->device);
  if (e == cudaSuccess) {
    e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
  }
  if (e == cudaSuccess) {
    e = cudaMalloc(reinterpret_cast<void**>(&c->scratch), sizeof(float));
  }
  if (e != cudaSuccess) {
    delete c;
    return Fail(error, error_size, MIXRT_ERROR_CODE_UNAVAILABLE,
                "CUDA setup for NCCL: " + CudaText(e));
  }
  const ncclResult_t r = ncclCommInitRank(&c->comm, c->world_size, id, c->rank);
  if (r != ncclSuccess) {
    cudaFree(c->scratch);
    cudaStreamDestroy(c->stream);
    delete c;
    return Fail(error, error_size, MIXRT_ERROR_CODE_UNAVAILABLE,
                "ncclCommInitRank: " + NcclText(r));
  }
  *out = c;
  return MIXRT_ERROR_CODE_OK;
}

int GetInfo(MixrtCommunicator* c, MixrtCommunicatorInfo* info, char* error,
            size_t error_size) {
  if (c == nullptr || info == nullptr ||
      info->struct_size < sizeof(MixrtCommunicatorInfo)) {
    return Fail(error, error_size, MIXRT_ERROR_CODE_INVALID_ARGUMENT,
                "get_info: communicator and info are required");
  }
  info->rank = c->rank;
  info->world_size = c->world_size;
  info->library = c->library.c_str();
  info->device_memory = 1;
  return MIXRT_ERROR_CODE_OK;
}

// Issues `launch` on the plugin's stream and records the work's event.
template <typename Launch>
int Issue(MixrtCommunicator* c, const char* name, Launch launch,
          MixrtCollectiveWork** work, char* error, size_t error_size) {
  if (c == nullptr || work == nullptr) {
    return Fail(error, error_size, MIXRT_ERROR_CODE_INVALID_ARGUMENT,
                "a communicator and a work pointer are required");
  }
  std::lock_guard<std::mutex> lock(c->mutex);
  if (c->broken) {
    return Fail(error, error_size, MIXRT_ERROR_CODE_FAILED_PRECONDITION,
                "the communicator is broken: " + c->broken_reason);
  }
  cudaSetDevice(c->device);
  const ncclResult_t r = launch();
  if (r != ncclSuccess) {
    return Fail(error, error_size, MIXRT_ERROR_CODE_INTERNAL,
                std::string(name) + ": " + NcclText(r));
  }
  auto* w = new MixrtCollectiveWork{c, nullptr, ++c->issued, ""};
  w->name = std::string(name) + " #" + std::to_string(w->sequence);
  cudaEventCreateWithFlags(&w->done, cudaEventDisableTiming);
  cudaEventRecord(w->done, c->stream);
  *work = w;
  return MIXRT_ERROR_CODE_OK;
}

int AllReduce(MixrtCommunicator* c, void* data, size_t count, MixrtDtype dtype,
              MixrtCollectiveOp op, MixrtCollectiveWork** work, char* error,
              size_t error_size) {
  ncclDataType_t type;
  switch (dtype) {
    case MIXRT_DTYPE_F32:
      type = ncclFloat32;
      break;
    case MIXRT_DTYPE_BF16:
      type = ncclBfloat16;
      break;
    case MIXRT_DTYPE_F16:
      type = ncclFloat16;
      break;
    default:
      return Fail(error, error_size, MIXRT_ERROR_CODE_INVALID_ARGUMENT,
                  "all_reduce: dtype must be f32, bf16 or f16");
  }
  const ncclRedOp_t red = op == MIXRT_COLLECTIVE_AVG   ? ncclAvg
                          : op == MIXRT_COLLECTIVE_MAX ? ncclMax
                                                       : ncclSum;
  return Issue(
      c, "all_reduce",
      [&] {
        return ncclAllReduce(data, data, count, type, red, c->comm, c->stream);
      },
      work, error, error_size);
}

int Broadcast(MixrtCommunicator* c, void* data, size_t bytes, int root,
              MixrtCollectiveWork** work, char* error, size_t error_size) {
  if (c != nullptr && (root < 0 || root >= c->world_size)) {
    return Fail(error, error_size, MIXRT_ERROR_CODE_INVALID_ARGUMENT,
                "broadcast: root " + std::to_string(root) +
                    " is not a rank of this job of " +
                    std::to_string(c->world_size));
  }
  return Issue(
      c, "broadcast",
      [&] {
        return ncclBroadcast(data, data, bytes, ncclChar, root, c->comm,
                             c->stream);
      },
      work, error, error_size);
}

int AllGather(MixrtCommunicator* c, const void* send, void* recv, size_t bytes,
              MixrtCollectiveWork** work, char* error, size_t error_size) {
  return Issue(
      c, "all_gather",
      [&] {
        return ncclAllGather(send, recv, bytes, ncclChar, c->comm, c->stream);
      },
      work, error, error_size);
}

int Barrier(MixrtCommunicator* c, MixrtCollectiveWork** work, char* error,
            size_t error_size) {
  return Issue(
      c, "barrier",
      [&] {
        return ncclAllReduce(c->scratch, c->scratch, 1, ncclFloat32, ncclSum,
                             c->comm, c->stream);
      },
      work, error, error_size);
}

int Wait(MixrtCollectiveWork* w, double timeout_s, char* error,
         size_t error_size) {
  if (w == nullptr) {
    return Fail(error, error_size, MIXRT_ERROR_CODE_INVALID_ARGUMENT,
                "wait: no work");
  }
  MixrtCommunicator* c = w->comm;
  const double timeout = timeout_s > 0 ? timeout_s : c->timeout_s;
  const Clock::time_point begin = Clock::now();
  for (;;) {
    const cudaError_t e = cudaEventQuery(w->done);
    if (e == cudaSuccess) return MIXRT_ERROR_CODE_OK;
    if (e != cudaErrorNotReady) {
      return Fail(error, error_size, MIXRT_ERROR_CODE_INTERNAL,
                  w->name + ": " + CudaText(e));
    }
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(c->comm, &async);
    const double waited =
        std::chrono::duration<double>(Clock::now() - begin).count();
    if (async != ncclSuccess || waited > timeout) {
      std::lock_guard<std::mutex> lock(c->mutex);
      if (!c->broken) {
        c->broken = true;
        c->broken_reason =
            "rank " + std::to_string(c->rank) + ": " + w->name +
            (async != ncclSuccess
                 ? " failed: " + NcclText(async)
                 : " did not complete within " + std::to_string(timeout) +
                       " s (NCCL cannot tell which rank is missing; the "
                       "communicator was aborted)");
        ncclCommAbort(c->comm);
        c->comm = nullptr;
      }
      return Fail(error, error_size, MIXRT_ERROR_CODE_UNAVAILABLE,
                  c->broken_reason);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void ReleaseWork(MixrtCollectiveWork* w) {
  if (w == nullptr) return;
  cudaEventDestroy(w->done);
  delete w;
}

void Destroy(MixrtCommunicator* c, const char* reason) {
  if (c == nullptr) return;
  if (c->comm != nullptr) {
    if (reason != nullptr && reason[0] != '\0') {
      std::fprintf(stderr, "mixrt: rank %d aborts NCCL: %s\n", c->rank, reason);
      ncclCommAbort(c->comm);
    } else {
      ncclCommDestroy(c->comm);
    }
  }
  cudaFree(c->scratch);
  cudaStreamDestroy(c->stream);
  delete c;
}

}  // namespace

MIXRT_DEFINE_COLLECTIVES_PLUGIN("nccl", Create, GetInfo, AllReduce, Broadcast,
                                AllGather, Barrier, Wait, ReleaseWork, Destroy)
