// Fused scaled dot-product attention, blocked "flash" style: per (group,
// block of 128 query rows) the scores against each chunk of 512 visible
// keys are formed in f32 (O(rows x chunk) scratch per thread, never the
// L x S matrix), exponentiated against a running row maximum (an online
// softmax: earlier chunks' sums and outputs are rescaled when the maximum
// grows), and multiplied into V. The block GEMMs run on oneDNN in the
// inputs' dtype (bf16 on avx512_bf16) with f32 accumulation; a dtype oneDNN
// has no fast matmul for (f16 on most CPUs) runs through f32 copies of the
// operands. The bf16 forward without dropout runs its GEMMs on AMX tiles
// where the CPU has them (amx_tiles.h: K and V packed once per group).
// Backward recomputes the weights from the saved log-normalizers,
// one group per task, so dK and dV accumulate without atomics.
#include "backends/cpu/kernels/cpu_attention.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "backends/cpu/gemm/amx_tiles.h"
#include "backends/cpu/gemm/f32_tiles.h"
#include "backends/cpu/kernels/attention_rows.h"
#include "backends/cpu/kernels/cpu_matmul.h"
#include "backends/cpu/kernels/float_rows.h"
#include "backends/cpu/kernels/operand_copies.h"
#include "backends/cpu/kernels/parallel.h"
#include "backends/cpu/kernels/philox_rows.h"
#include "backends/cpu/kernels/softmax_rows.h"
#include "backends/cpu/onednn/onednn_compat.h"
#include "backends/cpu/onednn/onednn_context.h"
#include "backends/cpu/onednn/prepared_matmul.h"
#include "mixrt/float_convert.h"
#include "mixrt/status_macros.h"
#include "plugins/sdk/attention_math.h"

namespace mixrt::cpu {
namespace {

using sdk::AttentionCall;
using sdk::TensorRef;

// Query rows per block and keys per chunk: the f32 score block (rows x
// chunk, 256 KiB) and its weights stay in L2 between the GEMM that writes
// them and the exponentials and GEMM that read them (at seq 2048 bf16,
// 128 x S blocks ran 35% faster than 512 x S and 128-row blocks skip more
// of a causal mask's hidden keys).
constexpr int64_t kRows = 128;
constexpr int64_t kKeyChunk = 512;
constexpr int64_t kKeyStep = 128;  // Causal key extents round up to this
                                   // (fewer distinct GEMM shapes to create).

// A matrix operand: element (r, c) at data + r * row_stride + c * col_stride
// (in elements of dtype).
struct Operand {
  const void* data;
  MixrtDtype dtype;
  int64_t rows, cols, row_stride, col_stride;
};

// c (f32, rows a.rows, cols b.cols, row stride ldc) = a x b, or += with
// `accumulate`.
void Gemm(const Operand& a, const Operand& b, float* c, int64_t ldc,
          bool accumulate) {
  MatmulShape s;
  s.a = {a.dtype, {a.rows, a.cols}, {a.row_stride, a.col_stride}};
  s.b = {b.dtype, {b.rows, b.cols}, {b.row_stride, b.col_stride}};
  s.c = {MIXRT_DTYPE_F32, {a.rows, b.cols}, {ldc, 1}};
  for (MatmulOperand* m : {&s.a, &s.b, &s.c}) {
    NormalizeUnitStrides(m->dims, &m->strides);
  }
  s.sum_beta = accumulate ? 1.0f : 0.0f;
  RunPreparedMatmul(s, a.data, b.data, c);
}

// The dtype the block GEMMs run in: the inputs' when oneDNN multiplies it
// natively (not its reference implementation), else f32.
MixrtDtype GemmDtype(MixrtDtype dtype) {
  if (dtype == MIXRT_DTYPE_F32) return dtype;
  static const bool bf16 =
      OneDnnHasMatmul(MIXRT_DTYPE_BF16) &&
      !absl::StartsWith(OneDnnMatmulImplementation(MIXRT_DTYPE_BF16), "ref");
  static const bool f16 =
      OneDnnHasMatmul(MIXRT_DTYPE_F16) &&
      !absl::StartsWith(OneDnnMatmulImplementation(MIXRT_DTYPE_F16), "ref");
  const bool fast = dtype == MIXRT_DTYPE_BF16 ? bf16 : f16;
  return fast ? dtype : MIXRT_DTYPE_F32;
}

size_t Bytes(MixrtDtype d) { return d == MIXRT_DTYPE_F32 ? 4 : 2; }

// A contiguous [G, R, C] tensor's rows.
GroupRows DenseRows(const TensorRef& t) {
  return GroupRows::Dense(t.data(), t.dtype(), t.dim(1), t.dim(2));
}

// Rows [r0, r0 + rows) of group g of `t` (cols elements each) in `dtype`
// and the distance between them: `t`'s own memory when the dtypes agree
// (unless oneDNN's AVX2 gemm reads f32 rows that far apart slowly:
// operand_copies.h), else f32 copies in `scratch`, back to back.
struct RowsIn {
  const void* data;
  int64_t ld;
};
RowsIn RowsInDtype(const GroupRows& t, int64_t g, int64_t r0, int64_t rows,
                   int64_t cols, MixrtDtype dtype,
                   std::vector<float>* scratch) {
  const int64_t at = t.Offset(g, r0);
  if (t.dtype == dtype &&
      !(dtype == MIXRT_DTYPE_F32 && F32RowsAliasOnAvx2(t.row_stride, cols))) {
    return {static_cast<const char*>(t.data) + at * Bytes(dtype), t.row_stride};
  }
  scratch->resize(rows * cols);
  for (int64_t i = 0; i < rows; ++i) {
    LoadRow(t.data, t.dtype, at + i * t.row_stride, cols,
            scratch->data() + i * cols);
  }
  return {scratch->data(), cols};
}

// A bf16 group's rows back to back, for the tiles' packing: in place when
// they are, else copied into `scratch`.
const uint16_t* PackedBf16Rows(const GroupRows& t, int64_t g, int64_t rows,
                               int64_t cols, std::vector<uint16_t>* scratch) {
  const auto* base = static_cast<const uint16_t*>(t.data);
  if (t.Packed(cols)) return base + t.Offset(g, 0);
  scratch->resize(rows * cols);
  for (int64_t i = 0; i < rows; ++i) {
    std::memcpy(scratch->data() + i * cols, base + t.Offset(g, i),
                cols * sizeof(uint16_t));
  }
  return scratch->data();
}

// Rows [r0, r0 + rows) of group g of `t` = src (f32, back to back),
// rounded once.
void StoreRows(const float* src, int64_t rows, int64_t cols, const GroupRows& t,
               int64_t g, int64_t r0) {
  if (t.Packed(cols)) {
    StoreRow(src, rows * cols, t.data, t.dtype, t.Offset(g, r0));
    return;
  }
  for (int64_t i = 0; i < rows; ++i) {
    StoreRow(src + i * cols, cols, t.data, t.dtype, t.Offset(g, r0 + i));
  }
}

// The visible key extent of the query block [r0, r0 + rows).
int64_t KeyExtent(const AttentionCall& a, int64_t r0, int64_t rows) {
  if (!a.attrs->is_causal) return a.keys;
  const int64_t needed = std::min(a.keys, r0 + rows);
  return std::min(a.keys, (needed + kKeyStep - 1) / kKeyStep * kKeyStep);
}

// scores[i][j] * scale + bias (causal and mask), row by row (row stride
// lds), for the keys [j0, j0 + cols) of the query rows [r0, r0 + rows).
void ScaleAndMask(const AttentionCall& a, int64_t g, int64_t r0, int64_t rows,
                  int64_t j0, int64_t cols, int64_t lds, float* scores) {
  const float scale = static_cast<float>(a.attrs->scale);
  for (int64_t i = 0; i < rows; ++i) {
    float* s = scores + i * lds;
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) s[j] *= scale;
    if (a.mask != nullptr) {
      for (int64_t j = 0; j < cols; ++j) {
        s[j] += static_cast<float>(sdk::AttentionBias(a, g, r0 + i, j0 + j));
      }
    } else if (a.attrs->is_causal) {
      // Added, not assigned: a NaN or +inf score stays NaN, as in the
      // definition (scores + bias) the reference computes.
      for (int64_t j = std::max<int64_t>(0, r0 + i + 1 - j0); j < cols; ++j) {
        s[j] += -INFINITY;
      }
    }
  }
}

struct Scratch {
  std::vector<float> scores, weights_f32, acc, kbuf, vbuf, qbuf;
  std::vector<uint16_t> qpad;  // A query block's rows padded for the tiles.
  std::vector<uint16_t> kpad, vpad;  // A group's strided rows, packed.
  std::vector<float> row_max;        // The tiles' row maxima of a chunk.
  std::vector<float> dropout;        // Factors of the row or chunk at hand.
  std::vector<uint16_t> weights_low;
};

// sdk::AttentionDropoutRow's factors for (g, i, j0 .. j0 + n), vectorized.
void AttentionDropout(const AttentionCall& a, int64_t g, int64_t i, int64_t j0,
                      int64_t n, float* factors) {
  DropoutFactorsRow(a.attrs->seed, a.attrs->offset,
                    static_cast<uint64_t>((g * a.queries + i) * a.keys + j0), n,
                    a.attrs->dropout_p, factors);
}

// Weights of the keys [j0, j0 + cols) in the GEMM dtype, multiplied by the
// chunk's dropout factors when there are any, for the next GEMM.
const void* WeightsForGemm(MixrtDtype gemm, int64_t rows, int64_t cols,
                           const float* p, const float* dropout, Scratch* s) {
  const int64_t n = rows * cols;
  const float* src = p;
  if (dropout != nullptr) {
    s->weights_f32.resize(n);
    for (int64_t i = 0; i < n; ++i) s->weights_f32[i] = p[i] * dropout[i];
    src = s->weights_f32.data();
  }
  if (gemm == MIXRT_DTYPE_F32) return src;
  s->weights_low.resize(n);
  StoreRow(src, n, s->weights_low.data(), gemm, 0);
  return s->weights_low.data();
}

// The largest magnitude of `rows` rows of `cols` elements, `stride` apart
// from element `at`, on the raw bits (inf or NaN when it reaches the
// all-ones exponent): a max over one register's lanes carried across the
// rows and reduced once at the end. A flag OR-ed per element stayed scalar
// (6% of a causal forward); a max reduced per row took 2% of a compiled
// transformer block, whose heads are rows of 64 read in place.
template <typename Bits>
Bits LargestMagnitude(const void* data, int64_t at, int64_t rows, int64_t cols,
                      int64_t stride, Bits magnitude) {
  static_assert(sizeof(Bits) == 2 || sizeof(Bits) == 4);
  constexpr int64_t kLanes = 32 / sizeof(Bits);
  const Bits* b = static_cast<const Bits*>(data) + at;
  const __m256i mask = sizeof(Bits) == 2
                           ? _mm256_set1_epi16(static_cast<int16_t>(magnitude))
                           : _mm256_set1_epi32(static_cast<int32_t>(magnitude));
  __m256i lanes = _mm256_setzero_si256();
  Bits largest = 0;
  const int64_t body = cols / kLanes * kLanes;
  for (int64_t r = 0; r < rows; ++r) {
    const Bits* row = b + r * stride;
    for (int64_t i = 0; i < body; i += kLanes) {
      const __m256i v = _mm256_and_si256(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + i)), mask);
      lanes = sizeof(Bits) == 2 ? _mm256_max_epu16(lanes, v)
                                : _mm256_max_epu32(lanes, v);
    }
    for (int64_t i = body; i < cols; ++i) {
      largest = std::max<Bits>(largest, row[i] & magnitude);
    }
  }
  Bits each[kLanes];
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(each), lanes);
  for (Bits x : each) largest = std::max(largest, x);
  return largest;
}

// Whether rows [r0, r0 + rows) of group g of `t` hold inf or NaN.
bool AnyNonFinite(const GroupRows& t, int64_t g, int64_t r0, int64_t rows,
                  int64_t cols) {
  const int64_t at = t.Offset(g, r0);
  // Rows back to back are one long row.
  const int64_t n = t.Packed(cols) ? 1 : rows,
                m = t.Packed(cols) ? rows * cols : cols;
  switch (t.dtype) {
    case MIXRT_DTYPE_F32:
      return LargestMagnitude<uint32_t>(t.data, at, n, m, t.row_stride,
                                        0x7fffffffu) >= 0x7f800000u;
    case MIXRT_DTYPE_BF16:
      return LargestMagnitude<uint16_t>(t.data, at, n, m, t.row_stride,
                                        0x7fff) >= 0x7f80;
    default:  // f16
      return LargestMagnitude<uint16_t>(t.data, at, n, m, t.row_stride,
                                        0x7fff) >= 0x7c00;
  }
}

// Row statistics of the online softmax over key chunks: the running
// maximum (of the scores as exponentiated: unscaled when the scale is
// folded into the exponent) and the running sum of exp((x - max) * mult).
struct RowStats {
  float max = -INFINITY;
  float total = 0;
};

void Forward(const AttentionCall& a, const AttentionForwardRows& at) {
  const SoftmaxRowKernels& rows_k = SoftmaxRows();
  const MixrtDtype dt = at.q.dtype, gemm = GemmDtype(dt);
  const int64_t e = a.head_dim, ev = a.value_dim;
  const int64_t blocks = (a.queries + kRows - 1) / kRows;
  // The scale folds into the exponent (exp((x - max) * scale)) unless a
  // mask or a non-positive scale needs the scaled scores themselves.
  const float scale = static_cast<float>(a.attrs->scale);
  const bool foldable = a.mask == nullptr && scale > 0;
  const bool dropout = a.attrs->dropout_p > 0;
  // A causal row's hidden keys still count when their score is NaN or +inf
  // (the definition adds -inf to it: NaN; the GradScaler must see that
  // overflow). Skipping them is exact only when they are finite, which the
  // raw bits of q and k tell: per group, the last key holding inf or NaN.
  std::vector<int64_t> last_bad_key(a.groups, -1);
  if (a.attrs->is_causal) {
    ParallelFor(a.groups, 1, [&](int64_t begin, int64_t end) {
      for (int64_t g = begin; g < end; ++g) {
        if (!AnyNonFinite(at.k, g, 0, a.keys, e)) continue;
        for (int64_t j = a.keys - 1; j >= 0; --j) {
          if (AnyNonFinite(at.k, g, j, 1, e)) {
            last_bad_key[g] = j;
            break;
          }
        }
      }
    });
  }
  // Weights go straight to bf16 from the exp; f16 (a oneDNN 3 build has f16
  // matmul) and dropout take the f32 row first.
  const bool low = gemm == MIXRT_DTYPE_BF16 && !dropout;
  // The tiles take bf16 widths in 32s; rows and keys pad to 32.
  const bool amx = low && e % 32 == 0 && ev % 32 == 0 && AmxTilesUsable();
  // f32 scores from keys packed per group (f32_tiles.h).
  const bool f32_tiles = gemm == MIXRT_DTYPE_F32 && F32TilesUsable();
  // Tasks go to whichever thread is free next, a group's blocks together
  // (keys and values are packed once per group), in smaller chunks where
  // there are too few groups to share: a thread that fell behind (another
  // process on its core) no longer holds the other at the join; seq 256
  // non-causal f32 went from 11.8 to 10.3 ms on a quiet Zen 3 VM and kept
  // 10-12 ms where the static split drifted to 16.
  const int64_t tasks = a.groups * blocks;
  const int64_t chunk = std::max<int64_t>(
      1, std::min<int64_t>(blocks, tasks / (4 * omp_get_max_threads())));
  ParallelForChunks(tasks, chunk, [&](int64_t begin, int64_t end) {
    Scratch s;
    std::vector<RowStats> stats;
    // This thread's tasks are consecutive blocks, mostly of one group: its
    // keys and values are packed once per group.
    std::vector<uint16_t> packed_k, packed_v;
    std::vector<float> panels_k;
    int64_t packed_group = -1;
    for (int64_t task = begin; task < end; ++task) {
      const int64_t g = task / blocks, r0 = (task % blocks) * kRows;
      const int64_t rows = std::min(kRows, a.queries - r0);
      const bool skip_hidden = a.attrs->is_causal && last_bad_key[g] <= r0 &&
                               !AnyNonFinite(at.q, g, r0, rows, e);
      const int64_t extent =
          skip_hidden || !a.attrs->is_causal ? KeyExtent(a, r0, rows) : a.keys;
      // Scores masked in place when not folded (a mask, a non-positive
      // scale, a causal block with non-finite inputs).
      const bool folded = foldable && (skip_hidden || !a.attrs->is_causal);
      const float mult = folded ? scale : 1.0f;
      const RowsIn q_rows = RowsInDtype(at.q, g, r0, rows, e, gemm, &s.qbuf);
      const void* q = q_rows.data;
      int64_t ldq = q_rows.ld;
      RowsIn k{nullptr, e}, v{nullptr, ev};
      // Rows as the GEMMs see them (the tiles' multiple of 32).
      const int64_t rows_p = amx ? (rows + 31) / 32 * 32 : rows;
      if (amx) {
        if (packed_group != g) {
          const uint16_t* kg = PackedBf16Rows(at.k, g, a.keys, e, &s.kpad);
          const uint16_t* vg = PackedBf16Rows(at.v, g, a.keys, ev, &s.vpad);
          packed_k.resize(AmxPaddedKeys(a.keys) * e);
          packed_v.resize(AmxPaddedKeys(a.keys) * ev);
          AmxPackKeys(kg, a.keys, e, packed_k.data());
          AmxPackValues(vg, a.keys, ev, packed_v.data());
          packed_group = g;
        }
        // The tiles read q's rows back to back, padded to their 32s.
        if (rows_p != rows || ldq != e) {
          s.qpad.assign(rows_p * e, 0);
          for (int64_t i = 0; i < rows; ++i) {
            std::memcpy(s.qpad.data() + i * e,
                        static_cast<const uint16_t*>(q) + i * ldq,
                        e * sizeof(uint16_t));
          }
          q = s.qpad.data();
          ldq = e;
        }
      } else {
        if (f32_tiles && packed_group != g) {
          panels_k.resize(F32PanelKeys(a.keys) * e);
          const RowsIn all = RowsInDtype(at.k, g, 0, a.keys, e, gemm, &s.kbuf);
          F32PackPanels(static_cast<const float*>(all.data), a.keys, e, all.ld,
                        panels_k.data());
          packed_group = g;
        }
        if (!f32_tiles) k = RowsInDtype(at.k, g, 0, extent, e, gemm, &s.kbuf);
        v = RowsInDtype(at.v, g, 0, extent, ev, gemm, &s.vbuf);
      }
      stats.assign(rows, RowStats{});
      s.acc.assign(rows_p * ev, 0.0f);
      for (int64_t j0 = 0; j0 < extent; j0 += kKeyChunk) {
        const int64_t cols = std::min(kKeyChunk, extent - j0);
        // The scores' and weights' row stride: the tiles read whole 32s of
        // keys (the packed padding keys score 0 and get weight 0), and rows
        // 2 KiB apart made each tile store 7x slower (16 rows in a few
        // cache sets): 16 more.
        const int64_t cols_p = amx ? AmxPaddedKeys(cols) : cols;
        const int64_t lds = amx ? cols_p + 16 : cols;
        s.scores.resize(rows_p * lds);
        // The tiles find each row's maximum as they store the scores when
        // those are the softmax's input (folded: no mask to add first).
        const bool fused_max = amx && folded;
        if (amx) {
          s.row_max.resize(rows_p);
          AmxScores(static_cast<const uint16_t*>(q), rows_p, e,
                    packed_k.data() + j0 * e, cols_p, s.scores.data(), lds,
                    cols, fused_max ? s.row_max.data() : nullptr);
        } else if (f32_tiles) {
          F32TimesPanels(static_cast<const float*>(q), rows, e, ldq,
                         panels_k.data() + j0 * e, cols, s.scores.data(), cols);
        } else {
          // scores = q_block k_chunk^T: k read as [E, cols] through strides.
          Gemm({q, gemm, rows, e, ldq, 1},
               {static_cast<const char*>(k.data) + j0 * k.ld * Bytes(gemm),
                gemm, e, cols, 1, k.ld},
               s.scores.data(), cols, false);
        }
        if (!folded)
          ScaleAndMask(a, g, r0, rows, j0, cols, lds, s.scores.data());
        if (low) s.weights_low.resize(rows_p * lds);
        for (int64_t i = 0; i < rows; ++i) {
          // f32 weights replace their scores (one block fewer in L2).
          float* row = s.scores.data() + i * lds;
          uint16_t* wl = low ? s.weights_low.data() + i * lds : nullptr;
          // Causal without a mask: only keys j <= r0 + i are visible.
          const int64_t n = folded && a.attrs->is_causal
                                ? std::clamp<int64_t>(r0 + i + 1 - j0, 0, cols)
                                : cols;
          RowStats& st = stats[i];
          // The tiles' maximum is over all `cols`: a causal row that sees
          // fewer, or a NaN in its strip, needs its own.
          const float chunk_max =
              fused_max && n == cols && !std::isnan(s.row_max[i])
                  ? s.row_max[i]
                  : rows_k.row_max(row, n);
          const float max = std::isnan(chunk_max) || std::isnan(st.max)
                                ? NAN
                                : std::max(st.max, chunk_max);
          if (max == -INFINITY) {  // Nothing visible yet: weights 0.
            if (low) std::fill(wl, wl + lds, uint16_t{0});
            std::fill(row, row + cols, 0.0f);
            continue;
          }
          if (max != st.max) {  // Rescale what earlier chunks summed.
            const float correction =
                st.max == -INFINITY ? 0.0f : std::exp((st.max - max) * mult);
            st.total *= correction;
            rows_k.scale_row(s.acc.data() + i * ev, ev, correction);
            st.max = max;
          }
          st.total += low ? rows_k.exp_row_bf16(row, n, max, mult, wl)
                          : rows_k.exp_row_f32(row, n, max, mult, row);
          if (low) {
            std::fill(wl + n, wl + lds, uint16_t{0});
          } else {
            std::fill(row + n, row + cols, 0.0f);
          }
          if (dropout) {
            s.dropout.resize(n);
            AttentionDropout(a, g, r0 + i, j0, n, s.dropout.data());
            for (int64_t j = 0; j < n; ++j) row[j] *= s.dropout[j];
          }
        }
        // Unnormalized weights into the GEMM; each output row is divided by
        // its normalizer at the end (rows x Ev, not rows x S, multiplies).
        const void* p = s.scores.data();  // Row stride cols without tiles.
        if (low) {
          p = s.weights_low.data();
        } else if (gemm != MIXRT_DTYPE_F32) {
          s.weights_low.resize(rows * cols);
          StoreRow(s.scores.data(), rows * cols, s.weights_low.data(), gemm, 0);
          p = s.weights_low.data();
        }
        if (amx) {
          // The padding rows' weights: 0 (their outputs are dropped).
          std::fill(s.weights_low.data() + rows * lds,
                    s.weights_low.data() + rows_p * lds, uint16_t{0});
          AmxAccumulateWeightedValues(s.weights_low.data(), rows_p, cols_p, lds,
                                      packed_v.data() + j0 * ev, ev,
                                      s.acc.data());
        } else {
          Gemm({p, gemm, rows, cols, cols, 1},
               {static_cast<const char*>(v.data) + j0 * v.ld * Bytes(gemm),
                gemm, cols, ev, v.ld, 1},
               s.acc.data(), ev, /*accumulate=*/true);
        }
      }
      float* lse = at.lse + g * a.queries + r0;
      for (int64_t i = 0; i < rows; ++i) {
        const RowStats& st = stats[i];
        lse[i] = st.max == -INFINITY ? -INFINITY
                                     : st.max * mult + std::log(st.total);
        // A row that sees nothing has total 0 and acc 0: output 0.
        rows_k.scale_row(s.acc.data() + i * ev, ev,
                         st.total > 0    ? 1.0f / st.total
                         : st.total == 0 ? 0.0f
                                         : NAN);
      }
      StoreRows(s.acc.data(), rows, ev, at.out, g, r0);
    }
  });
}

void Backward(const AttentionCall& a) {
  const struct {
    GroupRows q, k, v, grad_out;
  } at = {DenseRows(*a.q), DenseRows(*a.k), DenseRows(*a.v),
          DenseRows(*a.grad_out)};
  const SoftmaxRowKernels& rows_k = SoftmaxRows();
  const MixrtDtype dt = a.q->dtype(), gemm = GemmDtype(dt);
  const int64_t e = a.head_dim, ev = a.value_dim;
  const float scale = static_cast<float>(a.attrs->scale);
  // f32 products whose reduced dimension is e or ev from keys and values
  // packed per group, and the transposed ones in registers (f32_tiles.h).
  const bool f32_tiles = gemm == MIXRT_DTYPE_F32 && F32TilesUsable();
  const bool f32_transposed = f32_tiles && e % 16 == 0 && ev % 16 == 0;
  ParallelFor(a.groups, 1, [&](int64_t begin, int64_t end) {
    Scratch s;
    std::vector<float> panels_k, panels_v;
    std::vector<float> dk, dv, dp, go_buf, dq, d, out_row, go_row;
    std::vector<uint16_t> ds_low;
    for (int64_t g = begin; g < end; ++g) {
      dk.assign(a.keys * e, 0.0f);
      dv.assign(a.keys * ev, 0.0f);
      const void* k = RowsInDtype(at.k, g, 0, a.keys, e, gemm, &s.kbuf).data;
      const void* v = RowsInDtype(at.v, g, 0, a.keys, ev, gemm, &s.vbuf).data;
      if (f32_tiles) {
        panels_k.resize(F32PanelKeys(a.keys) * e);
        panels_v.resize(F32PanelKeys(a.keys) * ev);
        F32PackPanels(static_cast<const float*>(k), a.keys, e, e,
                      panels_k.data());
        F32PackPanels(static_cast<const float*>(v), a.keys, ev, ev,
                      panels_v.data());
      }
      const float* lse =
          static_cast<const float*>(a.lse->data()) + g * a.queries;
      for (int64_t r0 = 0; r0 < a.queries; r0 += kRows) {
        const int64_t rows = std::min(kRows, a.queries - r0);
        const int64_t extent = KeyExtent(a, r0, rows);
        const int64_t at_q = (g * a.queries + r0) * e;
        const int64_t at_o = (g * a.queries + r0) * ev;
        const void* q = RowsInDtype(at.q, g, r0, rows, e, gemm, &s.qbuf).data;
        const void* go =
            RowsInDtype(at.grad_out, g, r0, rows, ev, gemm, &go_buf).data;
        // D_i = sum_c dO_ic O_ic.
        d.resize(rows);
        out_row.resize(ev);
        go_row.resize(ev);
        for (int64_t i = 0; i < rows; ++i) {
          LoadRow(a.out->data(), dt, at_o + i * ev, ev, out_row.data());
          LoadRow(a.grad_out->data(), dt, at_o + i * ev, ev, go_row.data());
          float sum = 0;
          for (int64_t c = 0; c < ev; ++c) sum += go_row[c] * out_row[c];
          d[i] = sum;
        }
        dq.assign(rows * e, 0.0f);
        // Key chunks as in the forward: the score, weight and dS blocks
        // (rows x chunk) stay in L2 across the five GEMMs that use them.
        for (int64_t j0 = 0; j0 < extent; j0 += kKeyChunk) {
          const int64_t cols = std::min(kKeyChunk, extent - j0);
          const void* k_chunk =
              static_cast<const char*>(k) + j0 * e * Bytes(gemm);
          const void* v_chunk =
              static_cast<const char*>(v) + j0 * ev * Bytes(gemm);
          s.scores.resize(rows * cols);
          if (f32_tiles) {
            F32TimesPanels(static_cast<const float*>(q), rows, e, e,
                           panels_k.data() + j0 * e, cols, s.scores.data(),
                           cols);
          } else {
            Gemm({q, gemm, rows, e, e, 1}, {k_chunk, gemm, e, cols, 1, e},
                 s.scores.data(), cols, false);
          }
          ScaleAndMask(a, g, r0, rows, j0, cols, cols, s.scores.data());
          for (int64_t i = 0; i < rows; ++i) {
            float* row = s.scores.data() + i * cols;
            const float l = lse[r0 + i];
            if (l == -INFINITY) {
              std::fill(row, row + cols, 0.0f);
              continue;
            }
            rows_k.exp_row_f32(row, cols, l, 1.0f, row);  // p = exp(x - lse)
          }
          // The chunk's dropout factors, for dV and dP alike.
          const bool dropout = a.attrs->dropout_p > 0;
          if (dropout) {
            s.dropout.resize(rows * cols);
            for (int64_t i = 0; i < rows; ++i) {
              AttentionDropout(a, g, r0 + i, j0, cols,
                               s.dropout.data() + i * cols);
            }
          }
          // dV += (dropped weights)^T dO.
          const void* p =
              WeightsForGemm(gemm, rows, cols, s.scores.data(),
                             dropout ? s.dropout.data() : nullptr, &s);
          if (f32_transposed) {
            F32AccumulateTransposedTimes(
                static_cast<const float*>(p), cols, rows, cols,
                static_cast<const float*>(go), ev, ev, dv.data() + j0 * ev, ev);
          } else {
            Gemm({p, gemm, cols, rows, 1, cols}, {go, gemm, rows, ev, ev, 1},
                 dv.data() + j0 * ev, ev, true);
          }
          // dP = dO V^T, through the dropout mask; dS = P (dP - D) scale.
          dp.resize(rows * cols);
          if (f32_tiles) {
            F32TimesPanels(static_cast<const float*>(go), rows, ev, ev,
                           panels_v.data() + j0 * ev, cols, dp.data(), cols);
          } else {
            Gemm({go, gemm, rows, ev, ev, 1}, {v_chunk, gemm, ev, cols, 1, ev},
                 dp.data(), cols, false);
          }
          for (int64_t i = 0; i < rows; ++i) {
            const float* prow = s.scores.data() + i * cols;
            float* dprow = dp.data() + i * cols;
            if (dropout) {
              const float* factors = s.dropout.data() + i * cols;
              for (int64_t j = 0; j < cols; ++j) dprow[j] *= factors[j];
            }
            const float di = d[i];
#pragma omp simd
            for (int64_t j = 0; j < cols; ++j) {
              dprow[j] = prow[j] * (dprow[j] - di) * scale;
            }
          }
          const void* ds = dp.data();
          if (gemm != MIXRT_DTYPE_F32) {
            ds_low.resize(rows * cols);
            StoreRow(dp.data(), rows * cols, ds_low.data(), gemm, 0);
            ds = ds_low.data();
          }
          // dQ += dS K; dK += dS^T Q.
          Gemm({ds, gemm, rows, cols, cols, 1}, {k_chunk, gemm, cols, e, e, 1},
               dq.data(), e, true);
          if (f32_transposed) {
            F32AccumulateTransposedTimes(
                static_cast<const float*>(ds), cols, rows, cols,
                static_cast<const float*>(q), e, e, dk.data() + j0 * e, e);
          } else {
            Gemm({ds, gemm, cols, rows, 1, cols}, {q, gemm, rows, e, e, 1},
                 dk.data() + j0 * e, e, true);
          }
        }
        StoreRow(dq.data(), rows * e, a.grad_q->data(), dt, at_q);
      }
      StoreRow(dk.data(), a.keys * e, a.grad_k->data(), dt, g * a.keys * e);
      StoreRow(dv.data(), a.keys * ev, a.grad_v->data(), dt, g * a.keys * ev);
    }
  });
}

// Runs `pass` unless there is nothing to compute; oneDNN's errors become
// statuses.
template <typename Pass>
absl::Status RunPass(const AttentionCall& a, Pass&& pass) {
  if (a.groups == 0 || a.queries == 0) return absl::OkStatus();
  if (a.keys == 0) {
    return absl::InvalidArgumentError(
        "scaled_dot_product_attention: no keys (S = 0)");
  }
  try {
    pass();
  } catch (const dnnl::error& e) {
    return absl::InternalError(
        absl::StrCat("scaled_dot_product_attention: oneDNN: ", e.what()));
  }
  return absl::OkStatus();
}

}  // namespace

GroupRows GroupRows::Dense(void* data, MixrtDtype dtype, int64_t rows,
                           int64_t cols) {
  GroupRows t;
  t.data = data;
  t.dtype = dtype;
  t.batch_stride = rows * cols;
  t.row_stride = cols;
  return t;
}

absl::Status RunAttentionForward(const AttentionCall& a,
                                 const AttentionForwardRows& rows) {
  return RunPass(a, [&] { Forward(a, rows); });
}

absl::Status RunAttention(const sdk::KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(const AttentionCall a, sdk::DecodeAttention(call));
  if (a.backward) return RunPass(a, [&] { Backward(a); });
  AttentionForwardRows rows{DenseRows(*a.q), DenseRows(*a.k), DenseRows(*a.v),
                            DenseRows(*a.out),
                            static_cast<float*>(a.lse->data())};
  return RunPass(a, [&] { Forward(a, rows); });
}

}  // namespace mixrt::cpu
