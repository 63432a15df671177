// libmixrt_cuda.so: NVIDIA GPUs through the CUDA runtime, cuBLASLt for
// matmul on tensor cores, and the shared GPU kernels for everything else.
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backends/cuda/cublaslt_matmul.h"
#include "backends/cuda/cublaslt_plan.h"
#include "backends/cuda/cuda_capability.h"
#include "backends/cuda/cuda_fusion.h"
#include "backends/gpu/gpu_plugin.h"
#include "backends/gpu/graph_replay.h"
#include "backends/gpu/matmul_call.h"
#include "mixrt/status_macros.h"

namespace mixrt::cuda {
namespace {

// torch.backends.cuda.matmul.allow_tf32 / set_float32_matmul_precision:
// "highest" (the default) keeps f32 matmuls in f32; "high" or "medium" allow
// TF32 tensor cores.
MatmulSettings SettingsFromEnvironment() {
  MatmulSettings settings;
  const char* precision = std::getenv("MIXRT_FLOAT32_MATMUL_PRECISION");
  if (precision != nullptr) {
    const std::string p = precision;
    settings.allow_tf32 = p == "high" || p == "medium";
  }
  return settings;
}

ComputeCapability CapabilityOf(const gpu::GpuDevice& device) {
  return {device.props.major, device.props.minor};
}

// A kernel graph (ABI 1.1) as a CUDA graph: the steps captured from the
// device's stream, instantiated once, and replayed with one
// cudaGraphLaunch while the buffer bases stay those captured with
// (gpu::GraphReplay decides; other bases capture again and update the
// instantiated graph). Steps that cannot be captured run as launches.
class CudaKernelGraph : public sdk::KernelGraph {
 public:
  CudaKernelGraph(std::unique_ptr<sdk::StepGraph> steps, cudaStream_t stream,
                  int device)
      : steps_(std::move(steps)), stream_(stream), device_(device) {}
  ~CudaKernelGraph() override {
    if (exec_ != nullptr) (void)cudaGraphExecDestroy(exec_);
  }

  int num_buffers() const override { return steps_->num_buffers(); }

  sdk::Status Run(sdk::Span<void* const> buffers) override {
    std::lock_guard<std::mutex> lock(mutex_);
    MIXRT_RETURN_IF_ERROR(
        gpu::RuntimeStatus(cudaSetDevice(device_), "cudaSetDevice"));
    switch (replay_.Next(buffers)) {
      case gpu::GraphReplay::Action::kLaunch:
        return steps_->Run(buffers);
      case gpu::GraphReplay::Action::kReplay:
        replay_.Replayed();
        return gpu::RuntimeStatus(cudaGraphLaunch(exec_, stream_),
                                  "cudaGraphLaunch");
      case gpu::GraphReplay::Action::kCapture:
        break;
    }
    if (sdk::Status captured = Capture(buffers); !captured.ok()) {
      replay_.CaptureFailed(std::string(captured.message()));
      (void)cudaGetLastError();     // A failed capture leaves a sticky error.
      return steps_->Run(buffers);  // Nothing ran during the capture.
    }
    replay_.Captured(buffers);
    return gpu::RuntimeStatus(cudaGraphLaunch(exec_, stream_),
                              "cudaGraphLaunch");
  }

 private:
  sdk::Status Capture(absl::Span<void* const> buffers) {
    MIXRT_RETURN_IF_ERROR(gpu::RuntimeStatus(
        cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal),
        "cudaStreamBeginCapture"));
    const sdk::Status steps = steps_->Run(buffers);
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
    sdk::Status status = steps;
    if (status.ok()) status = gpu::RuntimeStatus(ended, "cudaStreamEndCapture");
    if (status.ok() && exec_ != nullptr) {
      cudaGraphExecUpdateResultInfo info{};
      if (cudaGraphExecUpdate(exec_, graph, &info) != cudaSuccess) {
        (void)cudaGetLastError();
        (void)cudaGraphExecDestroy(exec_);
        exec_ = nullptr;
      }
    }
    if (status.ok() && exec_ == nullptr) {
      status = gpu::RuntimeStatus(cudaGraphInstantiate(&exec_, graph, 0),
                                  "cudaGraphInstantiate");
    }
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
    return status;
  }

  std::mutex mutex_;
  std::unique_ptr<sdk::StepGraph> steps_;
  cudaStream_t stream_;
  int device_;
  cudaGraphExec_t exec_ = nullptr;
  gpu::GraphReplay replay_;
};

// A generated loop loaded from its PTX; launched on the device's stream
// (so a kernel graph's capture records it).
class CudaFusedKernel : public sdk::FusedKernel {
 public:
  CudaFusedKernel(FusedPtx ptx, cudaLibrary_t library, cudaKernel_t kernel,
                  cudaStream_t stream, int device)
      : ptx_(std::move(ptx)),
        library_(library),
        kernel_(kernel),
        stream_(stream),
        device_(device) {}
  ~CudaFusedKernel() override { (void)cudaLibraryUnload(library_); }

  sdk::Status Run(sdk::Span<void* const> value_data,
                  sdk::Span<const int64_t>) override {
    if (ptx_.numel == 0) return sdk::OkStatus();
    MIXRT_RETURN_IF_ERROR(
        gpu::RuntimeStatus(cudaSetDevice(device_), "cudaSetDevice"));
    // The kernel's first parameter is a struct of the pointers, by value.
    std::vector<void*> pointers;
    for (int v : ptx_.values) pointers.push_back(value_data[v]);
    long long n = ptx_.numel;
    void* args[] = {pointers.data(), &n};
    constexpr int kThreads = 256;
    const long long blocks =
        std::min<long long>((n + kThreads - 1) / kThreads, 1 << 16);
    return gpu::RuntimeStatus(
        cudaLaunchKernel(reinterpret_cast<const void*>(kernel_),
                         dim3(static_cast<unsigned>(blocks)), dim3(kThreads),
                         args, 0, stream_),
        "cudaLaunchKernel (fused loop)");
  }
  std::string Description() const override {
    return absl::StrCat("generated CUDA loop ", ptx_.name);
  }

 private:
  FusedPtx ptx_;
  cudaLibrary_t library_;
  cudaKernel_t kernel_;
  cudaStream_t stream_;
  int device_;
};

class CudaPlugin : public gpu::GpuPlugin {
 public:
  sdk::PluginInfo Info() const override {
    int runtime = 0;
    if (cudaRuntimeGetVersion(&runtime) != cudaSuccess) runtime = 0;
    return {
        "cuda", "0.1",
        absl::StrCat("CUDA runtime ", runtime / 1000, ".",
                     (runtime % 1000) / 10, ", cuBLASLt ", cublasLtGetVersion(),
                     ", kernels for ", DescribeTargets(BuiltTargets())),
        "cuda"};
  }

  sdk::Status Initialize() override {
    settings_ = SettingsFromEnvironment();
    return gpu::GpuPlugin::Initialize();
  }

  sdk::Status Shutdown() override {
    blas_.clear();
    return gpu::GpuPlugin::Shutdown();
  }

  sdk::StatusOr<std::unique_ptr<sdk::KernelGraph>> CreateKernelGraph(
      int device, std::unique_ptr<sdk::StepGraph> steps) override {
    MIXRT_ASSIGN_OR_RETURN(gpu::GpuDevice * d, Enter(device));
    return std::make_unique<CudaKernelGraph>(
        std::move(steps), static_cast<cudaStream_t>(d->stream), device);
  }

  sdk::StatusOr<std::vector<int>> ClaimFusion(
      int, const sdk::FusionGraph& graph) override {
    return ClaimGeneratedLoops(graph);
  }

  sdk::StatusOr<std::unique_ptr<sdk::FusedKernel>> CompileFusion(
      int device, const sdk::FusionGraph& graph,
      sdk::Span<const int> group_of_node, int group) override {
    MIXRT_ASSIGN_OR_RETURN(gpu::GpuDevice * d, Enter(device));
    const std::string arch = absl::StrCat("compute_", CapabilityOf(*d).sm());
    MIXRT_ASSIGN_OR_RETURN(
        FusedPtx ptx, CompileGeneratedLoop(graph, group_of_node, group, arch));
    cudaLibrary_t library = nullptr;
    MIXRT_RETURN_IF_ERROR(gpu::RuntimeStatus(
        cudaLibraryLoadData(&library, ptx.ptx.c_str(), nullptr, nullptr, 0,
                            nullptr, nullptr, 0),
        "cudaLibraryLoadData"));
    cudaKernel_t kernel = nullptr;
    const sdk::Status found = gpu::RuntimeStatus(
        cudaLibraryGetKernel(&kernel, library, ptx.name.c_str()),
        "cudaLibraryGetKernel");
    if (!found.ok()) {
      (void)cudaLibraryUnload(library);
      return found;
    }
    return std::make_unique<CudaFusedKernel>(
        std::move(ptx), library, kernel, static_cast<cudaStream_t>(d->stream),
        device);
  }

  sdk::Capability GetCapability(int device, MixrtOpClass op_class,
                                MixrtDtype dtype) override {
    auto d = Enter(device);
    if (!d.ok()) return {MIXRT_SUPPORT_UNSUPPORTED, "no such device", 0.0};
    return CudaCapability(CapabilityOf(**d), BuiltTargets(), settings_,
                          op_class, dtype);
  }

  sdk::Capability GetPrecisionSupport(int device, MixrtOpClass op_class,
                                      MixrtPrecision precision) override {
    auto d = Enter(device);
    if (!d.ok()) return {MIXRT_SUPPORT_UNSUPPORTED, "no such device", 0.0};
    return CudaPrecisionSupport(CapabilityOf(**d), op_class, precision);
  }

 protected:
  std::string DeviceName(const gpu::GpuDevice& device) const override {
    return absl::StrCat(device.props.name, " (sm_", CapabilityOf(device).sm(),
                        ", ", device.props.multiProcessorCount, " SMs)");
  }

  bool HasMatrixUnits(const gpu::GpuDevice& device) const override {
    return TensorCoresOf(CapabilityOf(device)).f16;
  }

  sdk::Status InitializeDevice(gpu::GpuDevice& device) override {
    if (!HasKernelImage(CapabilityOf(device), BuiltTargets())) {
      // Listed with every capability unsupported, saying why.
      blas_.push_back(nullptr);
      return sdk::OkStatus();
    }
    MIXRT_ASSIGN_OR_RETURN(auto blas, CublasLtMatmul::Create());
    blas_.push_back(std::move(blas));
    return sdk::OkStatus();
  }

  // cuBLASLt reads a transposed operand as op T: no copy of a linear
  // layer's weight per call.
  bool MatmulTakesTransposedOperands() const override { return true; }

  sdk::Status Matmul(gpu::GpuDevice& device,
                     const sdk::KernelCall& call) override {
    MIXRT_ASSIGN_OR_RETURN(
        auto m, gpu::ParseMatmulCall(call, /*allow_transposed=*/true));
    if (m.m == 0 || m.n == 0 || m.batch == 0) return sdk::OkStatus();
    CublasLtMatmul* blas = blas_[device.index].get();
    if (blas == nullptr) {
      return sdk::FailedPreconditionError(
          "this device has no kernels in the CUDA plugin");
    }
    MatmulProblem p;
    p.m = m.m;
    p.n = m.n;
    p.k = m.k;
    p.batch = m.batch;
    p.a_transposed = m.a_transposed;
    p.b_transposed = m.b_transposed;
    p.input_dtype = static_cast<MixrtDtype>(m.a.dtype);
    p.output_dtype = static_cast<MixrtDtype>(m.out.dtype);
    p.has_bias = m.epilogue.has_bias;
    p.bias_dtype = static_cast<MixrtDtype>(m.epilogue.bias.dtype);
    p.activation = static_cast<MixrtActivation>(m.epilogue.activation);
    p.beta = m.epilogue.beta;
    p.allow_tf32 = settings_.allow_tf32;
    // cuBLASLt rejects k = 0; the product is then zero and only the
    // epilogue is left.
    const bool empty_k = m.k == 0;
    MIXRT_ASSIGN_OR_RETURN(auto plan, PlanCublasLtMatmul(p));
    auto stream = static_cast<cudaStream_t>(device.stream);
    if (plan.separate_epilogue || empty_k) {
      return RunWithSeparateEpilogue(device, m, plan, empty_k, blas);
    }
    MIXRT_RETURN_IF_ERROR(blas->Run(plan, m.b.data, m.a.data, m.out.data,
                                    m.out.data, m.epilogue.bias.data, stream));
    return plan.relu_pass ? ReluInPlace(device, m.out) : sdk::OkStatus();
  }

 private:
  // torch.relu over the output in place, NaN kept (see CublasLtPlan).
  static sdk::Status ReluInPlace(gpu::GpuDevice& device,
                                 const gpu::DeviceTensor& out) {
    gpu::UnaryFunctor f{};
    f.out = out;
    f.x = out;
    f.kind = MIXRT_UNARY_RELU;
    f.backward = false;
    return gpu::RuntimeStatus(static_cast<cudaError_t>(gpu::LaunchElementwise(
                                  device.ctx, f, out.numel)),
                              "matmul relu");
  }

  // The bare product in f32 scratch memory, then GemmEpilogueFunctor.
  sdk::Status RunWithSeparateEpilogue(gpu::GpuDevice& device,
                                      const gpu::MatmulCall& m,
                                      const CublasLtPlan& plan, bool empty_k,
                                      CublasLtMatmul* blas) {
    auto stream = static_cast<cudaStream_t>(device.stream);
    const int64_t elements = m.batch * m.m * m.n;
    void* scratch = nullptr;
    MIXRT_RETURN_IF_ERROR(gpu::RuntimeStatus(
        cudaMallocAsync(&scratch, elements * sizeof(float), stream),
        "cudaMallocAsync"));
    sdk::Status status =
        empty_k
            ? gpu::RuntimeStatus(
                  cudaMemsetAsync(scratch, 0, elements * sizeof(float), stream),
                  "cudaMemsetAsync")
            : sdk::Status(blas->Run(plan, m.b.data, m.a.data, scratch, scratch,
                                    nullptr, stream));
    if (status.ok()) {
      gpu::GemmEpilogueFunctor f;
      f.out = m.out;
      f.product = m.out;
      f.product.data = scratch;
      f.product.dtype = MIXRT_DTYPE_F32;
      f.epilogue = m.epilogue;
      f.n = m.n;
      status =
          gpu::RuntimeStatus(static_cast<cudaError_t>(gpu::LaunchElementwise(
                                 device.ctx, f, elements)),
                             "matmul epilogue");
    }
    // Stream-ordered: freed after the epilogue has read it.
    (void)cudaFreeAsync(scratch, stream);
    return status;
  }

  MatmulSettings settings_;
  std::vector<std::unique_ptr<CublasLtMatmul>> blas_;  // Per device.
};

}  // namespace
}  // namespace mixrt::cuda

MIXRT_SDK_DEFINE_PLUGIN(mixrt::cuda::CudaPlugin)
MIXRT_SDK_DEFINE_SCORE(mixrt::gpu::ScoreByDeviceCount)
