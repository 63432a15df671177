// What a hostile or unlucky environment does to checkpoints (issue 16):
// planted files, non-regular paths, unloadable saves, half-applied loads,
// out-of-range fields, concurrent writers, bad paths found late.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/amp/grad_scaler/grad_scaler.h"
#include "core/io/checkpoint.h"
#include "core/nn/module.h"
#include "core/optim/lr_scheduler.h"
#include "core/optim/optimizer.h"
#include "core/tensor/factories.h"
#include "core/train/trainer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

using ::testing::HasSubstr;

std::string Tmp(const std::string& name) {
  return std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
}

std::string Contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A file in the checkpoint format with `header` as its JSON header and no
// tensor bytes, framed and CRC-ed correctly: only the header's meaning can
// make it fail to load.
std::string Framed(const std::string& header) {
  std::string out = "MIXRTCK1";
  const uint64_t n = header.size();
  out.append(reinterpret_cast<const char*>(&n), 8);
  out += header;
  const uint32_t crc = static_cast<uint32_t>(
      crc32(0L, reinterpret_cast<const Bytef*>(out.data()), out.size()));
  out.append(reinterpret_cast<const char*>(&crc), 4);
  out += "MIXRTEND";
  return out;
}

struct TrainingRun {
  std::shared_ptr<nn::Sequential> model;
  std::unique_ptr<SGD> optimizer;
  std::unique_ptr<GradScaler> scaler;
  Generator generator{7};
  TrainingState state() {
    return {model.get(), optimizer.get(), scaler.get(), &generator, 0};
  }
};

std::unique_ptr<TrainingRun> MakeRun(uint64_t seed) {
  const Device d = testing::ReferenceDevice();
  auto r = std::make_unique<TrainingRun>();
  Generator init(seed);
  r->model = *nn::MLP({3, 4, 2}, d, &init);
  r->optimizer = std::make_unique<SGD>(r->model->parameters(),
                                       SgdOptions{.lr = 0.1, .momentum = 0.9});
  r->scaler = std::make_unique<GradScaler>(d);
  return r;
}

std::vector<std::vector<double>> Weights(const nn::Module& m) {
  std::vector<std::vector<double>> w;
  for (const auto& [name, t] : m.named_parameters()) {
    w.push_back(*t.to_double_vector());
  }
  return w;
}

TEST(CheckpointSafety, NonFiniteScalarsAreRefusedAndTheOldFileSurvives) {
  const Device d = testing::ReferenceDevice();
  const std::string path = Tmp("nan.ckpt");
  Checkpoint good;
  good.scalars["lr"] = 0.1;
  ASSERT_TRUE(SaveCheckpoint(path, good).ok());
  const std::string before = Contents(path);
  for (double bad : {std::nan(""), double{INFINITY}, -double{INFINITY}}) {
    Checkpoint c;
    c.scalars["lr"] = bad;
    absl::Status s = SaveCheckpoint(path, c);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(), HasSubstr("'lr'"));
  }
  EXPECT_EQ(Contents(path), before);
  EXPECT_TRUE(LoadCheckpoint(path, d).ok());
}

TEST(CheckpointSafety, ANameThatIsNotUtf8IsRefusedNotACrash) {
  // JSON must be UTF-8; nlohmann throws on anything else, which used to
  // abort the process.
  Checkpoint c;
  c.scalars["bad\xff\xfename"] = 1;
  absl::Status s = SaveCheckpoint(Tmp("utf8.ckpt"), c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("not valid UTF-8"));
}

TEST(CheckpointSafety, NonFiniteHyperparametersNeverReachACheckpoint) {
  // PyTorch refuses them at construction; so does Create, and a directly
  // constructed optimizer refuses to step.
  const Device d = testing::ReferenceDevice();
  std::vector<Tensor> p = {*zeros({2}, DType::kF32, d)};
  EXPECT_THAT(SGD::Create(p, {.lr = std::nan("")}).status().message(),
              HasSubstr("Invalid learning rate"));
  EXPECT_FALSE(SGD::Create(p, {.lr = -1}).ok());
  EXPECT_FALSE(SGD::Create(p, {.lr = 0.1, .momentum = INFINITY}).ok());
  EXPECT_FALSE(SGD::Create(p, {.lr = 0.1, .nesterov = true}).ok());
  EXPECT_THAT(AdamW::Create(p, {.beta1 = 1.0}).status().message(),
              HasSubstr("Invalid beta parameter at index 0"));
  EXPECT_FALSE(AdamW::Create(p, {.beta2 = std::nan("")}).ok());
  EXPECT_THAT(AdamW::Create(p, {.eps = -1e-8}).status().message(),
              HasSubstr("Invalid epsilon value"));
  EXPECT_FALSE(AdamW::Create(p, {.weight_decay = INFINITY}).ok());
  EXPECT_TRUE(AdamW::Create(p, {}).ok());
  SGD direct(p, {.lr = std::nan("")});
  EXPECT_THAT(direct.step().message(), HasSubstr("Invalid learning rate"));
  SGD sgd(p, {.lr = 0.5});
  EXPECT_FALSE(sgd.set_lr(INFINITY).ok());
  EXPECT_EQ(sgd.lr(), 0.5);
  // Schedules that would divide by zero (SIGFPE) or produce NaN.
  EXPECT_THAT(StepLR::Create(&sgd, 0).status().message(),
              HasSubstr("step_size is 0"));
  EXPECT_THAT(CosineAnnealingLR::Create(&sgd, 0).status().message(),
              HasSubstr("T_max is 0"));
  EXPECT_FALSE(StepLR::Create(&sgd, 2, std::nan("")).ok());
  EXPECT_FALSE(CosineAnnealingLR::Create(&sgd, 5, -1).ok());
}

TEST(CheckpointSafety, AFailedLoadChangesNothing) {
  auto saved = MakeRun(1);
  const std::string path = Tmp("bad_optim.ckpt");
  auto target = MakeRun(2);
  const auto weights = Weights(*target->model);
  const double scale = *target->scaler->get_scale();
  // Valid model tensors with broken optimizer state, then broken scaler
  // state, then an out-of-range step: each must be refused before the
  // model's weights are touched.
  std::vector<std::function<void(Checkpoint&)>> breakers = {
      [](Checkpoint& c) {
        c.tensors["optim.0.momentum_buffer"] =
            *zeros({5}, DType::kF32, testing::ReferenceDevice());
      },
      [](Checkpoint& c) { c.scalars["scaler.scale"] = -1; },
      [](Checkpoint& c) { c.scalars["scaler.growth_interval"] = 0.5; },
      [](Checkpoint& c) { c.scalars["optim.lr"] = -3; },
      [](Checkpoint& c) { c.integers["step"] = uint64_t{1} << 63; },
  };
  for (size_t i = 0; i < breakers.size(); ++i) {
    Checkpoint c;
    for (const auto& [name, t] : saved->model->named_parameters()) {
      c.tensors["model." + name] = t;
    }
    c.scalars["scaler.scale"] = 1024;
    c.scalars["scaler.growth_factor"] = 2;
    c.scalars["scaler.backoff_factor"] = 0.5;
    c.scalars["scaler.growth_interval"] = 100;
    c.scalars["scaler._growth_tracker"] = 3;
    c.integers["step"] = 5;
    breakers[i](c);
    ASSERT_TRUE(SaveCheckpoint(path, c).ok());
    TrainingState state = target->state();
    absl::Status s = LoadTrainingCheckpoint(path, state);
    EXPECT_FALSE(s.ok()) << "breaker " << i;
    EXPECT_EQ(Weights(*target->model), weights) << "breaker " << i << ": " << s;
    EXPECT_EQ(*target->scaler->get_scale(), scale) << "breaker " << i;
    EXPECT_EQ(state.step, 0) << "breaker " << i;
  }
}

TEST(CheckpointSafety, SixtyFourBitValuesComeBackExactly) {
  auto a = MakeRun(1);
  a->generator.set_state(16045690984503098046ull, 18446744073709551615ull);
  TrainingState state = a->state();
  state.step = std::numeric_limits<int64_t>::max();
  const std::string path = Tmp("exact.ckpt");
  ASSERT_TRUE(SaveTrainingCheckpoint(path, state).ok());
  auto b = MakeRun(2);
  TrainingState loaded = b->state();
  ASSERT_TRUE(LoadTrainingCheckpoint(path, loaded).ok());
  EXPECT_EQ(b->generator.seed(), 16045690984503098046ull);
  EXPECT_EQ(b->generator.offset(), 18446744073709551615ull);
  EXPECT_EQ(loaded.step, std::numeric_limits<int64_t>::max());
  TrainingState negative = a->state();
  negative.step = -1;
  EXPECT_FALSE(SaveTrainingCheckpoint(path, negative).ok());
}

TEST(CheckpointSafety, OutOfRangeIntegerFieldsAreRefused) {
  // 1e300 or -5 as a (version 1) step, with a valid CRC, used to hit an
  // undefined double-to-int64 cast and train forever.
  const std::string path = Tmp("range.ckpt");
  for (double bad : {1e300, -5.0, 2.5, 9007199254740994.0}) {
    auto saved = MakeRun(1);
    Checkpoint c;
    for (const auto& [name, t] : saved->model->named_parameters()) {
      c.tensors["model." + name] = t;
    }
    c.scalars["step"] = bad;
    ASSERT_TRUE(SaveCheckpoint(path, c).ok());
    TrainingState state = saved->state();
    absl::Status s = LoadTrainingCheckpoint(path, state);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << bad;
    EXPECT_THAT(s.message(), HasSubstr("'step'"));
  }
  // In the integers section, a negative or fractional value is refused.
  const Device d = testing::ReferenceDevice();
  for (const char* bad : {"-5", "1.5", "1e300", "\"7\""}) {
    const std::string header = absl::StrCat(
        R"({"version":2,"entries":[],"integers":{"step":)", bad, "}}");
    absl::StatusOr<Checkpoint> c = ParseCheckpoint(Framed(header), "x", d);
    EXPECT_EQ(c.status().code(), absl::StatusCode::kDataLoss) << bad;
    EXPECT_THAT(c.status().message(), HasSubstr("integer 'step'")) << bad;
  }
  absl::StatusOr<Checkpoint> future =
      ParseCheckpoint(Framed(R"({"version":3,"entries":[]})"), "x", d);
  EXPECT_THAT(future.status().message(), HasSubstr("format version is 3"));
  absl::StatusOr<Checkpoint> null_scalar = ParseCheckpoint(
      Framed(R"({"version":1,"entries":[],"scalars":{"lr":null}})"), "x", d);
  EXPECT_FALSE(null_scalar.ok());
}

TEST(CheckpointSafety, NonRegularFilesAreRefusedNeverWaitedOn) {
  const Device d = testing::ReferenceDevice();
  const std::string fifo = Tmp("resume.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Opened blocking, this would wait for a writer forever.
  absl::StatusOr<Checkpoint> c = LoadCheckpoint(fifo, d);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(c.status().message(), HasSubstr("not a regular file"));
  EXPECT_FALSE(LoadCheckpoint("/dev/zero", d).ok());
  // Saving over a FIFO or device is refused and leaves it as it was.
  absl::Status s = SaveCheckpoint(fifo, Checkpoint{});
  EXPECT_THAT(s.message(), HasSubstr("it is a FIFO"));
  struct stat st;
  ASSERT_EQ(::stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_THAT(SaveCheckpoint("/dev/null", Checkpoint{}).message(),
              HasSubstr("character device"));
}

TEST(CheckpointSafety, LoadsAreStreamedNotReadWhole) {
  // 4 TiB, sparse. Read whole first (as loads used to), it fails as out of
  // memory and was reported as "truncated"; streamed, its framing is
  // checked from the two ends first and it is refused at once.
  const Device d = testing::ReferenceDevice();
  const std::string path = Tmp("huge.bin");
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  const bool sparse = ::ftruncate(fd, off_t{1} << 42) == 0;
  if (sparse) {
    ASSERT_EQ(::pwrite(fd, "MIXRTCK1", 8, 0), 8);
  }
  ::close(fd);
  if (!sparse) GTEST_SKIP() << "no 4 TiB sparse files on this file system";
  absl::StatusOr<Checkpoint> c = LoadCheckpoint(path, d);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kDataLoss) << c.status();
  EXPECT_THAT(c.status().message(), HasSubstr("no end marker"));
  ASSERT_EQ(::truncate(path.c_str(), 0), 0);
  ASSERT_EQ(::truncate(path.c_str(), off_t{1} << 42), 0);  // Zeros: no magic.
  c = LoadCheckpoint(path, d);
  EXPECT_THAT(c.status().message(), HasSubstr("bad magic"));
  ::unlink(path.c_str());
}

TEST(CheckpointSafety, StreamedAndInMemoryReadsAgree) {
  // A 4 MiB tensor spans several CRC chunks; every byte comes back.
  const Device d = testing::ReferenceDevice();
  std::vector<float> values(1 << 20);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
  Checkpoint c;
  c.tensors["w"] = *from_floats(values, {1 << 20}, DType::kF32, d);
  c.integers["step"] = 3;
  const std::string path = Tmp("streamed.ckpt");
  ASSERT_TRUE(SaveCheckpoint(path, c).ok());
  absl::StatusOr<Checkpoint> streamed = LoadCheckpoint(path, d);
  absl::StatusOr<Checkpoint> in_memory =
      ParseCheckpoint(Contents(path), path, d);
  ASSERT_TRUE(streamed.ok()) << streamed.status();
  ASSERT_TRUE(in_memory.ok()) << in_memory.status();
  EXPECT_EQ(*streamed->tensors.at("w").to_float_vector(), values);
  EXPECT_EQ(*in_memory->tensors.at("w").to_float_vector(), values);
  EXPECT_EQ(streamed->integers.at("step"), 3u);
  // One flipped byte in the middle of the tensor: the streamed CRC sees it.
  std::string bytes = Contents(path);
  bytes[bytes.size() / 2] ^= 1;
  std::ofstream(path, std::ios::binary) << bytes;
  EXPECT_THAT(LoadCheckpoint(path, d).status().message(), HasSubstr("CRC-32"));
}

TEST(CheckpointSafety, ASecondRunOnTheSamePathIsRefusedWithThePid) {
  const Device d = testing::ReferenceDevice();
  const std::string path = Tmp("shared_run.ckpt");
  auto trainer = [&] {
    auto r = MakeRun(1);
    return std::make_unique<Trainer>(
        r->model, std::move(r->optimizer),
        [](const Tensor& out, const Tensor&) -> absl::StatusOr<Tensor> {
          return out;
        },
        d, TrainerOptions{.use_amp = false});
  };
  auto first = trainer();
  ASSERT_TRUE(first->claim_checkpoint_path(path).ok());
  ASSERT_TRUE(first->save_checkpoint(path).ok());
  auto second = trainer();
  absl::Status s = second->save_checkpoint(path);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(),
              HasSubstr(absl::StrCat("another run (pid ", ::getpid(), ")")));
  first.reset();  // The first run ends: its lock goes with it.
  EXPECT_TRUE(second->save_checkpoint(path).ok());
}

TEST(CheckpointSafety, ABadPathIsFoundBeforeTrainingStarts) {
  const Device d = testing::ReferenceDevice();
  auto r = MakeRun(1);
  Trainer t(
      r->model, std::move(r->optimizer),
      [](const Tensor& out, const Tensor&) -> absl::StatusOr<Tensor> {
        return out;
      },
      d, TrainerOptions{.use_amp = false});
  absl::Status s = t.claim_checkpoint_path(Tmp("no/such/dir/run.ckpt"));
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("no/such/dir"));
  EXPECT_THAT(t.claim_checkpoint_path("/dev/null").message(),
              HasSubstr("character device"));
}

TEST(CheckpointSafety, StaleTemporariesOfKilledWritersAreCleanedUp) {
  const std::string path = Tmp("stale.ckpt");
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  const std::string stale = absl::StrCat(path, ".tmp.", child);
  std::ofstream(stale) << "half a checkpoint";
  ASSERT_TRUE(SaveCheckpoint(path, Checkpoint{}).ok());
  EXPECT_NE(::access(stale.c_str(), F_OK), 0) << stale << " left behind";
}

}  // namespace
}  // namespace mixrt
