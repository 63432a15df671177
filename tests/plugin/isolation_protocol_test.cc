// The host's side of the out-of-process channel against a plugin host that
// lies (tests/fixtures/hostile/lying_plugin_host.cc): an answer that is
// not the answer to the request asked (out of sequence, flipped in by a
// stray thread, too long, malformed) fails the backend with the reason
// and leaves no later call reading a late answer; a handle the plugin
// gives twice is refused, so no run reads past the caller's arrays.
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "core/plugin/isolated_plugin.h"
#include "core/plugin/isolation/arena_size.h"
#include "core/plugin/plugin_host_process.h"
#include "core/plugin/plugin_host_table.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_plugins.h"

namespace mixrt::isolation {
namespace {

using ::testing::HasSubstr;

// The plugin host, lying in `mode`, started; nullptr (test failed) if not.
std::unique_ptr<PluginHostProcess> StartLying(const std::string& mode) {
  setenv("MIXRT_LYING_MODE", mode.c_str(), 1);
  IsolationOptions options;
  options.host_binary =
      testing::RunfilePath("tests/fixtures/hostile/lying_plugin_host");
  options.call_timeout = absl::Seconds(20);
  options.arena_bytes = kMinArenaBytes;
  // Any existing file: the lying host never loads it.
  auto process =
      std::make_unique<PluginHostProcess>(options.host_binary, options);
  const int slot = AcquireSlot(process.get());
  EXPECT_GE(slot, 0);
  const absl::Status started = process->Start(slot);
  EXPECT_TRUE(started.ok()) << started;
  return started.ok() ? std::move(process) : nullptr;
}

std::string Message(MixrtError* error) {
  if (error == nullptr) return "OK";
  MixrtError_Message_Args m{};
  m.struct_size = sizeof(m);
  m.error = error;
  ErrorMessage(&m);
  std::string text(m.message, m.message_size);
  MixrtError_Destroy_Args d{};
  d.struct_size = sizeof(d);
  d.error = error;
  ErrorDestroy(&d);
  return text;
}

// A call, then another: the first fails the backend with `reason`, and the
// second is refused with the same reason instead of reading a late answer.
void ExpectProtocolBreak(const std::string& mode, const std::string& reason) {
  std::unique_ptr<PluginHostProcess> p = StartLying(mode);
  ASSERT_NE(p, nullptr);
  EXPECT_THAT(Message(p->SynchronizeDevice(0)),
              HasSubstr("broke the channel's protocol"));
  EXPECT_THAT(p->Failure(), HasSubstr(reason));
  EXPECT_THAT(Message(p->SynchronizeDevice(0)),
              HasSubstr("the backend is unavailable"));
}

TEST(IsolationProtocol, AnHonestHostAnswersEveryCall) {
  std::unique_ptr<PluginHostProcess> p = StartLying("honest");
  ASSERT_NE(p, nullptr);
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(Message(p->SynchronizeDevice(0)), "OK") << "call " << i;
  }
  EXPECT_EQ(p->Failure(), "");
}

TEST(IsolationProtocol, AStateWordFlippedByAnotherThreadIsNoAnswer) {
  // Before sequence numbers every launch "succeeded" without running.
  ExpectProtocolBreak("flip", "answer to request");
}

TEST(IsolationProtocol, AnAnswerToAnEarlierRequestIsNoAnswer) {
  ExpectProtocolBreak("stale", "where request");
}

TEST(IsolationProtocol, AnAnswerLongerThanTheChannelBreaksIt) {
  ExpectProtocolBreak("huge_length", "more than the channel's");
}

TEST(IsolationProtocol, AMalformedAnswerBreaksTheChannel) {
  ExpectProtocolBreak("short_string", "no status in the answer");
}

MixrtKernelGraph* CreateGraph(PluginHostProcess& p, int32_t buffers,
                              std::string* error) {
  MixrtKernelGraph_Create_Args a{};
  a.struct_size = sizeof(a);
  a.device = 0;
  a.num_buffers = buffers;
  *error = Message(p.GraphCreate(&a));
  return a.graph;
}

std::string RunGraph(PluginHostProcess& p, MixrtKernelGraph* graph,
                     void* const* buffers) {
  MixrtKernelGraph_Run_Args a{};
  a.struct_size = sizeof(a);
  a.graph = graph;
  a.buffers = buffers;
  a.failed_step = -1;
  return Message(p.GraphRun(&a));
}

TEST(IsolationProtocol, AHandleGivenTwiceIsRefused) {
  std::unique_ptr<PluginHostProcess> p = StartLying("same_handle");
  ASSERT_NE(p, nullptr);
  std::string error;
  MixrtKernelGraph* one = CreateGraph(*p, 1, &error);
  ASSERT_EQ(error, "OK");
  ASSERT_NE(one, nullptr);
  // The plugin answers a graph of 4 buffers with the first one's handle:
  // had it been taken, a run of the first would send 4 places from its
  // caller's array of 1.
  MixrtKernelGraph* four = CreateGraph(*p, 4, &error);
  EXPECT_THAT(error, HasSubstr("still holds"));
  EXPECT_EQ(four, nullptr);
  void* one_buffer[1] = {reinterpret_cast<void*>(0x10)};
  EXPECT_EQ(RunGraph(*p, one, one_buffer), "OK");
}

TEST(IsolationProtocol, EachGraphKeepsItsOwnBufferCount) {
  std::unique_ptr<PluginHostProcess> p = StartLying("honest");
  ASSERT_NE(p, nullptr);
  std::string error;
  MixrtKernelGraph* one = CreateGraph(*p, 1, &error);
  ASSERT_EQ(error, "OK");
  MixrtKernelGraph* four = CreateGraph(*p, 4, &error);
  ASSERT_EQ(error, "OK");
  ASSERT_NE(one, four);
  void* one_buffer[1] = {reinterpret_cast<void*>(0x10)};
  void* four_buffers[4] = {nullptr, nullptr, nullptr, nullptr};
  EXPECT_EQ(RunGraph(*p, one, one_buffer), "OK");
  EXPECT_EQ(RunGraph(*p, four, four_buffers), "OK");
  MixrtKernelGraph_Destroy_Args d{};
  d.struct_size = sizeof(d);
  d.graph = one;
  p->GraphDestroy(&d);
  EXPECT_THAT(RunGraph(*p, one, one_buffer), HasSubstr("not a graph"));
}

}  // namespace
}  // namespace mixrt::isolation
