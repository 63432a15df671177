#include "tests/gpu/host_tensor.h"

#include <cmath>
#include <random>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "tests/testing/test_plugins.h"

namespace mixrt::testing {
namespace {

size_t ElementSize(MixrtDtype dtype) {
  switch (dtype) {
    case MIXRT_DTYPE_F32:
    case MIXRT_DTYPE_I32:
      return 4;
    case MIXRT_DTYPE_F16:
    case MIXRT_DTYPE_BF16:
      return 2;
    case MIXRT_DTYPE_I64:
      return 8;
    default:
      return 1;
  }
}

std::vector<int64_t> RowMajorStrides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t s = 1;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    strides[d] = s;
    s *= shape[d];
  }
  return strides;
}

}  // namespace

HostTensor::HostTensor(MixrtDtype dtype, std::vector<int64_t> shape)
    : dtype_(dtype),
      shape_(std::move(shape)),
      strides_(RowMajorStrides(shape_)) {
  const size_t bytes = static_cast<size_t>(numel()) * ElementSize(dtype_);
  storage_ = std::make_shared<std::vector<uint64_t>>(bytes / 8 + 1, 0);
}

HostTensor HostTensor::Strided(std::vector<int64_t> shape,
                               std::vector<int64_t> strides) const {
  HostTensor view = *this;
  view.shape_ = std::move(shape);
  view.strides_ = std::move(strides);
  return view;
}

int64_t HostTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  return n;
}

const MixrtTensorDesc& HostTensor::desc() const {
  desc_.struct_size = sizeof(MixrtTensorDesc);
  desc_.data = storage_->data();
  desc_.dtype = dtype_;
  desc_.ndim = static_cast<int32_t>(shape_.size());
  desc_.shape = shape_.data();
  desc_.strides = strides_.data();
  return desc_;
}

double HostTensor::Get(int64_t i) const {
  const gpu::DeviceTensor t = device();
  const int64_t o = t.Offset(i);
  if (dtype_ == MIXRT_DTYPE_I64 || dtype_ == MIXRT_DTYPE_I32 ||
      dtype_ == MIXRT_DTYPE_BOOL) {
    return static_cast<double>(t.LoadInt(o));
  }
  return t.LoadFloat(o);
}

void HostTensor::Set(int64_t i, double v) {
  const gpu::DeviceTensor t = device();
  const int64_t o = t.Offset(i);
  if (t.is_integer()) {
    t.StoreInt(o, static_cast<int64_t>(v));
  } else {
    t.StoreFloat(o, static_cast<float>(v));
  }
}

std::vector<double> HostTensor::Values() const {
  std::vector<double> v(numel());
  for (int64_t i = 0; i < numel(); ++i) v[i] = Get(i);
  return v;
}

HostTensor& HostTensor::FillRandom(uint64_t seed, double scale) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, scale);
  for (int64_t i = 0; i < numel(); ++i) Set(i, normal(rng));
  return *this;
}

HostTensor& HostTensor::FillInts(uint64_t seed, int64_t lo, int64_t hi) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> pick(lo, hi);
  for (int64_t i = 0; i < numel(); ++i) Set(i, static_cast<double>(pick(rng)));
  return *this;
}

HostTensor& HostTensor::Fill(const std::vector<double>& values) {
  for (int64_t i = 0; i < numel(); ++i) Set(i, values[i % values.size()]);
  return *this;
}

HostTensor HostTensor::Clone() const {
  HostTensor copy(dtype_, shape_);
  for (int64_t i = 0; i < numel(); ++i) copy.Set(i, Get(i));
  return copy;
}

void RunReference(MixrtOp op, const std::vector<const HostTensor*>& inputs,
                  const std::vector<const HostTensor*>& outputs,
                  const void* attrs) {
  std::vector<MixrtTensorDesc> in, out;
  for (const HostTensor* t : inputs) in.push_back(t->desc());
  for (const HostTensor* t : outputs) out.push_back(t->desc());
  const Device device = ReferenceDevice();
  const absl::Status status =
      device.backend()->Launch(device.index(), op, absl::MakeConstSpan(in),
                               absl::MakeConstSpan(out), attrs);
  ASSERT_TRUE(status.ok()) << status;
}

double StoreTolerance(MixrtDtype dtype) {
  switch (dtype) {
    case MIXRT_DTYPE_F16:
      return std::ldexp(1.0, -10);
    case MIXRT_DTYPE_BF16:
      return std::ldexp(1.0, -7);
    default:
      return 1e-5;
  }
}

void ExpectNear(const std::vector<double>& got, const std::vector<double>& want,
                double tol, double scale, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    bool ok;
    if (std::isnan(w)) {
      ok = std::isnan(g);
    } else if (std::isinf(w)) {
      ok = g == w;
    } else {
      ok = std::fabs(g - w) <= tol * (std::fabs(w) + scale);
    }
    if (!ok && reported++ < 5) {
      ADD_FAILURE() << what << ": element " << i << " is " << g
                    << ", reference " << w << " (tolerance " << tol << ")";
    }
  }
}

}  // namespace mixrt::testing
