// Out-of-process plugins (core/plugin/isolated_plugin.h): the same results as
// in process, and a plugin that crashes, aborts, exits, corrupts its heap or
// hangs in a kernel while training marks its backend failed with the reason
// instead of taking this process down. The faulty fixture
// (tests/fixtures/hostile/faulty_plugin.cc) is the reference plugin's
// kernels with one fault injected where the test says.
#include "core/plugin/isolated_plugin.h"

#include <unistd.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "core/compiler/compile.h"
#include "core/functional/ops.h"
#include "core/plugin/registry.h"
#include "core/tensor/factories.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mixrt/status_macros.h"
#include "tests/testing/op_test_util.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

using ::testing::HasSubstr;
using testing::MakeTensor;
using ::testing::Not;
using testing::RandomValues;
using testing::Values;

std::string FaultyPath() {
  return testing::RunfilePath("tests/fixtures/hostile/libmixrt_faulty.so");
}

// The fault the next plugin process starts with (it reads its environment).
class IsolatedPluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv(kPluginHostEnv,
           testing::RunfilePath("tools/plugin_host/mixrt-plugin-host").c_str(),
           1);
    Fault("none", "", 1);
  }
  void TearDown() override {
    unsetenv("MIXRT_FAULTY_MODE");
    unsetenv("MIXRT_FAULTY_OP");
    unsetenv("MIXRT_FAULTY_AT");
  }
  static void Fault(const std::string& mode, const std::string& op, int at) {
    setenv("MIXRT_FAULTY_MODE", mode.c_str(), 1);
    setenv("MIXRT_FAULTY_OP", op.c_str(), 1);
    setenv("MIXRT_FAULTY_AT", std::to_string(at).c_str(), 1);
  }
  // The faulty plugin, out of process, in `registry`.
  const Backend* LoadIsolated(Registry& registry,
                              absl::Duration timeout = absl::Seconds(60)) {
    LoadOptions options;
    options.isolation = "faulty";
    options.call_timeout = timeout;
    absl::StatusOr<const Backend*> backend =
        registry.Load(FaultyPath(), options);
    EXPECT_TRUE(backend.ok()) << backend.status();
    return backend.ok() ? *backend : nullptr;
  }
};

// A two-layer MLP's loss and gradients on `device`.
std::vector<std::vector<double>> MlpStep(const Device& device) {
  Tensor x = MakeTensor(device, RandomValues(16 * 24, 1), {16, 24});
  Tensor w1 = MakeTensor(device, RandomValues(24 * 32, 2, 0.2), {24, 32});
  Tensor w2 = MakeTensor(device, RandomValues(32 * 8, 3, 0.2), {32, 8});
  Tensor y = MakeTensor(device, RandomValues(16 * 8, 4), {16, 8});
  EXPECT_TRUE(w1.set_requires_grad(true).ok());
  EXPECT_TRUE(w2.set_requires_grad(true).ok());
  absl::StatusOr<Tensor> h = matmul(x, w1);
  EXPECT_TRUE(h.ok()) << h.status();
  if (!h.ok()) return {};
  absl::StatusOr<Tensor> a = relu(*h);
  absl::StatusOr<Tensor> out = matmul(*a, w2);
  absl::StatusOr<Tensor> s = softmax(*out, 1);
  absl::StatusOr<Tensor> loss = mse_loss(*s, y);
  EXPECT_TRUE(loss.ok()) << loss.status();
  if (!loss.ok()) return {};
  EXPECT_TRUE(loss->backward().ok());
  return {Values(*loss), Values(w1.grad()), Values(w2.grad())};
}

TEST_F(IsolatedPluginTest, OutOfProcessMatchesInProcessBitForBit) {
  Registry registry;
  const Backend* isolated = LoadIsolated(registry);
  ASSERT_NE(isolated, nullptr);
  ASSERT_NE(isolated->process(), nullptr);
  EXPECT_GT(isolated->process()->pid(), 0);
  EXPECT_THAT(isolated->identity().build_info, HasSubstr("out of process"));
  // The same kernels in this process: the reference plugin.
  const std::vector<std::vector<double>> want =
      MlpStep(testing::ReferenceDevice());
  const std::vector<std::vector<double>> got = MlpStep(Device(isolated, 0));
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << i;
  EXPECT_EQ(isolated->failure(), "");
}

// Launches from several threads at once share one channel: each gets its
// own answer (calls are serialized, never interleaved).
TEST_F(IsolatedPluginTest, LaunchesFromManyThreadsEachGetTheirOwnAnswer) {
  Registry registry;
  const Backend* backend = LoadIsolated(registry);
  ASSERT_NE(backend, nullptr);
  const Device device(backend, 0);
  constexpr int kThreads = 4, kRounds = 50;
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < kRounds; ++round) {
        // Values only this thread and round produce: t * 1000 + round + i.
        std::vector<float> values(64);
        for (int i = 0; i < 64; ++i) values[i] = t * 1000 + round + i;
        absl::StatusOr<Tensor> a =
            from_floats(values, {64}, DType::kF32, device);
        absl::StatusOr<Tensor> doubled =
            a.ok() ? add(*a, *a) : absl::StatusOr<Tensor>(a.status());
        absl::StatusOr<std::vector<float>> got =
            doubled.ok() ? doubled->to_float_vector()
                         : absl::StatusOr<std::vector<float>>(doubled.status());
        if (!got.ok()) {
          errors[t] = std::string(got.status().message());
          return;
        }
        for (int i = 0; i < 64; ++i) {
          if ((*got)[i] != 2 * values[i]) {
            errors[t] = "thread " + std::to_string(t) + " round " +
                        std::to_string(round) + " got another's answer";
            return;
          }
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(errors[t], "") << t;
  EXPECT_EQ(backend->failure(), "");
}

TEST_F(IsolatedPluginTest, ACrashInAKernelFailsTheBackendNotTheProcess) {
  Fault("crash", "matmul", 2);
  Registry registry;
  const Backend* backend = LoadIsolated(registry);
  ASSERT_NE(backend, nullptr);
  const Device device(backend, 0);
  Tensor a = MakeTensor(device, RandomValues(8 * 8, 5), {8, 8});
  ASSERT_TRUE(matmul(a, a).ok());  // The first matmul runs.
  absl::StatusOr<Tensor> second = matmul(a, a);
  ASSERT_FALSE(second.ok());
  EXPECT_TRUE(absl::IsUnavailable(second.status())) << second.status();
  EXPECT_THAT(second.status().message(),
              HasSubstr("crashed: SIGSEGV in matmul (launch"));
  EXPECT_THAT(backend->failure(), HasSubstr("crashed: SIGSEGV in matmul"));
  // Every later call says why, without reaching the dead process.
  absl::StatusOr<Tensor> sum = add(a, a);
  ASSERT_FALSE(sum.ok());
  EXPECT_TRUE(absl::IsUnavailable(sum.status())) << sum.status();
  EXPECT_THAT(sum.status().message(), HasSubstr("SIGSEGV in matmul"));
  // The registry shows it and no longer offers it.
  bool reported = false;
  for (const PluginReport& r : registry.Reports()) {
    if (r.name != "faulty") continue;
    reported = true;
    EXPECT_EQ(r.state, PluginState::kFailed);
    EXPECT_THAT(r.reason, HasSubstr("out of process: crashed: SIGSEGV"));
  }
  EXPECT_TRUE(reported);
  EXPECT_TRUE(registry.UsableBackends().empty());
  EXPECT_TRUE(absl::IsUnavailable(registry.FindBackend("faulty").status()));
}

TEST_F(IsolatedPluginTest, AHangIsKilledByTheWatchdog) {
  Fault("hang", "matmul", 1);
  Registry registry;
  const Backend* backend = LoadIsolated(registry, absl::Milliseconds(400));
  ASSERT_NE(backend, nullptr);
  Tensor a = MakeTensor(Device(backend, 0), RandomValues(4 * 4, 6), {4, 4});
  const absl::Time start = absl::Now();
  absl::StatusOr<Tensor> out = matmul(a, a);
  const absl::Duration took = absl::Now() - start;
  ASSERT_FALSE(out.ok());
  EXPECT_TRUE(absl::IsUnavailable(out.status())) << out.status();
  EXPECT_THAT(out.status().message(),
              HasSubstr("hung: matmul (launch 1) did not return in 400ms"));
  EXPECT_LT(took, absl::Seconds(10));
  // Killed: nothing is left running.
  EXPECT_NE(kill(backend->process()->pid(), 0), 0);
}

struct FatalFault {
  const char* mode;
  const char* reason;
};

class FatalFaultTest : public IsolatedPluginTest,
                       public ::testing::WithParamInterface<FatalFault> {};

TEST_P(FatalFaultTest, IsReportedWithItsCause) {
  Fault(GetParam().mode, "softmax", 1);
  Registry registry;
  const Backend* backend = LoadIsolated(registry);
  ASSERT_NE(backend, nullptr);
  Tensor a = MakeTensor(Device(backend, 0), RandomValues(4 * 6, 7), {4, 6});
  ASSERT_TRUE(
      matmul(a, MakeTensor(Device(backend, 0), RandomValues(6 * 3, 8), {6, 3}))
          .ok());
  absl::StatusOr<Tensor> out = softmax(a, 1);
  ASSERT_FALSE(out.ok());
  EXPECT_TRUE(absl::IsUnavailable(out.status())) << out.status();
  EXPECT_THAT(out.status().message(), HasSubstr(GetParam().reason));
}

INSTANTIATE_TEST_SUITE_P(
    Faults, FatalFaultTest,
    ::testing::Values(FatalFault{"abort", "crashed: SIGABRT in softmax"},
                      FatalFault{"exit0", "exited with status 0 in softmax"},
                      // glibc finds the damaged chunk header and aborts.
                      FatalFault{"heap", "crashed: SIGABRT in softmax"}),
    [](const ::testing::TestParamInfo<FatalFault>& info) {
      return std::string(info.param.mode);
    });

TEST_F(IsolatedPluginTest, AnOverrunStaysInTheArena) {
  Fault("overrun", "matmul", 1);
  Registry registry;
  const Backend* backend = LoadIsolated(registry);
  ASSERT_NE(backend, nullptr);
  // This process's memory beside the launch: an in-process device's tensor.
  const std::vector<float> sentinel_values = RandomValues(64 * 1024, 9);
  Tensor sentinel =
      MakeTensor(testing::ReferenceDevice(), sentinel_values, {64 * 1024});
  Tensor a = MakeTensor(Device(backend, 0), RandomValues(8 * 8, 10), {8, 8});
  absl::StatusOr<Tensor> out = matmul(a, a);
  ASSERT_TRUE(out.ok()) << out.status();
  // The kernel's own result is right; what it wrote past it landed in the
  // arena (where this backend's other tensors may live: not guaranteed to
  // survive), never in this process's heap.
  const std::vector<double> want = Values(matmul(
      MakeTensor(testing::ReferenceDevice(), RandomValues(8 * 8, 10), {8, 8}),
      MakeTensor(testing::ReferenceDevice(), RandomValues(8 * 8, 10), {8, 8})));
  EXPECT_EQ(Values(*out), want);
  const std::vector<double> kept = Values(sentinel);
  for (size_t i = 0; i < kept.size(); ++i) {
    ASSERT_EQ(kept[i], static_cast<double>(sentinel_values[i])) << i;
  }
  EXPECT_EQ(backend->failure(), "");
}

TEST_F(IsolatedPluginTest, MemoryOutsideTheArenaIsCopiedInAndBack) {
  Registry registry;
  const Backend* backend = LoadIsolated(registry);
  ASSERT_NE(backend, nullptr);
  // This process's vectors, never mapped into the plugin's process: the
  // launch reads a copy and writes one back. The output aliases input 0
  // (an in-place add), which the copy keeps.
  std::vector<float> x = {1, 2, 3, 4, 5, 6};
  const std::vector<float> y = {10, 20, 30, 40, 50, 60};
  const int64_t shape[] = {2, 3};
  const int64_t strides[] = {3, 1};
  const auto desc = [&](const float* data) {
    MixrtTensorDesc d{};
    d.struct_size = sizeof(d);
    d.data = const_cast<float*>(data);
    d.dtype = MIXRT_DTYPE_F32;
    d.ndim = 2;
    d.shape = shape;
    d.strides = strides;
    return d;
  };
  const MixrtTensorDesc inputs[] = {desc(x.data()), desc(y.data())};
  const MixrtTensorDesc outputs[] = {desc(x.data())};
  MixrtPointwiseAttrs attrs{};
  attrs.struct_size = sizeof(attrs);
  attrs.kind = MIXRT_BINARY_ADD;
  ASSERT_TRUE(
      backend->Launch(0, MIXRT_OP_BINARY, inputs, outputs, &attrs).ok());
  EXPECT_EQ(x, (std::vector<float>{11, 22, 33, 44, 55, 66}));
}

TEST_F(IsolatedPluginTest, DeviceMemoryPluginsCopyThroughTheArena) {
  // The fake accelerator reporting device memory: pointers are its handles,
  // copies go through a staging range.
  setenv("MIXRT_FAKE_DEVICE_MEMORY", "1", 1);
  Registry registry;
  LoadOptions options;
  options.isolation = "fake_accelerator";
  absl::StatusOr<const Backend*> backend = registry.Load(
      testing::RunfilePath("tests/fixtures/libmixrt_fake_accelerator.so"),
      options);
  unsetenv("MIXRT_FAKE_DEVICE_MEMORY");
  ASSERT_TRUE(backend.ok()) << backend.status();
  const Device device(*backend, 0);
  ASSERT_FALSE(device.has_flag(MIXRT_DEVICE_FLAG_HOST_MEMORY));
  // More than one staging piece (8 MiB) each way.
  const int64_t n = 3 * 1024 * 1024;
  const std::vector<float> values = RandomValues(n, 11);
  Tensor a = MakeTensor(device, values, {n});
  absl::StatusOr<Tensor> doubled = add(a, a);
  ASSERT_TRUE(doubled.ok()) << doubled.status();
  const std::vector<double> got = Values(*doubled);
  ASSERT_EQ(got.size(), values.size());
  for (int64_t i = 0; i < n; i += 9973) {
    EXPECT_EQ(got[i], 2.0 * values[i]) << i;
  }
  EXPECT_EQ(got[n - 1], 2.0 * values[n - 1]);
}

TEST_F(IsolatedPluginTest, AnAbortInAFusedKernelFailsTheBackend) {
  // The fake accelerator claims the elementwise chain as one group and
  // calls abort() when the fused kernel runs.
  setenv("MIXRT_FAKE_FUSION", "abort", 1);
  Registry registry;
  LoadOptions options;
  options.isolation = "all";
  absl::StatusOr<const Backend*> backend = registry.Load(
      testing::RunfilePath("tests/fixtures/libmixrt_fake_accelerator.so"),
      options);
  unsetenv("MIXRT_FAKE_FUSION");
  ASSERT_TRUE(backend.ok()) << backend.status();
  ASSERT_TRUE((*backend)->has_fusion());
  const Device device(*backend, 0);
  const std::vector<Tensor> in = {
      MakeTensor(device, RandomValues(8 * 16, 12), {8, 16}),
      MakeTensor(device, RandomValues(8 * 16, 13), {8, 16})};
  auto fn =
      [](const std::vector<Tensor>& x) -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_ASSIGN_OR_RETURN(Tensor a, relu(x[0]));
    MIXRT_ASSIGN_OR_RETURN(a, add(a, x[1]));
    MIXRT_ASSIGN_OR_RETURN(a, tanh(a));
    return std::vector<Tensor>{a};
  };
  absl::StatusOr<CompiledFunction> compiled = compile(fn);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  absl::Status failed = absl::OkStatus();
  for (int call = 0; call < 3 && failed.ok(); ++call) {
    failed = (*compiled)(in).status();
  }
  EXPECT_TRUE(absl::IsUnavailable(failed)) << failed;
  EXPECT_THAT(failed.message(),
              HasSubstr("crashed: SIGABRT in a fused kernel"));
  EXPECT_THAT((*backend)->failure(), HasSubstr("SIGABRT in a fused kernel"));
}

// The CPU plugin out of process: reduce-overhead's kernel graphs (and the
// plugin's fusion) are made and replayed in its process, and the compiled
// results equal eager ones on the CPU plugin in this process, bit for bit.
TEST_F(IsolatedPluginTest, CompiledGraphsRunOutOfProcessAsInProcess) {
  Registry registry;
  LoadOptions options;
  options.isolation = "cpu";
  absl::StatusOr<const Backend*> backend = registry.Load(
      testing::RunfilePath("backends/cpu/libmixrt_cpu.so"), options);
  ASSERT_TRUE(backend.ok()) << backend.status();
  ASSERT_TRUE((*backend)->has_kernel_graphs());
  ASSERT_TRUE((*backend)->has_fusion());
  const Device isolated(*backend, 0);
  const Device local = testing::CpuDevice();
  auto fn =
      [](const std::vector<Tensor>& x) -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_ASSIGN_OR_RETURN(Tensor h, matmul(x[0], x[1]));
    MIXRT_ASSIGN_OR_RETURN(h, add(h, x[2]));
    MIXRT_ASSIGN_OR_RETURN(h, relu(h));
    MIXRT_ASSIGN_OR_RETURN(Tensor s, softmax(h, 1));
    MIXRT_ASSIGN_OR_RETURN(Tensor t, tanh(s));
    return std::vector<Tensor>{t};
  };
  const auto inputs = [](const Device& d) {
    return std::vector<Tensor>{
        MakeTensor(d, RandomValues(16 * 32, 21), {16, 32}),
        MakeTensor(d, RandomValues(32 * 24, 22, 0.2), {32, 24}),
        MakeTensor(d, RandomValues(24, 23), {24})};
  };
  absl::StatusOr<std::vector<Tensor>> want = fn(inputs(local));
  ASSERT_TRUE(want.ok()) << want.status();
  for (const char* mode : {"default", "reduce-overhead"}) {
    absl::StatusOr<CompiledFunction> compiled = compile(fn, {.mode = mode});
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    const std::vector<Tensor> in = inputs(isolated);
    for (int call = 0; call < 3; ++call) {
      absl::StatusOr<std::vector<Tensor>> got = (*compiled)(in);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(Values((*got)[0]), Values((*want)[0])) << mode << " " << call;
    }
    const std::string explain = compiled->Explain();
    if (std::string(mode) == "reduce-overhead") {
      EXPECT_THAT(explain, HasSubstr("kernel graphs: 1 (")) << explain;
    }
    EXPECT_THAT(explain, Not(HasSubstr("fuses nothing"))) << explain;
  }
  EXPECT_EQ((*backend)->failure(), "");
}

TEST_F(IsolatedPluginTest, AMissingOrUntrustedHostIsAClearError) {
  setenv(kPluginHostEnv, "/nonexistent/mixrt-plugin-host", 1);
  Registry registry;
  LoadOptions options;
  options.isolation = "all";
  absl::StatusOr<const Backend*> backend = registry.Load(FaultyPath(), options);
  ASSERT_FALSE(backend.ok());
  EXPECT_THAT(backend.status().message(),
              HasSubstr("no mixrt-plugin-host to run an out-of-process plugin "
                        "in (looked: /nonexistent/mixrt-plugin-host)"));
  // Somewhere every user can write (and, unlike /tmp, not sticky: anyone
  // may replace it): refused, as plugins there are.
  const std::string open = std::string(getenv("TEST_TMPDIR")) + "/open";
  ASSERT_EQ(
      std::system(("mkdir -p " + open + " && chmod 0777 " + open).c_str()), 0);
  const std::string copy = open + "/mixrt-plugin-host";
  ASSERT_EQ(
      std::system(("cp " +
                   testing::RunfilePath("tools/plugin_host/mixrt-plugin-host") +
                   " " + copy)
                      .c_str()),
      0);
  absl::StatusOr<std::string> found = FindPluginHost(copy);
  std::remove(copy.c_str());
  ASSERT_FALSE(found.ok());
  EXPECT_THAT(found.status().message(), HasSubstr("refusing to run"));
}

TEST_F(IsolatedPluginTest, ACrashOrHangWhileLoadingIsAnError) {
  Registry registry;
  LoadOptions options;
  options.isolation = "all";
  options.call_timeout = absl::Milliseconds(300);
  absl::StatusOr<const Backend*> crashed = registry.Load(
      testing::RunfilePath(
          "tests/fixtures/hostile/libmixrt_hostile_crash_in_init.so"),
      options);
  ASSERT_FALSE(crashed.ok());
  EXPECT_THAT(crashed.status().message(),
              HasSubstr("crashed: SIGSEGV in plugin_initialize"));
  absl::StatusOr<const Backend*> hung = registry.Load(
      testing::RunfilePath(
          "tests/fixtures/hostile/libmixrt_hostile_hang_in_init.so"),
      options);
  ASSERT_FALSE(hung.ok());
  EXPECT_THAT(hung.status().message(),
              HasSubstr("hung: plugin_initialize did not return in 300ms"));
  // Both are reported as failed; nothing usable was registered.
  int failed = 0;
  for (const PluginReport& r : registry.Reports()) {
    failed += r.state == PluginState::kFailed;
  }
  EXPECT_EQ(failed, 2);
  EXPECT_TRUE(registry.UsableBackends().empty());
}

TEST(IsolationOptions, ABadTimeoutOrARelativeHostIsRefused) {
  for (const char* bad : {"abc", "0", "-5", "1e9"}) {
    setenv(kPluginTimeoutEnv, bad, 1);
    absl::StatusOr<IsolationOptions> options =
        IsolationOptionsFromEnvironment();
    ASSERT_FALSE(options.ok()) << bad;
    EXPECT_THAT(options.status().message(),
                HasSubstr("expected seconds, a number in (0, 86400]"));
  }
  setenv(kPluginTimeoutEnv, "2.5", 1);
  absl::StatusOr<IsolationOptions> options = IsolationOptionsFromEnvironment();
  unsetenv(kPluginTimeoutEnv);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->call_timeout, absl::Milliseconds(2500));
  // A relative path would run whatever the current directory holds.
  const std::string host =
      testing::RunfilePath("tools/plugin_host/mixrt-plugin-host");
  char here[4096];
  ASSERT_NE(getcwd(here, sizeof(here)), nullptr);
  ASSERT_EQ(chdir(host.substr(0, host.rfind('/')).c_str()), 0);
  absl::StatusOr<std::string> relative = FindPluginHost("mixrt-plugin-host");
  ASSERT_EQ(chdir(here), 0);
  ASSERT_FALSE(relative.ok());
  EXPECT_THAT(relative.status().message(),
              HasSubstr("is a relative path; give an absolute one"));
}

TEST(IsolationPolicy, NamesMatchThePluginFileName) {
  const IsolationPolicy policy = ParseIsolationPolicy(" cpu, faulty ");
  EXPECT_TRUE(policy.Wants("/x/libmixrt_cpu.so"));
  EXPECT_TRUE(policy.Wants("libmixrt_faulty.so"));
  EXPECT_FALSE(policy.Wants("/x/libmixrt_cuda.so"));
  EXPECT_FALSE(policy.Wants("/x/libmixrt_cpu.so.1"));
  EXPECT_TRUE(ParseIsolationPolicy("all").Wants("/x/libmixrt_cuda.so"));
  EXPECT_TRUE(ParseIsolationPolicy("").empty());
}

}  // namespace
}  // namespace mixrt
