#include "backends/cpu/gemm/small_gemm_bf16.h"

// GCC 12's AVX-512 headers trip its own -Wuninitialized (see
// softmax_rows.cc).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/match.h"
#include "backends/cpu/capability/cpu_info.h"
#include "backends/cpu/gemm/small_gemm.h"
#include "backends/cpu/gemm/tile_packing.h"
#include "mixrt/float_convert.h"

namespace mixrt::cpu {
namespace {

constexpr int kTileRows = 8;    // 8 x 2 accumulators: 16 of 32 registers.
constexpr int64_t kStrip = 32;  // Columns per tile: two vectors.

// The operands as vdpbf16ps reads them: 32-bit words holding the bf16
// pair (p = 2q, 2q + 1), the odd one zero past k. Pair q of a's row i is
// the word a[i * a_row + q * a_pair]; b's row q is words b[q * ldb] (one
// per column).
struct Pairs {
  const uint32_t* a = nullptr;
  int64_t a_row = 0, a_pair = 0;
  const uint32_t* b = nullptr;
  int64_t ldb = 0;
  int64_t pairs = 0;  // ceil(k / 2)
};

inline uint32_t Pair(uint16_t lo, uint16_t hi) {
  return static_cast<uint32_t>(lo) | static_cast<uint32_t>(hi) << 16;
}

// out[q * ldo + j] = (x(2q, j), x(2q + 1, j)) for x(p, j) = x[p * rows + j]
// with j contiguous (rows of x are its p): two rows interleaved, 8 columns
// a step.
void InterleaveRows(const uint16_t* x, int64_t rows, int64_t k, int64_t cols,
                    uint32_t* out, int64_t ldo) {
  for (int64_t q = 0; 2 * q < k; ++q) {
    const uint16_t* r0 = x + 2 * q * rows;
    const uint16_t* r1 = 2 * q + 1 < k ? r0 + rows : nullptr;
    uint32_t* o = out + q * ldo;
    int64_t j = 0;
    for (; j + 8 <= cols; j += 8) {
      const __m128i lo =
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(r0 + j));
      const __m128i hi =
          r1 != nullptr
              ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(r1 + j))
              : _mm_setzero_si128();
      _mm_storeu_si128(reinterpret_cast<__m128i*>(o + j),
                       _mm_unpacklo_epi16(lo, hi));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(o + j + 4),
                       _mm_unpackhi_epi16(lo, hi));
    }
    for (; j < cols; ++j) o[j] = Pair(r0[j], r1 != nullptr ? r1[j] : 0);
  }
}

// a as pair words (x.a, x.a_row, x.a_pair). A row-major a with an even k
// is read in place; a transposed a (a weight gradient's dY^T, whose p are
// rows in memory) is two rows interleaved per pair, read down its pairs.
void PackA(const SmallGemmBf16& g, std::vector<uint32_t>& scratch, Pairs* x) {
  const int64_t pairs = (g.k + 1) / 2;
  if (g.a_cols == 1 && g.k % 2 == 0 && g.a_rows % 2 == 0 &&
      reinterpret_cast<uintptr_t>(g.a) % 4 == 0) {
    x->a = reinterpret_cast<const uint32_t*>(g.a);
    x->a_row = g.a_rows / 2;
    x->a_pair = 1;
    return;
  }
  scratch.resize(std::max<size_t>(scratch.size(), g.m * pairs));
  uint32_t* out = scratch.data();
  x->a = out;
  if (g.a_rows == 1) {
    InterleaveRows(g.a, g.a_cols, g.k, g.m, out, g.m);
    x->a_row = 1;
    x->a_pair = g.m;
    return;
  }
  x->a_row = pairs;
  x->a_pair = 1;
  for (int64_t i = 0; i < g.m; ++i) {
    const uint16_t* row = g.a + i * g.a_rows;
    for (int64_t q = 0; q < pairs; ++q) {
      const int64_t p = 2 * q;
      out[i * pairs + q] =
          Pair(row[p * g.a_cols], p + 1 < g.k ? row[(p + 1) * g.a_cols] : 0);
    }
  }
}

// b's pair rows: [pairs][n] words.
const uint32_t* PackB(const SmallGemmBf16& g, std::vector<uint32_t>& scratch) {
  const int64_t pairs = (g.k + 1) / 2, n = g.n;
  scratch.resize(std::max<size_t>(scratch.size(), pairs * n));
  uint32_t* out = scratch.data();
  if (g.b_cols == 1) {
    InterleaveRows(g.b, g.b_rows, g.k, n, out, n);
    return out;
  }
  if (g.b_rows == 1 && g.k % 2 == 0 && g.b_cols % 2 == 0 &&
      reinterpret_cast<uintptr_t>(g.b) % 4 == 0) {
    // A Linear's weight read as its transpose: column j's pairs are
    // adjacent words of row j; the [n][pairs] words transposed 8 x 8.
    TransposePanel(reinterpret_cast<const float*>(g.b), g.b_cols / 2, n, pairs,
                   reinterpret_cast<float*>(out), n);
    return out;
  }
  for (int64_t q = 0; q < pairs; ++q) {
    const int64_t p = 2 * q;
    for (int64_t j = 0; j < n; ++j) {
      const uint16_t* col = g.b + j * g.b_cols;
      out[q * n + j] =
          Pair(col[p * g.b_rows], p + 1 < g.k ? col[(p + 1) * g.b_rows] : 0);
    }
  }
  return out;
}

// The epilogue of one vector of c: + bias, relu, + beta c, stored under
// mask in c's dtype.
MIXRT_AVX512_BF16 inline void Finish(__m512 v, __mmask16 mask,
                                     const float* bias, bool relu, float beta,
                                     MixrtDtype c_dtype, void* c) {
  if (bias != nullptr) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, bias));
  if (relu) {
    // Kept where v > 0 or v is NaN (not-less-or-equal, unordered true).
    v = _mm512_maskz_mov_ps(
        _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_NLE_UQ), v);
  }
  if (c_dtype == MIXRT_DTYPE_F32) {
    float* out = static_cast<float*>(c);
    if (beta != 0)
      v = _mm512_fmadd_ps(_mm512_set1_ps(beta),
                          _mm512_maskz_loadu_ps(mask, out), v);
    _mm512_mask_storeu_ps(out, mask, v);
    return;
  }
  uint16_t* out = static_cast<uint16_t*>(c);
  if (beta != 0) {
    const __m512 old = _mm512_castsi512_ps(_mm512_slli_epi32(
        _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mask, out)), 16));
    v = _mm512_fmadd_ps(_mm512_set1_ps(beta), old, v);
  }
  _mm256_mask_storeu_epi16(out, mask,
                           reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v)));
}

// Rows [i0, i0 + rows) x columns [j0, j0 + cols) of c, rows <= 8, cols <=
// 32 (more than 16 when kTwo). Sixteen named accumulators, as the f32
// tiles (small_gemm.cc) keep them; rows past `rows` repeat the last row
// and are not stored.
template <bool kTwo>
MIXRT_AVX512_BF16 void Tile(const SmallGemmBf16& g, const Pairs& x,
                            const float* bias, int64_t i0, int64_t rows,
                            int64_t j0, int64_t cols) {
  const __mmask16 m0 = Lanes(cols), m1 = Lanes(cols - 16);
  int64_t at[kTileRows];
  for (int r = 0; r < kTileRows; ++r)
    at[r] = std::min<int64_t>(r, rows - 1) * x.a_row;
  const int64_t o0 = at[0], o1 = at[1], o2 = at[2], o3 = at[3], o4 = at[4],
                o5 = at[5], o6 = at[6], o7 = at[7];
  const uint32_t* a = x.a + i0 * x.a_row;
  __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00,
         c21 = c00, c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00,
         c51 = c00, c60 = c00, c61 = c00, c70 = c00, c71 = c00;
  const uint32_t* row = x.b + j0;
  for (int64_t q = 0; q < x.pairs; ++q, a += x.a_pair, row += x.ldb) {
    const __m512bh b0 =
        reinterpret_cast<__m512bh>(_mm512_maskz_loadu_epi32(m0, row));
    const __m512bh b1 =
        kTwo
            ? reinterpret_cast<__m512bh>(_mm512_maskz_loadu_epi32(m1, row + 16))
            : b0;
#define MIXRT_SMALL_GEMM_BF16_ROW(r)                      \
  {                                                       \
    const __m512bh v = reinterpret_cast<__m512bh>(        \
        _mm512_set1_epi32(static_cast<int>(a[o##r])));    \
    c##r##0 = _mm512_dpbf16_ps(c##r##0, v, b0);           \
    if (kTwo) c##r##1 = _mm512_dpbf16_ps(c##r##1, v, b1); \
  }
    MIXRT_SMALL_GEMM_BF16_ROW(0)
    MIXRT_SMALL_GEMM_BF16_ROW(1)
    MIXRT_SMALL_GEMM_BF16_ROW(2)
    MIXRT_SMALL_GEMM_BF16_ROW(3)
    MIXRT_SMALL_GEMM_BF16_ROW(4)
    MIXRT_SMALL_GEMM_BF16_ROW(5)
    MIXRT_SMALL_GEMM_BF16_ROW(6)
    MIXRT_SMALL_GEMM_BF16_ROW(7)
#undef MIXRT_SMALL_GEMM_BF16_ROW
  }
  const __m512 first[kTileRows] = {c00, c10, c20, c30, c40, c50, c60, c70};
  const __m512 second[kTileRows] = {c01, c11, c21, c31, c41, c51, c61, c71};
  const int64_t size = g.c_dtype == MIXRT_DTYPE_F32 ? 4 : 2;
  for (int64_t r = 0; r < rows; ++r) {
    char* c = static_cast<char*>(g.c) + ((i0 + r) * g.ldc + j0) * size;
    Finish(first[r], m0, bias == nullptr ? nullptr : bias + j0, g.relu, g.beta,
           g.c_dtype, c);
    if (kTwo) {
      Finish(second[r], m1, bias == nullptr ? nullptr : bias + j0 + 16, g.relu,
             g.beta, g.c_dtype, c + 16 * size);
    }
  }
}

}  // namespace

bool SmallGemmBf16Applies(int64_t m, int64_t n, int64_t k) {
  static const bool usable = [] {
    const CpuInfo& cpu = GetCpuInfo();
    return OwnAvx512Bf16Usable() &&
           (absl::StrContains(cpu.onednn_isa, "bf16") ||
            absl::StrContains(cpu.onednn_isa, "amx"));
  }();
  return usable && m > 0 && n > 0 && k > 0 && m * n * k <= kSmallGemmWork;
}

void RunSmallGemmBf16(const SmallGemmBf16& g) {
  // Grown, never shrunk: at most kSmallGemmWork words each.
  thread_local std::vector<uint32_t> a_scratch, b_scratch;
  thread_local std::vector<float> bias;
  Pairs x;
  x.pairs = (g.k + 1) / 2;
  PackA(g, a_scratch, &x);
  x.b = PackB(g, b_scratch);
  x.ldb = g.n;
  const float* dense_bias = nullptr;
  if (g.bias != nullptr) {
    bias.resize(std::max<size_t>(bias.size(), g.n));
    for (int64_t j = 0; j < g.n; ++j) {
      const int64_t at = j * g.bias_stride;
      bias[j] =
          g.bias_dtype == MIXRT_DTYPE_F32
              ? static_cast<const float*>(g.bias)[at]
              : sdk::BF16BitsToF32(static_cast<const uint16_t*>(g.bias)[at]);
    }
    dense_bias = bias.data();
  }
  for (int64_t j0 = 0; j0 < g.n; j0 += kStrip) {
    const int64_t cols = std::min(kStrip, g.n - j0);
    for (int64_t i0 = 0; i0 < g.m; i0 += kTileRows) {
      const int64_t rows = std::min<int64_t>(kTileRows, g.m - i0);
      if (cols > 16) {
        Tile<true>(g, x, dense_bias, i0, rows, j0, cols);
      } else {
        Tile<false>(g, x, dense_bias, i0, rows, j0, cols);
      }
    }
  }
}

}  // namespace mixrt::cpu
