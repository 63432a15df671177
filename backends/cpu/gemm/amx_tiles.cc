#include "backends/cpu/gemm/amx_tiles.h"

// GCC 12's _mm512_undefined_ps initializes a variable from itself, and
// inlined into _mm512_max_ps and _mm512_reduce_max_ps here it warns "'__Y'
// may be used uninitialized" in every first build (GCC bug 105593, fixed
// in 13). Ignored for the intrinsics header only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#include <math.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "absl/strings/match.h"
#include "backends/cpu/capability/cpu_info.h"

namespace mixrt::cpu {
namespace {

// Linux keeps the tile data state off until a process asks for it.
constexpr int kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtiledata = 18;

// AMX machines all have AVX-512, which the fused row maxima use.
#define MIXRT_AMX \
  __attribute__(( \
      target("amx-tile,amx-bf16,avx512f,avx512bw,avx512dq,avx512vl")))

// Every kernel call uses eight 16 x 64-byte tiles: four accumulators
// (tmm0-3, 16 x 16 f32), two left operands (tmm4-5, 16 rows x 32 bf16) and
// two right operands (tmm6-7, 16 pairs x 16 columns).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
};

// Loaded on every call: oneDNN's AMX kernels, which run between ours on the
// same thread, load their own configuration.
MIXRT_AMX void ConfigureTiles() {
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.bytes_per_row[t] = 64;
    config.rows[t] = 16;
  }
  // GCC 12 does not treat ldtilecfg as reading its operand and dropped the
  // stores above (the instruction then faulted on an all-zero config).
  __asm__ volatile("" : : "r"(&config) : "memory");
  _tile_loadconfig(&config);
}

// One packed tile: 16 pairs x 16 columns x 2.
constexpr int64_t kTileElements = 512;

}  // namespace

bool AmxTilesUsable() {
  static const bool usable = [] {
    const CpuInfo& cpu = GetCpuInfo();
    if (!cpu.amx || !absl::StrContains(cpu.onednn_isa, "amx")) return false;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return usable;
}

int64_t AmxPaddedKeys(int64_t keys) { return (keys + 31) / 32 * 32; }

// Tile (key block kb of 16, dims d0..d0+31): row p holds, for each of the
// 16 keys n, the pair k[n][d0 + 2p], k[n][d0 + 2p + 1].
void AmxPackKeys(const uint16_t* k, int64_t keys, int64_t e, uint16_t* out) {
  const int64_t blocks = e / 32;
  for (int64_t kb = 0; kb < AmxPaddedKeys(keys) / 16; ++kb) {
    for (int64_t db = 0; db < blocks; ++db) {
      uint16_t* tile = out + (kb * blocks + db) * kTileElements;
      for (int64_t n = 0; n < 16; ++n) {
        const int64_t key = kb * 16 + n;
        // Keys are pairs of adjacent dims: 32-bit elements transposed.
        for (int64_t p = 0; p < 16; ++p) {
          const bool real = key < keys;
          tile[p * 32 + n * 2] = real ? k[key * e + db * 32 + 2 * p] : 0;
          tile[p * 32 + n * 2 + 1] =
              real ? k[key * e + db * 32 + 2 * p + 1] : 0;
        }
      }
    }
  }
}

// Tile (keys kb*32..kb*32+31, columns cb*16..cb*16+15): row p holds, for
// each column n, the pair v[kb*32 + 2p][n], v[kb*32 + 2p + 1][n].
void AmxPackValues(const uint16_t* v, int64_t keys, int64_t ev, uint16_t* out) {
  const int64_t blocks = ev / 16;
  for (int64_t kb = 0; kb < AmxPaddedKeys(keys) / 32; ++kb) {
    for (int64_t cb = 0; cb < blocks; ++cb) {
      uint16_t* tile = out + (kb * blocks + cb) * kTileElements;
      for (int64_t p = 0; p < 16; ++p) {
        for (int64_t h = 0; h < 2; ++h) {
          const int64_t key = kb * 32 + 2 * p + h;
          for (int64_t n = 0; n < 16; ++n) {
            tile[p * 32 + n * 2 + h] =
                key < keys ? v[key * ev + cb * 16 + n] : 0;
          }
        }
      }
    }
  }
}

// 2 x 2 accumulator tiles per step (32 x 32 outputs): each loaded operand
// tile serves two multiplies, which on these machines (a tile load costs
// ~3 multiplies' time) is what the speed depends on.
// Running maxima of a 32-row strip's scores, 16 lanes per row, fed each
// 32 x 32 block right after the tiles store it (still in L1: a separate
// pass read the scores back from L2 and took a fifth of the softmax).
class StripMaxima {
 public:
  MIXRT_AMX void Reset() {
    for (__m512& m : lanes_) m = _mm512_set1_ps(-INFINITY);
    nan_ = 0;
  }
  // The block's columns [0, valid) of rows 0..31 at s (row stride lds).
  MIXRT_AMX void Add(const float* s, int64_t lds, int64_t valid) {
    const __mmask16 m0 = valid >= 16 ? 0xffff : (1u << valid) - 1;
    const __mmask16 m1 = valid >= 32   ? 0xffff
                         : valid <= 16 ? 0
                                       : (1u << (valid - 16)) - 1;
    const __m512 hidden = _mm512_set1_ps(-INFINITY);
    for (int r = 0; r < 32; ++r) {
      const __m512 a = _mm512_mask_loadu_ps(hidden, m0, s + r * lds);
      const __m512 b = _mm512_mask_loadu_ps(hidden, m1, s + r * lds + 16);
      nan_ |= _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q);
      lanes_[r] = _mm512_max_ps(lanes_[r], _mm512_max_ps(a, b));
    }
  }
  // Each row's maximum into out; NaN for every row when any score of the
  // strip was NaN (max drops NaN operands).
  MIXRT_AMX void Finish(float* out) const {
    for (int r = 0; r < 32; ++r) {
      out[r] = nan_ != 0 ? NAN : _mm512_reduce_max_ps(lanes_[r]);
    }
  }

 private:
  __m512 lanes_[32];
  __mmask16 nan_ = 0;
};

MIXRT_AMX void AmxScores(const uint16_t* q, int64_t rows, int64_t e,
                         const uint16_t* packed_keys, int64_t cols,
                         float* scores, int64_t lds, int64_t valid_cols,
                         float* row_max) {
  ConfigureTiles();
  const int64_t blocks = e / 32;
  const int64_t q_stride = e * 2, s_stride = lds * 4;
  StripMaxima maxima;
  for (int64_t i = 0; i < rows; i += 32) {
    const uint16_t* q0 = q + i * e;
    const uint16_t* q1 = q0 + 16 * e;
    if (row_max != nullptr) maxima.Reset();
    for (int64_t j = 0; j < cols; j += 32) {
      const uint16_t* k0 = packed_keys + (j / 16) * blocks * kTileElements;
      const uint16_t* k1 = k0 + blocks * kTileElements;
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
      for (int64_t db = 0; db < blocks; ++db) {
        _tile_loadd(4, q0 + db * 32, q_stride);
        _tile_loadd(5, q1 + db * 32, q_stride);
        _tile_loadd(6, k0 + db * kTileElements, 64);
        _tile_loadd(7, k1 + db * kTileElements, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      }
      float* s = scores + i * lds + j;
      _tile_stored(0, s, s_stride);
      _tile_stored(1, s + 16, s_stride);
      _tile_stored(2, s + 16 * lds, s_stride);
      _tile_stored(3, s + 16 * lds + 16, s_stride);
      if (row_max != nullptr && j < valid_cols) {
        maxima.Add(s, lds, valid_cols - j);
      }
    }
    if (row_max != nullptr) maxima.Finish(row_max + i);
  }
  _tile_release();
}

MIXRT_AMX void AmxAccumulateWeightedValues(const uint16_t* weights,
                                           int64_t rows, int64_t cols,
                                           int64_t ldw,
                                           const uint16_t* packed_values,
                                           int64_t ev, float* acc) {
  ConfigureTiles();
  const int64_t blocks = ev / 16;
  const int64_t w_stride = ldw * 2, acc_stride = ev * 4;
  for (int64_t i = 0; i < rows; i += 32) {
    for (int64_t c = 0; c < ev; c += 32) {
      float* a = acc + i * ev + c;
      _tile_loadd(0, a, acc_stride);
      _tile_loadd(1, a + 16, acc_stride);
      _tile_loadd(2, a + 16 * ev, acc_stride);
      _tile_loadd(3, a + 16 * ev + 16, acc_stride);
      for (int64_t kb = 0; kb < cols / 32; ++kb) {
        const uint16_t* w = weights + i * ldw + kb * 32;
        const uint16_t* v =
            packed_values + (kb * blocks + c / 16) * kTileElements;
        _tile_loadd(4, w, w_stride);
        _tile_loadd(5, w + 16 * ldw, w_stride);
        _tile_loadd(6, v, 64);
        _tile_loadd(7, v + kTileElements, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      }
      _tile_stored(0, a, acc_stride);
      _tile_stored(1, a + 16, acc_stride);
      _tile_stored(2, a + 16 * ev, acc_stride);
      _tile_stored(3, a + 16 * ev + 16, acc_stride);
    }
  }
  _tile_release();
}

#undef MIXRT_AMX

}  // namespace mixrt::cpu
