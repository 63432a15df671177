// No data loss: a process writing checkpoints is SIGKILLed at random points,
// many times; the checkpoint on disk always loads (the old one or the new
// one, never a mix), and a flipped bit anywhere is always refused.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <random>

#include "core/io/checkpoint.h"
#include "core/tensor/factories.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

Checkpoint Make(const Device& d, double value) {
  Checkpoint c;
  c.tensors["weights"] = *full({1 << 20}, value, DType::kF32, d);  // 4 MiB
  c.tensors["bias"] = *full({17}, value, DType::kBF16, d);
  c.scalars["value"] = value;
  return c;
}

TEST(CheckpointCrash, KilledWritersNeverCorruptTheCheckpoint) {
  const Device d = testing::ReferenceDevice();
  const std::string path = std::string(getenv("TEST_TMPDIR")) + "/crash.ckpt";
  ASSERT_TRUE(SaveCheckpoint(path, Make(d, 0)).ok());
  std::mt19937 rng(42);
  int killed_mid_write = 0;
  for (int round = 1; round <= 25; ++round) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      for (int i = 0;; ++i) {  // Keep rewriting until killed.
        if (!SaveCheckpoint(path, Make(d, round * 1000 + i)).ok()) _exit(2);
      }
    }
    usleep(std::uniform_int_distribution<int>(0, 30000)(rng));
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    killed_mid_write += WIFSIGNALED(status);
    auto loaded = LoadCheckpoint(path, d);
    ASSERT_TRUE(loaded.ok()) << "round " << round << ": " << loaded.status();
    const double value = loaded->scalars.at("value");
    // Every element agrees with the metadata: no half-written file.
    const std::vector<double> w =
        *loaded->tensors.at("weights").to_double_vector();
    EXPECT_EQ(w.front(), value);
    EXPECT_EQ(w.back(), value);
  }
  EXPECT_EQ(killed_mid_write, 25);
}

TEST(CheckpointCrash, EveryFlippedBitIsRefused) {
  const Device d = testing::ReferenceDevice();
  const std::string path = std::string(getenv("TEST_TMPDIR")) + "/small.ckpt";
  Checkpoint small;
  small.tensors["t"] = *full({8}, 1.5, DType::kF32, d);
  small.scalars["step"] = 3;
  ASSERT_TRUE(SaveCheckpoint(path, small).ok());
  std::ifstream in(path, std::ios::binary);
  const std::string good((std::istreambuf_iterator<char>(in)),
                         std::istreambuf_iterator<char>());
  const std::string bad = path + ".bad";
  int refused = 0;
  for (size_t byte = 0; byte < good.size(); ++byte) {
    for (int bit = 0; bit < 8; bit += 3) {
      std::string flipped = good;
      flipped[byte] ^= static_cast<char>(1 << bit);
      std::ofstream(bad, std::ios::binary | std::ios::trunc) << flipped;
      refused += !LoadCheckpoint(bad, d).ok();
    }
  }
  EXPECT_EQ(refused, static_cast<int>(good.size()) * 3);
}

}  // namespace
}  // namespace mixrt
