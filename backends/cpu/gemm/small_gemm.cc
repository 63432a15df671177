#include "backends/cpu/gemm/small_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "backends/cpu/capability/cpu_info.h"
#include "backends/cpu/gemm/tile_packing.h"

namespace mixrt::cpu {
namespace {

constexpr int kTileRows = 8;    // 8 x 2 accumulators: 16 of 32 registers.
constexpr int64_t kStrip = 32;  // Columns per tile: two vectors.

// b as a row-major [k, n] f32 block in out (row stride n).
void PackRows(const SmallGemm& g, float* out) {
  const int64_t n = g.n, k = g.k;
  if (g.b_rows == 1) {  // Rows of b^T are contiguous: 8 x 8 transposes.
    TransposePanel(g.b, g.b_cols, n, k, out, n);
    return;
  }
  for (int64_t p = 0; p < k; ++p) {
    for (int64_t j = 0; j < n; ++j)
      out[p * n + j] = g.b[p * g.b_rows + j * g.b_cols];
  }
}

// The epilogue of one vector of c: + bias, relu, + beta c, stored under
// mask.
MIXRT_AVX512 inline void Finish(__m512 v, __mmask16 mask, const float* bias,
                                bool relu, float beta, float* c) {
  if (bias != nullptr) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, bias));
  if (relu) {
    // Kept where v > 0 or v is NaN (not-less-or-equal, unordered true).
    v = _mm512_maskz_mov_ps(
        _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_NLE_UQ), v);
  }
  if (beta != 0) {
    v = _mm512_fmadd_ps(_mm512_set1_ps(beta), _mm512_maskz_loadu_ps(mask, c),
                        v);
  }
  _mm512_mask_storeu_ps(c, mask, v);
}

// Rows [i0, i0 + rows) x columns [j0, j0 + cols) of c, rows <= 8, cols <=
// 32 (more than 16 when kTwo). b is row-major [k, n] with row stride ldb;
// bias (dense, already loaded) or null. Sixteen named accumulators: GCC 12
// kept an array of them on the stack, storing every one on every step of
// the reduction (a third of the speed). Rows past `rows` repeat the last
// row and are not stored.
template <bool kTwo>
MIXRT_AVX512 void Tile(const SmallGemm& g, const float* b, int64_t ldb,
                       const float* bias, int64_t i0, int64_t rows, int64_t j0,
                       int64_t cols) {
  const __mmask16 m0 = Lanes(cols), m1 = Lanes(cols - 16);
  const int64_t k = g.k, a_cols = g.a_cols;
  int64_t at[kTileRows];
  for (int r = 0; r < kTileRows; ++r) {
    at[r] = std::min<int64_t>(r, rows - 1) * g.a_rows;
  }
  const int64_t o0 = at[0], o1 = at[1], o2 = at[2], o3 = at[3], o4 = at[4],
                o5 = at[5], o6 = at[6], o7 = at[7];
  __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00,
         c21 = c00, c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00,
         c51 = c00, c60 = c00, c61 = c00, c70 = c00, c71 = c00;
  const float* a = g.a + i0 * g.a_rows;
  const float* row = b + j0;
  for (int64_t p = 0; p < k; ++p, a += a_cols, row += ldb) {
    const __m512 b0 = _mm512_maskz_loadu_ps(m0, row);
    const __m512 b1 = kTwo ? _mm512_maskz_loadu_ps(m1, row + 16) : b0;
#define MIXRT_SMALL_GEMM_ROW(r)                          \
  {                                                      \
    const __m512 x = _mm512_set1_ps(a[o##r]);            \
    c##r##0 = _mm512_fmadd_ps(x, b0, c##r##0);           \
    if (kTwo) c##r##1 = _mm512_fmadd_ps(x, b1, c##r##1); \
  }
    MIXRT_SMALL_GEMM_ROW(0)
    MIXRT_SMALL_GEMM_ROW(1)
    MIXRT_SMALL_GEMM_ROW(2)
    MIXRT_SMALL_GEMM_ROW(3)
    MIXRT_SMALL_GEMM_ROW(4)
    MIXRT_SMALL_GEMM_ROW(5)
    MIXRT_SMALL_GEMM_ROW(6)
    MIXRT_SMALL_GEMM_ROW(7)
#undef MIXRT_SMALL_GEMM_ROW
  }
  const __m512 first[kTileRows] = {c00, c10, c20, c30, c40, c50, c60, c70};
  const __m512 second[kTileRows] = {c01, c11, c21, c31, c41, c51, c61, c71};
  for (int64_t r = 0; r < rows; ++r) {
    float* c = g.c + (i0 + r) * g.ldc + j0;
    Finish(first[r], m0, bias == nullptr ? nullptr : bias + j0, g.relu, g.beta,
           c);
    if (kTwo) {
      Finish(second[r], m1, bias == nullptr ? nullptr : bias + j0 + 16, g.relu,
             g.beta, c + 16);
    }
  }
}

template <bool kTwo>
MIXRT_AVX512 void Strip(const SmallGemm& g, const float* b, int64_t ldb,
                        const float* bias, int64_t j0, int64_t cols) {
  for (int64_t i = 0; i < g.m; i += kTileRows) {
    Tile<kTwo>(g, b, ldb, bias, i, std::min<int64_t>(kTileRows, g.m - i), j0,
               cols);
  }
}

// ---- AVX2 (8 lanes): 6 x 16 tiles ----

constexpr int kTileRowsAvx2 = 6;    // 6 x 2 accumulators: 12 of 16.
constexpr int64_t kStripAvx2 = 16;  // Columns per tile: two vectors.

// Lanes [0, n) of 8 (n may be below 0 or above 8), for masked moves.
inline __m256i FirstLanes(int64_t n) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(
      _mm256_set1_epi32(static_cast<int>(std::clamp<int64_t>(n, 0, 8))), lane);
}

// Finish's AVX2 form: + bias, relu, + beta c, stored under mask, or whole
// when kFull (a masked store is microcoded on AMD's cores: it took a fifth
// of a small MLP's products until full tiles stopped using it).
template <bool kFull>
inline void FinishAvx2(__m256 v, __m256i mask, const float* bias, bool relu,
                       float beta, float* c) {
  auto load = [&](const float* p) {
    return kFull ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, mask);
  };
  if (bias != nullptr) v = _mm256_add_ps(v, load(bias));
  if (relu) {
    // Kept where v > 0 or v is NaN (not-less-or-equal, unordered true).
    v = _mm256_and_ps(_mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_NLE_UQ), v);
  }
  if (beta != 0) v = _mm256_fmadd_ps(_mm256_set1_ps(beta), load(c), v);
  if (kFull) {
    _mm256_storeu_ps(c, v);
  } else {
    _mm256_maskstore_ps(c, mask, v);
  }
}

// Tile's AVX2 form: rows [i0, i0 + rows) x columns [j0, j0 + cols) of c,
// rows <= 6, cols <= 16 (whole registers of b when kFull: cols == 16).
// Twelve named accumulators, for the reason Tile gives.
template <bool kFull>
void TileAvx2(const SmallGemm& g, const float* b, int64_t ldb,
              const float* bias, int64_t i0, int64_t rows, int64_t j0,
              int64_t cols) {
  const __m256i m0 = FirstLanes(cols), m1 = FirstLanes(cols - 8);
  const int64_t k = g.k, a_cols = g.a_cols;
  int64_t at[kTileRowsAvx2];
  for (int r = 0; r < kTileRowsAvx2; ++r) {
    at[r] = std::min<int64_t>(r, rows - 1) * g.a_rows;
  }
  const int64_t o0 = at[0], o1 = at[1], o2 = at[2], o3 = at[3], o4 = at[4],
                o5 = at[5];
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00,
         c21 = c00, c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00,
         c51 = c00;
  const float* a = g.a + i0 * g.a_rows;
  const float* row = b + j0;
  for (int64_t p = 0; p < k; ++p, a += a_cols, row += ldb) {
    const __m256 b0 =
        kFull ? _mm256_loadu_ps(row) : _mm256_maskload_ps(row, m0);
    const __m256 b1 =
        kFull ? _mm256_loadu_ps(row + 8) : _mm256_maskload_ps(row + 8, m1);
#define MIXRT_SMALL_GEMM_ROW(r)                     \
  {                                                 \
    const __m256 x = _mm256_broadcast_ss(a + o##r); \
    c##r##0 = _mm256_fmadd_ps(x, b0, c##r##0);      \
    c##r##1 = _mm256_fmadd_ps(x, b1, c##r##1);      \
  }
    MIXRT_SMALL_GEMM_ROW(0)
    MIXRT_SMALL_GEMM_ROW(1)
    MIXRT_SMALL_GEMM_ROW(2)
    MIXRT_SMALL_GEMM_ROW(3)
    MIXRT_SMALL_GEMM_ROW(4)
    MIXRT_SMALL_GEMM_ROW(5)
#undef MIXRT_SMALL_GEMM_ROW
  }
  const __m256 first[kTileRowsAvx2] = {c00, c10, c20, c30, c40, c50};
  const __m256 second[kTileRowsAvx2] = {c01, c11, c21, c31, c41, c51};
  for (int64_t r = 0; r < rows; ++r) {
    float* c = g.c + (i0 + r) * g.ldc + j0;
    FinishAvx2<kFull>(first[r], m0, bias == nullptr ? nullptr : bias + j0,
                      g.relu, g.beta, c);
    if (cols > 8) {
      FinishAvx2<kFull>(second[r], m1,
                        bias == nullptr ? nullptr : bias + j0 + 8, g.relu,
                        g.beta, c + 8);
    }
  }
}

template <bool kFull>
void StripAvx2(const SmallGemm& g, const float* b, int64_t ldb,
               const float* bias, int64_t j0, int64_t cols) {
  for (int64_t i = 0; i < g.m; i += kTileRowsAvx2) {
    TileAvx2<kFull>(g, b, ldb, bias, i,
                    std::min<int64_t>(kTileRowsAvx2, g.m - i), j0, cols);
  }
}

}  // namespace

bool SmallGemmApplies(int64_t m, int64_t n, int64_t k) {
  // AVX2 with FMA is the plugin's build baseline: its tiles run anywhere
  // the plugin loads.
  return m > 0 && n > 0 && k > 0 && m * n * k <= kSmallGemmWork;
}

void RunSmallGemm(const SmallGemm& g) {
  // Grown, never shrunk: at most kSmallGemmWork floats each.
  thread_local std::vector<float> packed, bias;
  const float* b = g.b;
  int64_t ldb = g.b_rows;
  if (g.b_cols != 1) {
    packed.resize(std::max<size_t>(packed.size(), g.k * g.n));
    PackRows(g, packed.data());
    b = packed.data();
    ldb = g.n;
  }
  const float* dense_bias = nullptr;
  if (g.bias != nullptr) {
    bias.resize(std::max<size_t>(bias.size(), g.n));
    for (int64_t j = 0; j < g.n; ++j) bias[j] = g.bias[j * g.bias_stride];
    dense_bias = bias.data();
  }
  if (!OwnAvx512Usable()) {
    for (int64_t j0 = 0; j0 < g.n; j0 += kStripAvx2) {
      const int64_t cols = std::min(kStripAvx2, g.n - j0);
      if (cols == kStripAvx2) {
        StripAvx2<true>(g, b, ldb, dense_bias, j0, cols);
      } else {
        StripAvx2<false>(g, b, ldb, dense_bias, j0, cols);
      }
    }
    return;
  }
  for (int64_t j0 = 0; j0 < g.n; j0 += kStrip) {
    const int64_t cols = std::min(kStrip, g.n - j0);
    if (cols > 16) {
      Strip<true>(g, b, ldb, dense_bias, j0, cols);
    } else {
      Strip<false>(g, b, ldb, dense_bias, j0, cols);
    }
  }
}

}  // namespace mixrt::cpu
