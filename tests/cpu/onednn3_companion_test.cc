// The CPU plugin's products on the oneDNN 3.x companion
// (backends/cpu/onednn/onednn3_companion.h), against products computed
// here in double. Two targets run this file: MIXRT_CPU_ONEDNN=3 (every
// product the companion can take goes there) and =measure (each new shape
// is timed on both oneDNNs, then runs on the faster). Either way the
// answers must be the product's, the timing must not disturb an
// accumulating output, and a shape is timed once. f32 products of values
// uniform in [-2, 2): f32 accumulation of k terms errs by at most k f32
// ulps of the sum of magnitudes (each term below 4): k * 2^-24 * 4k.
//
// And the companion refuses what it must: a path that is missing, a
// library in a directory others can write, a file that is no companion, a
// truncated one, a FIFO.
#include "backends/cpu/onednn/onednn3_companion.h"

#include <sys/stat.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testing/absolute_env_path.h"
#include "tests/testing/uniform_floats.h"

namespace mixrt::cpu {
namespace {

// Before the companion is first loaded (it requires an absolute path).
const bool kAbsoluteLibrary =
    testing::MakeEnvPathAbsolute("MIXRT_CPU_ONEDNN3_LIBRARY");

using testing::UniformFloats;

std::string Library() {
  const char* path = std::getenv("MIXRT_CPU_ONEDNN3_LIBRARY");
  return path != nullptr ? path : "";
}

bool Measured() {
  const char* rule = std::getenv("MIXRT_CPU_ONEDNN");
  return rule != nullptr && std::string(rule) == "measure";
}

// A program linked with the plugin's code has oneDNN 2 in its global symbol
// scope; without RTLD_DEEPBIND (refused by AddressSanitizer) the companion
// is refused there, which the refusal test checks.
bool CompanionLoadsHere() {
#if defined(__SANITIZE_ADDRESS__)
  return false;
#else
  return true;
#endif
}

MatmulOperand Operand(MixrtDtype dtype, dnnl::memory::dims dims,
                      dnnl::memory::dims strides) {
  MatmulOperand o;
  o.dtype = dtype;
  o.dims = std::move(dims);
  o.strides = std::move(strides);
  return o;
}

struct Product {
  int64_t batch, m, n, k;
  bool b_transposed;  // b as a Linear's weight [n, k].
  bool bias;
  float sum_beta;
  bool relu;
};

double Tolerance(int64_t k) { return 4.0 * k * k * std::ldexp(1.0, -24); }

// c = relu?(a x b + bias + sum_beta * c0) in double, a [batch, m, k] and b
// [batch, k, n] (or its transpose) row-major.
std::vector<double> Reference(const Product& p, const std::vector<float>& a,
                              const std::vector<float>& b,
                              const std::vector<float>& bias,
                              const std::vector<float>& c0) {
  std::vector<double> c(p.batch * p.m * p.n);
  for (int64_t s = 0; s < p.batch; ++s) {
    for (int64_t i = 0; i < p.m; ++i) {
      for (int64_t j = 0; j < p.n; ++j) {
        double sum = 0;
        for (int64_t l = 0; l < p.k; ++l) {
          const double bv = p.b_transposed ? b[(s * p.n + j) * p.k + l]
                                           : b[(s * p.k + l) * p.n + j];
          sum += double{a[(s * p.m + i) * p.k + l]} * bv;
        }
        const int64_t at = (s * p.m + i) * p.n + j;
        if (p.bias) sum += bias[j];
        sum += double{p.sum_beta} * c0[at];
        c[at] = p.relu ? std::max(sum, 0.0) : sum;
      }
    }
  }
  return c;
}

MatmulShape ShapeOf(const Product& p) {
  MatmulShape shape;
  const int64_t m = p.m, n = p.n, k = p.k;
  shape.a = Operand(MIXRT_DTYPE_F32, {p.batch, m, k}, {m * k, k, 1});
  shape.b = p.b_transposed
                ? Operand(MIXRT_DTYPE_F32, {p.batch, k, n}, {n * k, 1, k})
                : Operand(MIXRT_DTYPE_F32, {p.batch, k, n}, {k * n, n, 1});
  shape.c = Operand(MIXRT_DTYPE_F32, {p.batch, m, n}, {m * n, n, 1});
  if (p.bias) shape.bias = Operand(MIXRT_DTYPE_F32, {1, 1, n}, {n, n, 1});
  shape.sum_beta = p.sum_beta;
  if (p.relu) {
    MatmulPostOp relu;
    relu.algorithm = dnnl::algorithm::eltwise_relu;
    shape.post_ops.push_back(relu);
  }
  return shape;
}

void ExpectProduct(const Product& p, int repeats) {
  const std::vector<float> a = UniformFloats(p.batch * p.m * p.k, 1);
  const std::vector<float> b = UniformFloats(p.batch * p.k * p.n, 2);
  const std::vector<float> bias = UniformFloats(p.n, 3);
  const std::vector<float> c0 = UniformFloats(p.batch * p.m * p.n, 4);
  const std::vector<double> want = Reference(p, a, b, bias, c0);
  const MatmulShape shape = ShapeOf(p);
  for (int r = 0; r < repeats; ++r) {
    std::vector<float> c = c0;
    RunProductOnChosenOneDnn(shape, a.data(), b.data(), c.data(),
                             p.bias ? bias.data() : nullptr, nullptr);
    for (size_t i = 0; i < c.size(); ++i) {
      ASSERT_NEAR(c[i], want[i], Tolerance(p.k))
          << "element " << i << " of product " << p.m << "x" << p.n << "x"
          << p.k << " (run " << r << ")";
    }
  }
}

class OneDnn3CompanionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!CompanionLoadsHere()) GTEST_SKIP() << "AddressSanitizer build";
    ASSERT_FALSE(Library().empty()) << "MIXRT_CPU_ONEDNN3_LIBRARY unset";
    ASSERT_TRUE(OneDnn3CompanionLoaded()) << OneDnn3CompanionSummary();
  }
};

TEST_F(OneDnn3CompanionTest, ProductsMatchDoubleAndTakeTheRuleSide) {
  const std::vector<Product> products = {
      {1, 64, 48, 80, false, false, 0, false},
      {1, 33, 70, 129, true, true, 0, true},    // A Linear: b^T, bias, relu.
      {4, 17, 40, 64, false, false, 1, false},  // Batched, accumulating.
      {2, 96, 96, 32, true, true, 0.5f, true},
  };
  const ProductOneDnnCounts before = ProductOneDnnCountsSoFar();
  constexpr int kRepeats = 3;
  for (const Product& p : products) ExpectProduct(p, kRepeats);
  const ProductOneDnnCounts after = ProductOneDnnCountsSoFar();
  const int64_t runs = static_cast<int64_t>(products.size()) * kRepeats;
  EXPECT_EQ((after.on_own - before.on_own) +
                (after.on_companion - before.on_companion),
            runs);
  if (Measured()) {
    // Each shape timed once, on its first run; later runs reuse the choice.
    EXPECT_EQ(after.shapes_timed - before.shapes_timed,
              static_cast<int64_t>(products.size()));
  } else {
    EXPECT_EQ(after.on_companion - before.on_companion, runs);
    EXPECT_EQ(after.shapes_timed, before.shapes_timed);
  }
}

TEST_F(OneDnn3CompanionTest, SummarySaysWhichOneDnnAndTheRule) {
  const std::string summary = OneDnn3CompanionSummary();
  EXPECT_NE(summary.find("oneDNN 3."), std::string::npos) << summary;
  EXPECT_NE(summary.find(Measured() ? "where it timed faster"
                                    : "every product it can take"),
            std::string::npos)
      << summary;
}

// Products with weights packed for oneDNN 2.x or a second tensor in the
// epilogue stay on the plugin's own oneDNN, and still come out right.
TEST_F(OneDnn3CompanionTest, ProductsTheCompanionCannotTakeStayOnOwn) {
  const Product p{1, 8, 16, 24, false, false, 0, false};
  MatmulShape shape = ShapeOf(p);
  MatmulPostOp add;
  add.binary = true;
  add.algorithm = dnnl::algorithm::binary_add;
  add.operand = shape.c;
  shape.post_ops.push_back(add);
  const std::vector<float> a = UniformFloats(p.m * p.k, 5);
  const std::vector<float> b = UniformFloats(p.k * p.n, 6);
  const std::vector<float> addend = UniformFloats(p.m * p.n, 7);
  std::vector<float> c(p.m * p.n);
  const void* post_data[] = {addend.data()};
  const ProductOneDnnCounts before = ProductOneDnnCountsSoFar();
  RunProductOnChosenOneDnn(shape, a.data(), b.data(), c.data(), nullptr,
                           post_data);
  const ProductOneDnnCounts after = ProductOneDnnCountsSoFar();
  EXPECT_EQ(after.on_own - before.on_own, 1);
  EXPECT_EQ(after.on_companion, before.on_companion);
  const std::vector<double> want =
      Reference(p, a, b, {}, std::vector<float>(c.size()));
  for (size_t i = 0; i < c.size(); ++i) {
    ASSERT_NEAR(c[i], want[i] + addend[i], Tolerance(p.k)) << i;
  }
}

std::string CopyInto(const std::string& dir, const std::string& from,
                     size_t bytes = std::string::npos) {
  std::ifstream in(from, std::ios::binary);
  std::string data((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  const std::string to = dir + "/libmixrt_cpu_onednn3.so";
  std::ofstream out(to, std::ios::binary | std::ios::trunc);
  out << data.substr(0, bytes);
  return to;
}

std::string FreshDir(const std::string& name, mode_t mode) {
  const std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
  mkdir(dir.c_str(), 0700);
  chmod(dir.c_str(), mode);  // Past the umask.
  return dir;
}

TEST(OneDnn3CompanionRefusalTest, RefusesWhatItMust) {
  ASSERT_FALSE(Library().empty()) << "MIXRT_CPU_ONEDNN3_LIBRARY unset";
  // The real one where it was built (a copy elsewhere would not find its
  // oneDNN through its run path).
  const std::string why_good = OneDnn3CompanionRefusal(Library());
  if (CompanionLoadsHere()) {
    EXPECT_EQ(why_good, "");
  } else {
    EXPECT_NE(why_good.find("instead of 3.x"), std::string::npos) << why_good;
  }

  const std::string missing = FreshDir("empty", 0700) + "/libnothing.so";
  EXPECT_NE(OneDnn3CompanionRefusal(missing).find("no libmixrt_cpu_onednn3"),
            std::string::npos);

  const std::string shared = CopyInto(FreshDir("shared", 0777), Library());
  const std::string why_shared = OneDnn3CompanionRefusal(shared);
  EXPECT_NE(why_shared.find("not loaded: directory"), std::string::npos)
      << why_shared;
  EXPECT_NE(why_shared.find("writable"), std::string::npos) << why_shared;

  const std::string cut = CopyInto(FreshDir("cut", 0700), Library(), 4096);
  const std::string why_cut = OneDnn3CompanionRefusal(cut);
  EXPECT_NE(why_cut.find("refused before loading"), std::string::npos)
      << why_cut;

  // A FIFO planted at the path: refused at once, never waited on.
  const std::string fifo = FreshDir("fifo", 0700) + "/libmixrt_cpu_onednn3.so";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const std::string why_fifo = OneDnn3CompanionRefusal(fifo);
  EXPECT_NE(why_fifo.find("not a regular file"), std::string::npos) << why_fifo;

  // A shared object that is no companion: the C library.
  const std::string other =
      FreshDir("other", 0700) + "/libmixrt_cpu_onednn3.so";
  ASSERT_EQ(symlink("/lib/x86_64-linux-gnu/libm.so.6", other.c_str()), 0);
  const std::string why_other = OneDnn3CompanionRefusal(other);
  EXPECT_NE(why_other.find("lacks the companion's entry points"),
            std::string::npos)
      << why_other;
}

}  // namespace
}  // namespace mixrt::cpu
