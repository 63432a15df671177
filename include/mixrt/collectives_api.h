/* The collectives ABI: how mixrt's data parallelism talks to a collective
 * library (MPI on host memory, NCCL on CUDA devices) loaded at run time.
 *
 * Why a plugin kind of its own, not an extension of the backend ABI: the
 * transport and the device are chosen independently (the CPU backend runs
 * over MPI on one machine or a cluster; CUDA tensors go over NCCL, or over
 * MPI through host copies), one communicator serves every backend of a
 * process, and a process that never trains in parallel must not need
 * libmpi or libnccl to start. A collectives plugin is a shared object named
 * libmixrtcomm_<name>.so exporting MixrtCollectivesGetApi. The core loads it
 * with RTLD_GLOBAL (Open MPI dlopens its own components, which need
 * libmpi's symbols global).
 *
 * Discipline as in plugin_api.h: every struct starts with struct_size, the
 * host checks the plugin's abi_version, and new fields are only appended.
 * Every function returns a MixrtErrorCode (0 on success) and, on failure,
 * writes a NUL-terminated message into the caller's `error` buffer.
 *
 * Semantics every plugin must keep:
 *   - Collectives are issued in the same order on every rank; each returns
 *     at once with a work handle, and the data buffers must stay valid and
 *     untouched until `wait` has succeeded on it.
 *   - `wait` gives up after `timeout_s` seconds with
 *     MIXRT_ERROR_CODE_UNAVAILABLE and a message naming the ranks that have
 *     not reached the collective (or do not answer); the communicator is
 *     then broken: every later call fails, and `destroy` aborts the job
 *     instead of waiting for peers that will never come.
 *   - Results are identical on every rank (the same bytes), so decisions
 *     taken from reduced values (a GradScaler's found_inf) agree. */
#ifndef MIXRT_COLLECTIVES_API_H_
#define MIXRT_COLLECTIVES_API_H_

#include <stddef.h>
#include <stdint.h>

#include "mixrt/plugin_api.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MIXRT_COLLECTIVES_ABI_VERSION 1

typedef enum MixrtCollectiveOp {
  MIXRT_COLLECTIVE_SUM = 0,
  MIXRT_COLLECTIVE_AVG = 1, /* The sum divided by the world size. */
  MIXRT_COLLECTIVE_MAX = 2
} MixrtCollectiveOp;

typedef struct MixrtCommunicator MixrtCommunicator; /* Owned by the plugin. */
typedef struct MixrtCollectiveWork MixrtCollectiveWork;

/* Copies `bytes` at `data` from rank 0 to every rank (host memory). */
typedef int MixrtBootstrapBroadcast(void* context, void* data, size_t bytes);

typedef struct MixrtCommunicatorOptions {
  size_t struct_size;
  /* How long `wait` waits for a collective by default when given <= 0. */
  double timeout_s;
  /* Device memory (NCCL): the plugin device index this process uses. */
  int device_index;
  /* Plugins that cannot find their peers themselves (NCCL) are told who
   * they are and given a way to share their rendezvous data: the host
   * runs them beside a host-memory communicator (MPI) that provides both.
   * Zero/NULL when the plugin joins the job on its own (MPI). */
  int rank;
  int world_size;
  MixrtBootstrapBroadcast* bootstrap_broadcast;
  void* bootstrap_context;
} MixrtCommunicatorOptions;

typedef struct MixrtCommunicatorInfo {
  size_t struct_size;
  int rank;
  int world_size;
  /* The library and its version, e.g. "Open MPI v4.1.4". Static storage. */
  const char* library;
  /* Whether buffers are host memory (MPI) or device memory (NCCL). */
  int device_memory;
} MixrtCommunicatorInfo;

typedef struct MixrtCollectivesApi {
  size_t struct_size;
  uint32_t abi_version; /* MIXRT_COLLECTIVES_ABI_VERSION it was built with. */
  const char* name;     /* "mpi", "nccl". */

  /* Joins the job this process was launched in (mpirun's environment). */
  int (*create)(const MixrtCommunicatorOptions* options,
                MixrtCommunicator** out, char* error, size_t error_size);
  int (*get_info)(MixrtCommunicator* comm, MixrtCommunicatorInfo* info,
                  char* error, size_t error_size);

  /* In place: `data` holds `count` elements of `dtype` (f32, f16, bf16). */
  int (*all_reduce)(MixrtCommunicator* comm, void* data, size_t count,
                    MixrtDtype dtype, MixrtCollectiveOp op,
                    MixrtCollectiveWork** work, char* error, size_t error_size);
  /* `bytes` from rank `root` to every rank, in place. */
  int (*broadcast)(MixrtCommunicator* comm, void* data, size_t bytes, int root,
                   MixrtCollectiveWork** work, char* error, size_t error_size);
  /* Rank r's `bytes` land at recv + r * bytes on every rank. */
  int (*all_gather)(MixrtCommunicator* comm, const void* send, void* recv,
                    size_t bytes, MixrtCollectiveWork** work, char* error,
                    size_t error_size);
  int (*barrier)(MixrtCommunicator* comm, MixrtCollectiveWork** work,
                 char* error, size_t error_size);

  /* Blocks until `work` is done (timeout_s <= 0: the communicator's). The
   * handle stays valid until released. */
  int (*wait)(MixrtCollectiveWork* work, double timeout_s, char* error,
              size_t error_size);
  void (*release_work)(MixrtCollectiveWork* work);

  /* Leaves the job: a clean finalize when every collective completed,
   * else an abort that ends every rank (`reason` is printed first). */
  void (*destroy)(MixrtCommunicator* comm, const char* reason);
} MixrtCollectivesApi;

/* The one symbol a collectives plugin exports. */
const MixrtCollectivesApi* MixrtCollectivesGetApi(void);
typedef const MixrtCollectivesApi* MixrtCollectivesGetApiFn(void);

/* Defines that export, at file scope, for a plugin called `name` whose
 * functions follow in the table's order (create, get_info, all_reduce,
 * broadcast, all_gather, barrier, wait, release_work, destroy); the table's
 * struct_size and abi_version are filled in:
 *
 *   MIXRT_DEFINE_COLLECTIVES_PLUGIN("mpi", Create, GetInfo, AllReduce,
 *                                   Broadcast, AllGather, Barrier, Wait,
 *                                   ReleaseWork, Destroy)
 */
#define MIXRT_DEFINE_COLLECTIVES_PLUGIN(name, ...)                        \
  __attribute__((visibility("default"))) const MixrtCollectivesApi*       \
  MixrtCollectivesGetApi(void) {                                          \
    static const MixrtCollectivesApi mixrt_collectives_api = {            \
        sizeof(MixrtCollectivesApi), MIXRT_COLLECTIVES_ABI_VERSION, name, \
        __VA_ARGS__};                                                     \
    return &mixrt_collectives_api;                                        \
  }

#ifdef __cplusplus
}
#endif

#endif /* MIXRT_COLLECTIVES_API_H_ */
