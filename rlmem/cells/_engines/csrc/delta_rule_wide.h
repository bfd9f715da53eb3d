// DeltaNet's step on its fast weights, that step's backward, and its SiLU, for float32 heads of
// 16, 32 or 64 features on a CPU with AVX-512 (delta_rule.h calls them there; its own loops
// elsewhere).
//
// Part of the one translation unit of loops.cpp, which includes this file inside its anonymous
// namespace after blocked_product.h and wide_exp.h, before delta_rule.h; not a standalone
// header.
//
// Why: a head's row of S is d = 16 N floats, N registers of 16. The build's own loops run AVX2
// (8 wide; compiled.py), where the backward's four vectors held across the rows (q, k and the
// sums dq, dk: 16 registers at d = 32) took all sixteen of AVX2's registers, and the compiler
// spilled them to the stack on every row; AVX-512 has 32 registers of twice the width. On this
// project's AMD EPYC (family 26, one thread) the backward's step over T = 128, B = 64, 4 heads of
// 32 took 9.1 of the backward's 19.6 ms (benchmarks/delta_rule_kernel.py).
//
// The layout: these steps take S and G = ∂L/∂S transposed (row j: column j of S, what key unit
// j maps to; delta_rule.h's delta_transposed and delta_layout). Then S k, S q and G k are sums of
// rows scaled by k_j or q_j, lane by lane, where on S's own rows each of them summed each row
// across its lanes (four shuffles and adds a row); only the backward's Sᵀ go and Gᵀ u - Sᵀ de
// sum across lanes, eight rows at a time (delta_wide_sums8). Rows first, as in the tensors:
// forward 6.0 ms and backward 13.4 at that shape; transposed, 4.7 and 12.1 (the backward once
// ∂L/∂o is asked for two steps ahead: its first read waited on memory).
//
// The arithmetic is delta_rule.h's (its equations at its top), summed in another order: the
// same function, rounded otherwise (tests/cells/test_modern_cells.py holds the chunk within
// float32 rounding of float64). The forward and the backward's replay both take
// delta_step_wide, so the replayed states are the forward's to the bit.

#if defined(__x86_64__)

// SiLU over n floats (a multiple of 16), y = x σ(x), and σ(x) into sigma, with exp, wide_exp.h's
// exponential: delta_rule.h's delta_silu, 16 wide.
RLMEM_WIDE void delta_silu_wide(const float* x, float* y, float* sigma, int64_t n, WideExp exp) {
  for (int64_t j = 0; j < n; j += 16) {
    const __m512 x_j = _mm512_loadu_ps(x + j);
    const __m512 sigma_j = wide_sigmoid(x_j, exp);
    _mm512_storeu_ps(sigma + j, sigma_j);
    _mm512_storeu_ps(y + j, _mm512_mul_ps(x_j, sigma_j));
  }
}

// N registers from 16 N floats.
template <int N>
RLMEM_WIDE void delta_wide_load(const float* from, __m512 (&into)[N]) {
  for (int c = 0; c < N; ++c) {
    into[c] = _mm512_loadu_ps(from + 16 * c);
  }
}

// The lane sums of p[0], ..., p[7], into out[0..8): the lanes of pairs, then quadruples of
// registers folded onto each other (a transpose as it sums), where a sum of each register's
// own lanes would take four shuffles and adds per register. Inlined: its registers stay
// registers.
RLMEM_WIDE __attribute__((always_inline)) inline void delta_wide_sums8(const __m512 (&p)[8],
                                                                     float* out) {
  __m512 pairs[4], quads[2];
  for (int r = 0; r < 4; ++r) {  // register r: p[2r]'s 8 partial sums, then p[2r + 1]'s
    pairs[r] = _mm512_add_ps(_mm512_shuffle_f32x4(p[2 * r], p[2 * r + 1], 0x44),
                             _mm512_shuffle_f32x4(p[2 * r], p[2 * r + 1], 0xEE));
  }
  for (int r = 0; r < 2; ++r) {  // 128-bit block b: p[4r + b]'s 4 partial sums
    quads[r] = _mm512_add_ps(_mm512_shuffle_f32x4(pairs[2 * r], pairs[2 * r + 1], 0x88),
                             _mm512_shuffle_f32x4(pairs[2 * r], pairs[2 * r + 1], 0xDD));
  }
  // block b: p[b]'s two partial sums, then p[4 + b]'s, then again; lanes 4b and 4b + 1 the sums
  const __m512 halves = _mm512_add_ps(_mm512_unpacklo_ps(quads[0], quads[1]),
                                      _mm512_unpackhi_ps(quads[0], quads[1]));
  const __m512 sums = _mm512_add_ps(halves, _mm512_permute_ps(halves, 0x4E));
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
  _mm512_mask_storeu_ps(out, __mmask16(0xFF), _mm512_permutexvar_ps(order, sums));
}

// The 16 × 16 block at from (row stride from_stride) transposed into to (row stride
// to_stride): rows interleaved in pairs of lanes, of lane pairs, then of 4-lane and 8-lane
// blocks, 64 shuffles for 256 numbers.
RLMEM_WIDE void delta_wide_transpose16(const float* from, int64_t from_stride, float* to,
                                       int64_t to_stride) {
  __m512 r[16], t[16];
  for (int i = 0; i < 16; ++i) {
    r[i] = _mm512_loadu_ps(from + i * from_stride);
  }
  for (int i = 0; i < 16; i += 2) {  // t[i]: lanes of rows i, i + 1 interleaved
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {  // r: pairs of lanes of rows i..i+3
    for (int h = 0; h < 2; ++h) {
      const __m512d a = _mm512_castps_pd(t[i + h]), b = _mm512_castps_pd(t[i + 2 + h]);
      r[i + 2 * h] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
      r[i + 2 * h + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
    }
  }
  for (int i = 0; i < 16; i += 8) {  // t: 128-bit blocks of rows i..i+7
    for (int h = 0; h < 4; ++h) {
      t[i + h] = _mm512_shuffle_f32x4(r[i + h], r[i + 4 + h], 0x88);
      t[i + 4 + h] = _mm512_shuffle_f32x4(r[i + h], r[i + 4 + h], 0xDD);
    }
  }
  for (int h = 0; h < 8; ++h) {  // r: 128-bit blocks of all 16 rows
    r[h] = _mm512_shuffle_f32x4(t[h], t[8 + h], 0x88);
    r[8 + h] = _mm512_shuffle_f32x4(t[h], t[8 + h], 0xDD);
  }
  for (int h = 0; h < 16; ++h) {  // r[h]: column h of the block
    _mm512_storeu_ps(to + h * to_stride, r[h]);
  }
}

// The d × d matrix M (d = 16 N) transposed in place, through scratch (d × d).
template <int N>
RLMEM_WIDE void delta_wide_transpose(float* M, float* scratch) {
  constexpr int64_t d = 16 * N;
  for (int64_t a = 0; a < N; ++a) {
    for (int64_t b = 0; b < N; ++b) {
      delta_wide_transpose16(M + (16 * a) * d + 16 * b, d, scratch + (16 * b) * d + 16 * a, d);
    }
  }
  std::copy_n(scratch, d * d, M);
}

// Four accumulators of N registers, which the loops over S's columns add into in turn (four
// chains of multiply-adds in flight; the loops over the columns step by 4 and unroll the 4, so
// that each slot is a constant and the accumulators stay in registers), and their sum.
template <int N>
struct DeltaWideSum {
  __m512 part[4][N];

  RLMEM_WIDE DeltaWideSum() {
    for (int a = 0; a < 4; ++a) {
      for (int c = 0; c < N; ++c) {
        part[a][c] = _mm512_setzero_ps();
      }
    }
  }

  // part[slot] += scale · x
  RLMEM_WIDE void add(int slot, float scale, const __m512 (&x)[N]) {
    const __m512 s = _mm512_set1_ps(scale);
    for (int c = 0; c < N; ++c) {
      part[slot][c] = _mm512_fmadd_ps(s, x[c], part[slot][c]);
    }
  }

  // Register c of the sum.
  RLMEM_WIDE __m512 total(int c) const {
    return _mm512_add_ps(_mm512_add_ps(part[0][c], part[1][c]),
                         _mm512_add_ps(part[2][c], part[3][c]));
  }
};

// delta_step (delta_rule.h) for d = 16 N, on S transposed (delta_rule.h's delta_transposed: row
// j of ST is column j of S, what key unit j maps to): S k = Σ_j k_j ST_j, no sum across lanes;
// e = v - S k, u = β e, then ST_j += k_j u into ST_out (may be ST_in); with q given,
// o = S_out q = Σ_j q_j ST_j + u (k·q).
template <int N>
RLMEM_WIDE void delta_step_wide(const float* ST_in, float* ST_out, const float* k,
                                const float* v, float beta, float* e, const float* q, float* o) {
  constexpr int64_t d = 16 * N;
  DeltaWideSum<N> Sk, Sq;
  for (int64_t j0 = 0; j0 < d; j0 += 4) {
    #pragma GCC unroll 4
    for (int slot = 0; slot < 4; ++slot) {
      __m512 column[N];
      delta_wide_load<N>(ST_in + (j0 + slot) * d, column);
      Sk.add(slot, k[j0 + slot], column);
      if (q != nullptr) {
        Sq.add(slot, q[j0 + slot], column);
      }
    }
  }
  __m512 u[N], k_r[N], q_r[N];
  delta_wide_load<N>(k, k_r);
  float kq = 0.0f;
  if (q != nullptr) {
    delta_wide_load<N>(q, q_r);
    __m512 product = _mm512_mul_ps(k_r[0], q_r[0]);
    for (int c = 1; c < N; ++c) {
      product = _mm512_fmadd_ps(k_r[c], q_r[c], product);
    }
    kq = _mm512_reduce_add_ps(product);
  }
  const __m512 beta_r = _mm512_set1_ps(beta), kq_r = _mm512_set1_ps(kq);
  for (int c = 0; c < N; ++c) {
    const __m512 e_c = _mm512_sub_ps(_mm512_loadu_ps(v + 16 * c), Sk.total(c));
    _mm512_storeu_ps(e + 16 * c, e_c);
    u[c] = _mm512_mul_ps(beta_r, e_c);
    if (q != nullptr) {
      _mm512_storeu_ps(o + 16 * c, _mm512_fmadd_ps(u[c], kq_r, Sq.total(c)));
    }
  }
  for (int64_t j = 0; j < d; ++j) {
    const __m512 k_j = _mm512_set1_ps(k[j]);
    for (int c = 0; c < N; ++c) {
      _mm512_storeu_ps(ST_out + j * d + 16 * c,
                       _mm512_fmadd_ps(k_j, u[c], _mm512_loadu_ps(ST_in + j * d + 16 * c)));
    }
  }
}

// The part of one step's backward that runs over S (delta_rule.h's delta_rows_backward) for
// d = 16 N, on S_{t-1} and G = ∂L/∂S_t transposed (rows: columns of S): GT_j += q_j go, then
// du = G k = Σ_j k_j GT_j; de = β du = dv; dβ = du·e; then per column j, dq_j = ST_j·go and
// dk_j = GT_j·u - ST_j·de, summed eight columns at a time (delta_wide_sums8), and
// GT_j -= k_j de; dq += (go·u) k. Returns dβ.
template <int N>
RLMEM_WIDE float delta_step_backward_wide(const float* go, const float* ST_prev, float* GT,
                                          const float* q, const float* k, const float* e,
                                          float beta, float* dq, float* dk, float* dv) {
  constexpr int64_t d = 16 * N;
  DeltaWideSum<N> Gk;
  __m512 column[N];
  __m512 go_r[N], u[N], de[N];
  delta_wide_load<N>(go, go_r);
  for (int64_t j0 = 0; j0 < d; j0 += 4) {
    #pragma GCC unroll 4
    for (int slot = 0; slot < 4; ++slot) {
      float* G_j = GT + (j0 + slot) * d;
      const __m512 q_j = _mm512_set1_ps(q[j0 + slot]);
      for (int c = 0; c < N; ++c) {
        column[c] = _mm512_fmadd_ps(q_j, go_r[c], _mm512_loadu_ps(G_j + 16 * c));
        _mm512_storeu_ps(G_j + 16 * c, column[c]);
      }
      Gk.add(slot, k[j0 + slot], column);
    }
  }
  const __m512 beta_r = _mm512_set1_ps(beta);
  __m512 dbeta = _mm512_setzero_ps(), go_u = _mm512_setzero_ps();
  for (int c = 0; c < N; ++c) {
    const __m512 du = Gk.total(c), e_c = _mm512_loadu_ps(e + 16 * c);
    u[c] = _mm512_mul_ps(beta_r, e_c);
    de[c] = _mm512_mul_ps(beta_r, du);
    _mm512_storeu_ps(dv + 16 * c, de[c]);
    dbeta = _mm512_fmadd_ps(du, e_c, dbeta);
    go_u = _mm512_fmadd_ps(go_r[c], u[c], go_u);
  }
  __m512 dq_parts[8], dk_parts[8], S_j[N];
  for (int64_t j0 = 0; j0 < d; j0 += 8) {
    for (int r = 0; r < 8; ++r) {
      const int64_t j = j0 + r;
      delta_wide_load<N>(ST_prev + j * d, S_j);
      delta_wide_load<N>(GT + j * d, column);
      __m512 dq_j = _mm512_mul_ps(S_j[0], go_r[0]);
      __m512 dk_j = _mm512_fnmadd_ps(S_j[0], de[0], _mm512_mul_ps(column[0], u[0]));
      for (int c = 1; c < N; ++c) {
        dq_j = _mm512_fmadd_ps(S_j[c], go_r[c], dq_j);
        dk_j = _mm512_fnmadd_ps(S_j[c], de[c], _mm512_fmadd_ps(column[c], u[c], dk_j));
      }
      dq_parts[r] = dq_j;
      dk_parts[r] = dk_j;
      const __m512 k_j = _mm512_set1_ps(k[j]);
      for (int c = 0; c < N; ++c) {
        _mm512_storeu_ps(GT + j * d + 16 * c, _mm512_fnmadd_ps(k_j, de[c], column[c]));
      }
    }
    delta_wide_sums8(dq_parts, dq + j0);
    delta_wide_sums8(dk_parts, dk + j0);
  }
  const float go_u_sum = _mm512_reduce_add_ps(go_u);
  for (int c = 0; c < d; c += 16) {
    _mm512_storeu_ps(dq + c, _mm512_fmadd_ps(_mm512_set1_ps(go_u_sum), _mm512_loadu_ps(k + c),
                                             _mm512_loadu_ps(dq + c)));
  }
  return _mm512_reduce_add_ps(dbeta);
}

#endif
