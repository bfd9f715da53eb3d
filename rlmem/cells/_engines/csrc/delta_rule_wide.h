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
// The arithmetic is delta_rule.h's (its equations at its top), each row's sums taken across the
// registers and then across their lanes: the same function, rounded otherwise. The forward and
// the backward's replay both take delta_step_wide, so the replayed states are the forward's to
// the bit.

#if defined(__x86_64__)

// SiLU over n floats (a multiple of 16), y = x σ(x), and σ(x) into sigma, with exp, wide_exp.h's
// exponential: delta_rule.h's delta_silu, 16 wide.
RLMEM_WIDE void delta_silu_wide(const float* x, float* y, float* sigma, int64_t n, WideExp exp) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t j = 0; j < n; j += 16) {
    const __m512 x_j = _mm512_loadu_ps(x + j);
    const __m512 sigma_j =
        _mm512_div_ps(one, _mm512_add_ps(one, exp(_mm512_sub_ps(_mm512_setzero_ps(), x_j))));
    _mm512_storeu_ps(sigma + j, sigma_j);
    _mm512_storeu_ps(y + j, _mm512_mul_ps(x_j, sigma_j));
  }
}

// Σ_c Σ_lanes a[c] b[c] over N registers.
template <int N>
RLMEM_WIDE float delta_wide_dot(const __m512 (&a)[N], const __m512 (&b)[N]) {
  __m512 total = _mm512_mul_ps(a[0], b[0]);
  for (int c = 1; c < N; ++c) {
    total = _mm512_fmadd_ps(a[c], b[c], total);
  }
  return _mm512_reduce_add_ps(total);
}

// N registers from 16 N floats.
template <int N>
RLMEM_WIDE void delta_wide_load(const float* from, __m512 (&into)[N]) {
  for (int c = 0; c < N; ++c) {
    into[c] = _mm512_loadu_ps(from + 16 * c);
  }
}

// delta_step (delta_rule.h) for d = 16 N: S_out = S_in + u kᵀ with u = β e, e = v - S_in k; with
// q given, o = S_out q = S_in q + u (k·q). S_out may be S_in.
template <int N>
RLMEM_WIDE void delta_step_wide(const float* S_in, float* S_out, const float* k, const float* v,
                                float beta, float* e, const float* q, float* o) {
  constexpr int64_t d = 16 * N;
  __m512 k_r[N], q_r[N], row[N];
  delta_wide_load<N>(k, k_r);
  if (q != nullptr) {
    delta_wide_load<N>(q, q_r);
  }
  const float kq = q != nullptr ? delta_wide_dot<N>(k_r, q_r) : 0.0f;
  for (int64_t i = 0; i < d; ++i) {
    delta_wide_load<N>(S_in + i * d, row);
    e[i] = v[i] - delta_wide_dot<N>(row, k_r);
    const float u = beta * e[i];
    if (q != nullptr) {
      o[i] = delta_wide_dot<N>(row, q_r) + u * kq;
    }
    const __m512 u_r = _mm512_set1_ps(u);
    for (int c = 0; c < N; ++c) {
      _mm512_storeu_ps(S_out + i * d + 16 * c, _mm512_fmadd_ps(u_r, k_r[c], row[c]));
    }
  }
}

// The part of one step's backward that runs over S's rows (delta_rule.h's delta_step_backward,
// before the feature maps) for d = 16 N: G (∂L/∂S_t) becomes G + go qᵀ - de kᵀ; writes
// dq = S_tᵀ go, dk = Gᵀ u - S_{t-1}ᵀ de (with G after go qᵀ), dv = de; returns ∂L/∂β.
template <int N>
RLMEM_WIDE float delta_step_backward_wide(const float* go, const float* S_prev, float* G,
                                          const float* q, const float* k, const float* e,
                                          float beta, float* dq, float* dk, float* dv) {
  constexpr int64_t d = 16 * N;
  __m512 q_r[N], k_r[N], dq_r[N], dk_r[N], S_i[N], G_i[N];
  delta_wide_load<N>(q, q_r);
  delta_wide_load<N>(k, k_r);
  for (int c = 0; c < N; ++c) {
    dq_r[c] = _mm512_setzero_ps();
    dk_r[c] = _mm512_setzero_ps();
  }
  float dbeta = 0.0f, go_u = 0.0f;  // go_u = Σ_i go_i u_i: dq's share of u kᵀ
  for (int64_t i = 0; i < d; ++i) {
    delta_wide_load<N>(S_prev + i * d, S_i);
    delta_wide_load<N>(G + i * d, G_i);
    const float u_i = beta * e[i];
    go_u += go[i] * u_i;
    const __m512 go_i = _mm512_set1_ps(go[i]);
    for (int c = 0; c < N; ++c) {
      dq_r[c] = _mm512_fmadd_ps(go_i, S_i[c], dq_r[c]);
      G_i[c] = _mm512_fmadd_ps(go_i, q_r[c], G_i[c]);
    }
    const float du_i = delta_wide_dot<N>(G_i, k_r);
    const float de_i = beta * du_i;
    dbeta += du_i * e[i];
    dv[i] = de_i;
    const __m512 u_r = _mm512_set1_ps(u_i), de_r = _mm512_set1_ps(de_i);
    for (int c = 0; c < N; ++c) {
      dk_r[c] = _mm512_fnmadd_ps(de_r, S_i[c], _mm512_fmadd_ps(u_r, G_i[c], dk_r[c]));
      _mm512_storeu_ps(G + i * d + 16 * c, _mm512_fnmadd_ps(de_r, k_r[c], G_i[c]));
    }
  }
  const __m512 go_u_r = _mm512_set1_ps(go_u);
  for (int c = 0; c < N; ++c) {
    _mm512_storeu_ps(dq + 16 * c, _mm512_fmadd_ps(go_u_r, k_r[c], dq_r[c]));
    _mm512_storeu_ps(dk + 16 * c, dk_r[c]);
  }
  return dbeta;
}

#endif
