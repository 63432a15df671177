#include "backends/cpu/gemm/f32_tiles.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backends/cpu/capability/cpu_info.h"

namespace mixrt::cpu {
namespace {

constexpr int64_t kPanel = 32;  // Keys per panel: two vectors of f32.

// Rows of the scores tile: 12 x 2 accumulators, two panel loads and twelve
// broadcasts per step of the reduction.
constexpr int kScoreRows = 12;
// Rows of the transposed product's tile: 6 x 4 accumulators (64 columns).
constexpr int kTransposedRows = 6;

// One R-row strip of c = a x panel^T over a whole 32-key panel; columns
// past `cols` (at most 32) are not stored.
template <int R>
MIXRT_AVX512 void PanelTile(const float* a, int64_t depth, int64_t lda,
                            const float* panel, int64_t cols, float* c,
                            int64_t ldc) {
  __m512 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (int64_t k = 0; k < depth; ++k) {
    const __m512 b0 = _mm512_loadu_ps(panel + k * kPanel);
    const __m512 b1 = _mm512_loadu_ps(panel + k * kPanel + 16);
    for (int r = 0; r < R; ++r) {
      const __m512 x = _mm512_set1_ps(a[r * lda + k]);
      acc[r][0] = _mm512_fmadd_ps(x, b0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(x, b1, acc[r][1]);
    }
  }
  const __mmask16 m0 = cols >= 16 ? 0xffff : (1u << cols) - 1;
  const __mmask16 m1 = cols >= 32   ? 0xffff
                       : cols <= 16 ? 0
                                    : (1u << (cols - 16)) - 1;
  for (int r = 0; r < R; ++r) {
    _mm512_mask_storeu_ps(c + r * ldc, m0, acc[r][0]);
    _mm512_mask_storeu_ps(c + r * ldc + 16, m1, acc[r][1]);
  }
}

// Rows [0, rows) of c against one panel: 12-row tiles, then the rest.
MIXRT_AVX512 void PanelColumn(const float* a, int64_t rows, int64_t depth,
                              int64_t lda, const float* panel, int64_t cols,
                              float* c, int64_t ldc) {
  int64_t i = 0;
  for (; i + kScoreRows <= rows; i += kScoreRows) {
    PanelTile<kScoreRows>(a + i * lda, depth, lda, panel, cols, c + i * ldc,
                          ldc);
  }
  const float* at = a + i * lda;
  float* ct = c + i * ldc;
  switch (rows - i) {
    case 11:
      PanelTile<11>(at, depth, lda, panel, cols, ct, ldc);
      break;
    case 10:
      PanelTile<10>(at, depth, lda, panel, cols, ct, ldc);
      break;
    case 9:
      PanelTile<9>(at, depth, lda, panel, cols, ct, ldc);
      break;
    case 8:
      PanelTile<8>(at, depth, lda, panel, cols, ct, ldc);
      break;
    case 7:
      PanelTile<7>(at, depth, lda, panel, cols, ct, ldc);
      break;
    case 6:
      PanelTile<6>(at, depth, lda, panel, cols, ct, ldc);
      break;
    case 5:
      PanelTile<5>(at, depth, lda, panel, cols, ct, ldc);
      break;
    case 4:
      PanelTile<4>(at, depth, lda, panel, cols, ct, ldc);
      break;
    case 3:
      PanelTile<3>(at, depth, lda, panel, cols, ct, ldc);
      break;
    case 2:
      PanelTile<2>(at, depth, lda, panel, cols, ct, ldc);
      break;
    case 1:
      PanelTile<1>(at, depth, lda, panel, cols, ct, ldc);
      break;
    default:
      break;
  }
}

// One R-row strip of c += a^T b over V vectors of columns.
template <int R, int V>
MIXRT_AVX512 void TransposedTile(const float* a, int64_t depth, int64_t lda,
                                 const float* b, int64_t ldb, float* c,
                                 int64_t ldc) {
  __m512 acc[R][V];
  for (int r = 0; r < R; ++r) {
    for (int v = 0; v < V; ++v)
      acc[r][v] = _mm512_loadu_ps(c + r * ldc + 16 * v);
  }
  for (int64_t k = 0; k < depth; ++k) {
    __m512 x[V];
    for (int v = 0; v < V; ++v) x[v] = _mm512_loadu_ps(b + k * ldb + 16 * v);
    for (int r = 0; r < R; ++r) {
      const __m512 y = _mm512_set1_ps(a[k * lda + r]);
      for (int v = 0; v < V; ++v)
        acc[r][v] = _mm512_fmadd_ps(y, x[v], acc[r][v]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int v = 0; v < V; ++v)
      _mm512_storeu_ps(c + r * ldc + 16 * v, acc[r][v]);
  }
}

template <int V>
void TransposedColumns(const float* a, int64_t m, int64_t depth, int64_t lda,
                       const float* b, int64_t ldb, float* c, int64_t ldc) {
  int64_t i = 0;
  for (; i + kTransposedRows <= m; i += kTransposedRows) {
    TransposedTile<kTransposedRows, V>(a + i, depth, lda, b, ldb, c + i * ldc,
                                       ldc);
  }
  const float* at = a + i;
  float* ct = c + i * ldc;
  switch (m - i) {
    case 5:
      TransposedTile<5, V>(at, depth, lda, b, ldb, ct, ldc);
      break;
    case 4:
      TransposedTile<4, V>(at, depth, lda, b, ldb, ct, ldc);
      break;
    case 3:
      TransposedTile<3, V>(at, depth, lda, b, ldb, ct, ldc);
      break;
    case 2:
      TransposedTile<2, V>(at, depth, lda, b, ldb, ct, ldc);
      break;
    case 1:
      TransposedTile<1, V>(at, depth, lda, b, ldb, ct, ldc);
      break;
    default:
      break;
  }
}

}  // namespace

bool F32TilesUsable() { return OwnAvx512Usable(); }

int64_t F32PanelKeys(int64_t keys) {
  return (keys + kPanel - 1) / kPanel * kPanel;
}

void F32PackPanels(const float* m, int64_t keys, int64_t depth, int64_t ld,
                   float* out) {
  for (int64_t j0 = 0; j0 < keys; j0 += kPanel) {
    float* panel = out + j0 * depth;
    const int64_t n = std::min(kPanel, keys - j0);
    for (int64_t k = 0; k < depth; ++k) {
      float* row = panel + k * kPanel;
      for (int64_t j = 0; j < n; ++j) row[j] = m[(j0 + j) * ld + k];
      std::fill(row + n, row + kPanel, 0.0f);
    }
  }
}

void F32TimesPanels(const float* a, int64_t rows, int64_t depth, int64_t lda,
                    const float* panels, int64_t cols, float* c, int64_t ldc) {
  // Panel by panel: a panel (8 KiB at depth 64) stays in L1 while the rows
  // of a stream past it.
  for (int64_t j = 0; j < cols; j += kPanel) {
    PanelColumn(a, rows, depth, lda, panels + j * depth,
                std::min(kPanel, cols - j), c + j, ldc);
  }
}

void F32AccumulateTransposedTimes(const float* a, int64_t m, int64_t depth,
                                  int64_t lda, const float* b, int64_t n,
                                  int64_t ldb, float* c, int64_t ldc) {
  int64_t j = 0;
  for (; j + 64 <= n; j += 64)
    TransposedColumns<4>(a, m, depth, lda, b + j, ldb, c + j, ldc);
  switch ((n - j) / 16) {
    case 3:
      TransposedColumns<3>(a, m, depth, lda, b + j, ldb, c + j, ldc);
      break;
    case 2:
      TransposedColumns<2>(a, m, depth, lda, b + j, ldb, c + j, ldc);
      break;
    case 1:
      TransposedColumns<1>(a, m, depth, lda, b + j, ldb, c + j, ldc);
      break;
    default:
      break;
  }
}

}  // namespace mixrt::cpu
