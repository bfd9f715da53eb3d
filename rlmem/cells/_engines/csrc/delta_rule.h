// DeltaNet's chunk (rlmem.cells.deltanet, rlmem.cells._engines.delta_rule) step by step, and
// its backward: one batch item at a time, its heads' d × d fast weights in buffers that stay
// in the core's cache for the whole chunk, DeltaNet's feature map applied on the way in. Each
// step's row of features is read once for all heads: an item's steps lie B rows apart, and a
// loop over one head's steps at a time missed the cache at every step (the forward took 14.9
// ms, the backward 23.9 ms for T = 128, B = 64, 4 heads of 32, against 9.2 and 19.7 ms now).
//
// Part of the one translation unit of loops.cpp, which includes this file inside its anonymous
// namespace after the ATen headers (one unit, as before the split, so that the compiler sees
// and optimises the code as it did); not a standalone header.
//
// The input is DeltaNet.project_input's features, per step and batch item [W_q x, W_k x,
// W_v x (h·d each), W_β x + b_β (h)], the window of the last K steps' projections before the
// chunk and the short convolution's taps (DeltaConvolution: c = Σ_j tap_j x_{t-j} within the
// episode); per head, the feature map of DeltaNet._split: q = φ(c_q) / max(‖φ(c_q)‖, ε), the
// same for k, v = φ(c_v), φ = SiLU, ε = 1e-12;  β = σ(W_β x + b_β). The window after the chunk
// is an output too (its last K steps, zeros before the last reset).
// Per step t of a head (S is d_v × d_k, row i holds what the keys map to value unit i):
//   S ← 0 if the batch item resets at t;  e = v - S k;  u = β e;  S ← S + u kᵀ;  o = S q.
// Each row i of S needs only e_i, so a step is one pass over the rows.
// The backward replays the forward to hold every S_{t-1} (d² numbers a step, for one head at a
// time), then runs back in time with G = ∂L/∂S_t:
//   G += go qᵀ;  dq = S_tᵀ go;  du = G k;  dk = Gᵀ u - S_{t-1}ᵀ de;  dβ = du · e;
//   de = β du;  dv = de;  G ← G - de kᵀ (then ∂L/∂S_{t-1}), and G ← 0 past a reset;
// then through the feature map: the norm's ∂/∂s = (g - y (g·y)) / ‖s‖ (g / ε where ‖s‖ ≤ ε),
// SiLU's slope σ(x)(1 + x(1 - σ(x))), σ's β(1 - β); then through the convolution to the
// features, the window and the taps.

// D: a head's features d as a compile-time constant, so that a row's loops unroll into a few
// vector instructions (sized_loop picks 16, 32 or 64), or 0 for d read at run time.

constexpr double kDeltaEpsilon = 1e-12;  // torch.nn.functional.normalize's default eps

template <typename T, int D>
T delta_dot(const T* a, const T* b, int64_t d) {
  const int64_t n = D > 0 ? D : d;
  T total = 0;
  #pragma omp simd reduction(+ : total)
  for (int64_t j = 0; j < n; ++j) {
    total += a[j] * b[j];
  }
  return total;
}

// SiLU over n numbers, y = x σ(x), and σ(x) into sigma (for the backward); σ vectorised like
// ATen's (at::vec; AVX2 where the build has it; for float32 heads of 16, 32 or 64 on a CPU with
// AVX-512, delta_rule_wide.h's): its exp is most of the feature map's cost.
template <typename T, int D>
void delta_silu(const T* x, T* y, T* sigma, int64_t d) {
#if defined(__x86_64__)
  if constexpr (std::is_same_v<T, float> && D > 0 && D % 16 == 0) {
    if (const WideExp exp = wide_exp(); exp != nullptr) {
      delta_silu_wide(x, y, sigma, D, exp);
      return;
    }
  }
#endif
  using V = at::vec::Vectorized<T>;
  const int64_t n = D > 0 ? D : d;
  const V one(T(1));
  int64_t j = 0;
  for (; j + V::size() <= n; j += V::size()) {
    const V x_j = V::loadu(x + j);
    const V sigma_j = one / (one + x_j.neg().exp());
    sigma_j.store(sigma + j);
    (x_j * sigma_j).store(y + j);
  }
  for (; j < n; ++j) {
    sigma[j] = T(1) / (T(1) + std::exp(-x[j]));
    y[j] = x[j] * sigma[j];
  }
}

// The gradient dx of SiLU's input from that of its output g, scaled by scale; sigma: σ(x).
template <typename T, int D>
void delta_silu_backward(const T* g, T scale, const T* x, const T* sigma, T* dx, int64_t d) {
  const int64_t n = D > 0 ? D : d;
  #pragma omp simd
  for (int64_t j = 0; j < n; ++j) {
    dx[j] = g[j] * scale * sigma[j] * (T(1) + x[j] * (T(1) - sigma[j]));
  }
}

// The feature map of a query or key: y = φ(x) / max(‖φ(x)‖, ε), φ = SiLU, and σ(x) into sigma;
// returns ‖φ(x)‖.
template <typename T, int D>
T delta_feature(const T* x, T* y, T* sigma, int64_t d) {
  const int64_t n = D > 0 ? D : d;
  delta_silu<T, D>(x, y, sigma, n);
  const T norm = std::sqrt(delta_dot<T, D>(y, y, n));
  const T denominator = std::max(norm, T(kDeltaEpsilon));
  #pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    y[i] /= denominator;
  }
  return norm;
}

// The gradient dx of the feature map's input from that of its output g (y, sigma and norm:
// what delta_feature gave for x); g is overwritten.
template <typename T, int D>
void delta_feature_backward(T* g, const T* x, const T* y, const T* sigma, T norm, T* dx,
                            int64_t d) {
  const int64_t n = D > 0 ? D : d;
  const bool clamped = norm <= T(kDeltaEpsilon);
  const T gy = clamped ? T(0) : delta_dot<T, D>(g, y, n);
  #pragma omp simd
  for (int64_t j = 0; j < n; ++j) {
    g[j] -= y[j] * gy;
  }
  delta_silu_backward<T, D>(g, T(1) / (clamped ? T(kDeltaEpsilon) : norm), x, sigma, dx, n);
}

// The fewest steps of a chunk whose loops hold S transposed. One step (an acting step) runs its
// forward faster in rows, as the tensors hold S, than through the transposes in and out: 0.09
// against 0.11 ms at B = 64, 4 heads of 32; two steps took 0.14 ms either way, four 0.26 in
// rows and 0.21 transposed (benchmarks/delta_rule_kernel.py; the backward, always faster
// transposed, follows the forward's layout so that its replayed states are the forward's).
constexpr int64_t kTransposedSteps = 2;

// Whether the loops over a chunk of this many steps hold S and G = ∂L/∂S transposed (row j:
// column j, what key unit j maps to): the layout of delta_rule_wide.h's steps, which take them
// for float32 heads of 16, 32 or 64 on a CPU with AVX-512; rows as in the tensors otherwise.
template <typename T, int D>
bool delta_transposed(int64_t steps) {
#if defined(__x86_64__)
  if constexpr (std::is_same_v<T, float> && D > 0 && D % 16 == 0) {
    return steps >= kTransposedSteps && blocked_product_available();
  }
#endif
  return false;
}

// Each of count d × d matrices at M transposed in place where the loops hold them so
// (transposed, delta_transposed's answer): on the way into a loop and out of it.
template <typename T, int D>
void delta_layout(T* M, int64_t count, int64_t d, bool transposed) {
#if defined(__x86_64__)
  if constexpr (std::is_same_v<T, float> && D > 0 && D % 16 == 0) {
    if (transposed) {
      T scratch[D * D];
      for (int64_t m = 0; m < count; ++m) {
        delta_wide_transpose<D / 16>(M + m * d * d, scratch);
      }
    }
  }
#endif
}

// One step's update from S_in (S_{t-1}, d × d, rows contiguous) into S_out (may be S_in):
// writes e (d) and, when q is given, the output o = S_t q = S_{t-1} q + u (k·q), read off each
// row of S_{t-1} in the same pass as S_{t-1} k. The forward and the backward's replay share
// it, so the replayed states are the forward's to the bit. Where the loops hold S transposed
// (delta_transposed), delta_rule_wide.h's.
template <typename T, int D>
void delta_step(const T* S_in, T* S_out, const T* k, const T* v, T beta, T* e, const T* q,
                T* o, int64_t d, bool transposed) {
#if defined(__x86_64__)
  if constexpr (std::is_same_v<T, float> && D > 0 && D % 16 == 0) {
    if (transposed) {
      delta_step_wide<D / 16>(S_in, S_out, k, v, beta, e, q, o);
      return;
    }
  }
#endif
  const int64_t n = D > 0 ? D : d;
  const T kq = q != nullptr ? delta_dot<T, D>(k, q, n) : T(0);
  for (int64_t i = 0; i < n; ++i) {
    const T* row = S_in + i * n;
    T* out = S_out + i * n;
    T sk = 0, sq = 0;
    if (q != nullptr) {
      #pragma omp simd reduction(+ : sk, sq)
      for (int64_t j = 0; j < n; ++j) {
        sk += row[j] * k[j];
        sq += row[j] * q[j];
      }
    } else {
      sk = delta_dot<T, D>(row, k, n);
    }
    e[i] = v[i] - sk;
    const T u = beta * e[i];
    #pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
      out[j] = row[j] + u * k[j];
    }
    if (q != nullptr) {
      o[i] = sq + u * kq;
    }
  }
}

// DeltaNet's short convolution over one chunk: each channel c of [W_q x, W_k x, W_v x] at step
// t is Σ_j taps[j][c] x_{t-j, c} over the taps j that stay within the episode; x_s is a step of
// the chunk (features, s ≥ 0) or of the window before it (s < 0; its last K - 1 slots).
template <typename T>
struct DeltaConvolution {
  const T* features;  // (T, B, width): [W_q x, W_k x, W_v x] (channels), then β's logits
  const T* window;    // (B, K, channels), oldest first
  const T* taps;      // (K, channels): tap j reaches j steps back
  int64_t batch, width, channels, K;

  const T* at(int64_t s, int64_t b) const {
    return s >= 0 ? features + (s * batch + b) * width : window + (b * K + K + s) * channels;
  }

  // Channels [c0, c0 + n) at step t of item b, whose episode started at first (-1: before the
  // chunk, so the window's steps are its own), into out. Four vectors of channels at a time are
  // summed over the taps in registers (four chains of multiply-adds in flight; a sum kept in
  // out went through memory at every tap, as the compiler cannot see that out aliases nothing).
  void convolve(int64_t t, int64_t b, int64_t first, int64_t c0, T* out, int64_t n) const {
    using V = at::vec::Vectorized<T>;
    constexpr int64_t kBlock = 4 * V::size();
    const int64_t reach = first < 0 ? K : std::min<int64_t>(K, t - first + 1);
    int64_t i = 0;
    for (; i + kBlock <= n; i += kBlock) {
      V total[4] = {V(T(0)), V(T(0)), V(T(0)), V(T(0))};
      for (int64_t j = 0; j < reach; ++j) {
        const T* x = at(t - j, b) + c0 + i;
        const T* tap = taps + j * channels + c0 + i;
        for (int64_t r = 0; r < 4; ++r) {
          total[r] = at::vec::fmadd(V::loadu(tap + r * V::size()), V::loadu(x + r * V::size()),
                                    total[r]);
        }
      }
      for (int64_t r = 0; r < 4; ++r) {
        total[r].store(out + i + r * V::size());
      }
    }
    for (; i + V::size() <= n; i += V::size()) {
      V total(T(0));
      for (int64_t j = 0; j < reach; ++j) {
        total = at::vec::fmadd(V::loadu(taps + j * channels + c0 + i),
                               V::loadu(at(t - j, b) + c0 + i), total);
      }
      total.store(out + i);
    }
    for (; i < n; ++i) {
      T total = 0;
      for (int64_t j = 0; j < reach; ++j) {
        total += taps[j * channels + c0 + i] * at(t - j, b)[c0 + i];
      }
      out[i] = total;
    }
  }

  // The window after the chunk, into out (B, K, channels): slot i holds step T - K + i, or
  // zeros where that step came before item b's last reset (first, -1: none in the chunk).
  void slide(int64_t steps, int64_t b, int64_t first, T* out) const {
    for (int64_t i = 0; i < K; ++i) {
      const int64_t s = steps - K + i;
      T* slot = out + (b * K + i) * channels;
      if (first >= 0 && s < first) {
        std::fill_n(slot, channels, T(0));
      } else {
        std::copy_n(at(s, b), channels, slot);
      }
    }
  }

  // The backward of slide for the gradient g of its output (B, K, channels).
  void slide_backward(int64_t steps, int64_t b, int64_t first, const T* g, T* grad_features,
                      T* grad_window) const {
    for (int64_t i = 0; i < K; ++i) {
      const int64_t s = steps - K + i;
      if (first >= 0 && s < first) {
        continue;
      }
      const T* g_i = g + (b * K + i) * channels;
      T* dx = s >= 0 ? grad_features + (s * batch + b) * width
                     : grad_window + (b * K + K + s) * channels;
      #pragma omp simd
      for (int64_t c = 0; c < channels; ++c) {
        dx[c] += g_i[c];
      }
    }
  }

  // The backward of convolve for the gradient g of its output: into grad_features (a step of
  // the chunk), grad_window (of the window) and grad_taps.
  void convolve_backward(int64_t t, int64_t b, int64_t first, int64_t c0, const T* g,
                         T* grad_features, T* grad_window, T* grad_taps, int64_t n) const {
    for (int64_t j = 0; j < K && (first < 0 || t - j >= first); ++j) {
      const int64_t s = t - j;
      const T* x = at(s, b) + c0;
      T* dx = (s >= 0 ? grad_features + (s * batch + b) * width
                      : grad_window + (b * K + K + s) * channels) + c0;
      const T* tap = taps + j * channels + c0;
      T* dtap = grad_taps + j * channels + c0;
      #pragma omp simd
      for (int64_t i = 0; i < n; ++i) {
        dx[i] += tap[i] * g[i];
        dtap[i] += x[i] * g[i];
      }
    }
  }
};

// Each step's episode start within the chunk for batch item b: the last step ≤ t that resets,
// or -1.
inline void episode_starts(const bool* reset, int64_t steps, int64_t batch, int64_t b,
                           int64_t* first) {
  int64_t last = -1;
  for (int64_t t = 0; t < steps; ++t) {
    if (reset[t * batch + b]) {
      last = t;
    }
    first[t] = last;
  }
}

template <typename T>
T delta_sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

// The rows of step t + 1 of item b (its features, every head's q, k, v channels and β), asked
// for ahead of their use: an item's steps lie B rows apart, a stride the hardware's prefetcher
// does not follow across the chunk.
template <typename T>
void delta_prefetch(const DeltaConvolution<T>& conv, int64_t t, int64_t steps, int64_t b) {
  if (t + 1 >= steps) {
    return;
  }
  const char* row = reinterpret_cast<const char*>(conv.at(t + 1, b));
  const int64_t bytes = conv.width * static_cast<int64_t>(sizeof(T));
  for (int64_t offset = 0; offset < bytes; offset += 64) {
    __builtin_prefetch(row + offset);
  }
}

// The n numbers at x asked for ahead of their use.
template <typename T>
void delta_prefetch_span(const T* x, int64_t n) {
  const char* bytes = reinterpret_cast<const char*>(x);
  for (int64_t offset = 0; offset < n * static_cast<int64_t>(sizeof(T)); offset += 64) {
    __builtin_prefetch(bytes + offset);
  }
}

// How many steps ahead the backward asks for a step's ∂L/∂o (its first read, which a step of
// delta_rule_wide.h waits on).
constexpr int64_t kGradientAhead = 2;

// Where one step of one head's feature map goes: the convolved q, k, v (pre, 3 d), the map's
// q, k, v and their σ (the three σ may share one buffer where nothing reads them later).
template <typename T>
struct DeltaFeatures {
  T *pre, *q, *k, *v, *q_sigma, *k_sigma, *v_sigma;
};

// What the step's feature map returns besides the vectors: ‖φ(c_q)‖, ‖φ(c_k)‖ and β.
template <typename T>
struct DeltaScalars {
  T q_norm, k_norm, beta;
};

// Step t of item b for head h up to its fast weights: the short convolution, the feature map
// and β. The forward and the backward's replay both run it, so the replayed numbers are the
// forward's to the bit.
template <typename T, int D>
DeltaScalars<T> delta_step_features(const DeltaConvolution<T>& conv, int64_t t, int64_t b,
                                    int64_t first, int64_t h, int64_t heads,
                                    const DeltaFeatures<T>& into, int64_t d) {
  const int64_t width = heads * d;
  for (int64_t part = 0; part < 3; ++part) {
    conv.convolve(t, b, first, part * width + h * d, into.pre + part * d, d);
  }
  const T q_norm = delta_feature<T, D>(into.pre, into.q, into.q_sigma, d);
  const T k_norm = delta_feature<T, D>(into.pre + d, into.k, into.k_sigma, d);
  delta_silu<T, D>(into.pre + 2 * d, into.v, into.v_sigma, d);
  const T beta = delta_sigmoid(conv.features[(t * conv.batch + b) * conv.width + 3 * width + h]);
  return {q_norm, k_norm, beta};
}

// The forward over a chunk (see delta_forward); S holds the initial states and ends holding
// the final ones. Each step of an item runs all its heads, so that the step's row of features
// is read from memory once (the heads' fast weights, h d² numbers, stay in the core's cache).
template <typename T, int D>
void delta_forward_loop(const DeltaConvolution<T>& conv, const bool* reset, T* o, T* S_all,
                        T* window_out, int64_t steps, int64_t heads, int64_t size) {
  const int64_t d = D > 0 ? D : size, batch = conv.batch;
  const bool transposed = delta_transposed<T, D>(steps);
  std::vector<T> e(d), pre(3 * d), q(d), k(d), v(d), sigma(d);
  const DeltaFeatures<T> features{pre.data(), q.data(), k.data(), v.data(),
                                  sigma.data(), sigma.data(), sigma.data()};
  std::vector<int64_t> first(steps);
  for (int64_t b = 0; b < batch; ++b) {
    episode_starts(reset, steps, batch, b, first.data());
    conv.slide(steps, b, steps > 0 ? first[steps - 1] : -1, window_out);
    T* S_b = S_all + b * heads * d * d;
    delta_layout<T, D>(S_b, heads, d, transposed);
    for (int64_t t = 0; t < steps; ++t) {
      delta_prefetch(conv, t, steps, b);
      if (reset[t * batch + b]) {
        std::fill_n(S_b, heads * d * d, T(0));
      }
      for (int64_t h = 0; h < heads; ++h) {
        const T beta =
            delta_step_features<T, D>(conv, t, b, first[t], h, heads, features, d).beta;
        T* S = S_b + h * d * d;
        delta_step<T, D>(S, S, k.data(), v.data(), beta, e.data(), q.data(),
                         o + ((t * batch + b) * heads + h) * d, d, transposed);
      }
    }
    delta_layout<T, D>(S_b, heads, d, transposed);
  }
}

// What the backward holds of one head's forward, replayed: e_t, the convolved q, k, v before
// the feature map (pre, 3 d a step), the feature map's q_t, k_t, v_t, their σ, the norms, and
// β_t; and grad_pre, the gradient of pre, which the convolution's backward takes.
template <typename T>
struct DeltaReplay {
  std::vector<T> errors, pre, q, k, v, q_sigma, k_sigma, v_sigma, q_norm, k_norm, beta, grad_pre;
  DeltaReplay(int64_t steps, int64_t d)
      : errors(steps * d), pre(steps * 3 * d), q(steps * d), k(steps * d), v(steps * d),
        q_sigma(steps * d), k_sigma(steps * d), v_sigma(steps * d), q_norm(steps),
        k_norm(steps), beta(steps), grad_pre(steps * 3 * d) {}
};

// Step t of item b for head h, replayed up to its fast weights, into replay.
template <typename T, int D>
void delta_replay_features(const DeltaConvolution<T>& conv, int64_t t, int64_t b, int64_t first,
                           int64_t h, int64_t heads, DeltaReplay<T>& replay, int64_t d) {
  const DeltaFeatures<T> into{replay.pre.data() + t * 3 * d, replay.q.data() + t * d,
                              replay.k.data() + t * d,       replay.v.data() + t * d,
                              replay.q_sigma.data() + t * d, replay.k_sigma.data() + t * d,
                              replay.v_sigma.data() + t * d};
  const DeltaScalars<T> scalars = delta_step_features<T, D>(conv, t, b, first, h, heads, into, d);
  replay.q_norm[t] = scalars.q_norm;
  replay.k_norm[t] = scalars.k_norm;
  replay.beta[t] = scalars.beta;
}

// The part of one step's backward that runs over S's rows: G (∂L/∂S_t) becomes its share of
// ∂L/∂S_{t-1}; writes dq, dk and dv (the gradients of the feature maps' outputs q, k, v);
// returns ∂L/∂β. Where the loops hold S and G transposed (delta_transposed),
// delta_rule_wide.h's.
template <typename T, int D>
T delta_rows_backward(const T* __restrict go, const T* __restrict S_prev, T* __restrict G,
                      const T* __restrict q_t, const T* __restrict k_t, const T* __restrict e,
                      T beta_t, T* __restrict dq, T* __restrict dk, T* __restrict dv,
                      int64_t size, bool transposed) {
#if defined(__x86_64__)
  if constexpr (std::is_same_v<T, float> && D > 0 && D % 16 == 0) {
    if (transposed) {
      return delta_step_backward_wide<D / 16>(go, S_prev, G, q_t, k_t, e, beta_t, dq, dk, dv);
    }
  }
#endif
  // restrict: the buffers overlap nothing, so dq and dk may stay in registers over the rows
  const int64_t d = D > 0 ? D : size;
  std::fill_n(dq, d, T(0));
  std::fill_n(dk, d, T(0));
  T dbeta = 0, go_u = 0;  // go_u = Σ_i go_i u_i: dq's share of u kᵀ
  for (int64_t i = 0; i < d; ++i) {
    T* __restrict G_i = G + i * d;
    const T* __restrict S_i = S_prev + i * d;
    const T go_i = go[i], u_i = beta_t * e[i];
    go_u += go_i * u_i;
    T du_i = 0;
    #pragma omp simd reduction(+ : du_i)
    for (int64_t j = 0; j < d; ++j) {
      dq[j] += go_i * S_i[j];
      G_i[j] += go_i * q_t[j];
      du_i += G_i[j] * k_t[j];
    }
    const T de_i = beta_t * du_i;
    dbeta += du_i * e[i];
    dv[i] = de_i;
    #pragma omp simd
    for (int64_t j = 0; j < d; ++j) {
      dk[j] += u_i * G_i[j] - de_i * S_i[j];
      G_i[j] -= de_i * k_t[j];
    }
  }
  #pragma omp simd
  for (int64_t j = 0; j < d; ++j) {
    dq[j] += go_u * k_t[j];
  }
  return dbeta;
}

// One step back in time for one head (the equations at the top): G holds ∂L/∂S_t and leaves
// holding ∂L/∂S_{t-1}'s share through the step; go is ∂L/∂o_t, S_prev S_{t-1}; the gradient
// of the step's pre (q, k, v before the feature map) goes to replay.grad_pre, β's logit's is
// returned.
template <typename T, int D>
T delta_step_backward(DeltaReplay<T>& replay, int64_t t, const T* go, const T* S_prev, T* G,
                      T* dq, T* dk, T* dv, int64_t size, bool transposed) {
  const int64_t d = D > 0 ? D : size;
  const T* q_t = replay.q.data() + t * d;
  const T* k_t = replay.k.data() + t * d;
  const T beta_t = replay.beta[t];
  const T dbeta = delta_rows_backward<T, D>(go, S_prev, G, q_t, k_t, replay.errors.data() + t * d,
                                            beta_t, dq, dk, dv, d, transposed);
  const T* pre = replay.pre.data() + t * 3 * d;
  T* grad_pre = replay.grad_pre.data() + t * 3 * d;
  delta_feature_backward<T, D>(dq, pre, q_t, replay.q_sigma.data() + t * d, replay.q_norm[t],
                               grad_pre, d);
  delta_feature_backward<T, D>(dk, pre + d, k_t, replay.k_sigma.data() + t * d,
                               replay.k_norm[t], grad_pre + d, d);
  delta_silu_backward<T, D>(dv, T(1), pre + 2 * d, replay.v_sigma.data() + t * d,
                            grad_pre + 2 * d, d);
  return dbeta * beta_t * (T(1) - beta_t);
}

// The backward of every head (see delta_backward), an item at a time: its steps' convolutions
// and feature maps replayed for every head together (each step's row of features read once),
// then each head's fast weights replayed and its gradients taken back in time, then the
// convolution's backward for every head a step at a time. G holds ∂L/∂S_T and ends holding
// ∂L/∂S_{-1}; grad_features is written (each item's rows zeroed before its first use, while they
// are about to be in the cache: zeroing the whole tensor first took 2.5 ms of the backward's 13
// at T = 128, B = 64, 4 heads of 32), grad_window and grad_taps (zero) are added to.
template <typename T, int D>
void delta_backward_loop(const DeltaConvolution<T>& conv, const T* grad_o,
                         const T* grad_window_out, const T* S0, const bool* reset, T* G_all,
                         T* grad_features, T* grad_window, T* grad_taps, int64_t steps,
                         int64_t heads, int64_t size) {
  const int64_t d = D > 0 ? D : size, batch = conv.batch, width = heads * d;
  const bool transposed = delta_transposed<T, D>(steps);
  std::vector<DeltaReplay<T>> replays(heads, DeltaReplay<T>(steps, d));
  std::vector<T> states((steps + 1) * d * d), dq(d), dk(d), dv(d);
  std::vector<int64_t> first(steps);
  for (int64_t b = 0; b < batch; ++b) {
    episode_starts(reset, steps, batch, b, first.data());
    for (int64_t t = 0; t < steps; ++t) {  // β's column is written, not added to
      std::fill_n(grad_features + (t * batch + b) * conv.width, 3 * width, T(0));
    }
    conv.slide_backward(steps, b, steps > 0 ? first[steps - 1] : -1, grad_window_out,
                        grad_features, grad_window);
    for (int64_t t = 0; t < steps; ++t) {
      delta_prefetch(conv, t, steps, b);
      for (int64_t h = 0; h < heads; ++h) {
        delta_replay_features<T, D>(conv, t, b, first[t], h, heads, replays[h], d);
      }
    }
    for (int64_t h = 0; h < heads; ++h) {
      DeltaReplay<T>& replay = replays[h];
      std::copy_n(S0 + (b * heads + h) * d * d, d * d, states.data());
      delta_layout<T, D>(states.data(), 1, d, transposed);
      for (int64_t t = 0; t < steps; ++t) {  // every S_{t-1}, after its reset, in slot t
        T* S = states.data() + t * d * d;
        if (reset[t * batch + b]) {
          std::fill_n(S, d * d, T(0));
        }
        delta_step<T, D>(S, S + d * d, replay.k.data() + t * d, replay.v.data() + t * d,
                         replay.beta[t], replay.errors.data() + t * d,
                         static_cast<const T*>(nullptr), static_cast<T*>(nullptr), d,
                         transposed);
      }
      T* G = G_all + (b * heads + h) * d * d;
      delta_layout<T, D>(G, 1, d, transposed);
      for (int64_t t = steps - 1; t >= 0; --t) {
        const int64_t row = t * batch + b;
        if (t >= kGradientAhead) {  // an item's steps lie B rows apart, beyond the prefetcher
          delta_prefetch_span(grad_o + ((row - kGradientAhead * batch) * heads + h) * d, d);
        }
        grad_features[row * conv.width + 3 * width + h] = delta_step_backward<T, D>(
            replay, t, grad_o + (row * heads + h) * d, states.data() + t * d * d, G, dq.data(),
            dk.data(), dv.data(), d, transposed);
        if (reset[row]) {  // no gradient crosses into the episode before
          std::fill_n(G, d * d, T(0));
        }
      }
      delta_layout<T, D>(G, 1, d, transposed);
    }
    for (int64_t t = steps - 1; t >= 0; --t) {
      for (int64_t h = 0; h < heads; ++h) {
        for (int64_t part = 0; part < 3; ++part) {
          conv.convolve_backward(t, b, first[t], part * width + h * d,
                                 replays[h].grad_pre.data() + t * 3 * d + part * d,
                                 grad_features, grad_window, grad_taps, d);
        }
      }
    }
  }
}

// The convolution of a chunk over the tensors given to delta_forward and delta_backward.
template <typename T>
DeltaConvolution<T> chunk_convolution(const Tensor& features, const Tensor& window,
                                      const Tensor& taps) {
  return {features.data_ptr<T>(), window.data_ptr<T>(), taps.data_ptr<T>(), features.size(1),
          features.size(2), window.size(2), window.size(1)};
}

// The loop compiled for d (16, 32 or 64), else the one that reads d at run time.
template <typename Loop>
Loop* sized_loop(int64_t d, Loop* any, Loop* d16, Loop* d32, Loop* d64) {
  switch (d) {
    case 16: return d16;
    case 32: return d32;
    case 64: return d64;
    default: return any;
  }
}

// The chunk: features (T, B, 3 h d + h) of DeltaNet.project_input, the window before it
// (B, K, 3 h d), the convolution's taps (K, 3 h d; tap j reaches j steps back), state
// (B, h, d, d), resets (T, B) bool; returns the outputs o = S_t q_t (T, B, h, d), the final
// state (B, h, d, d) and the window after the chunk (B, K, 3 h d).
std::tuple<Tensor, Tensor, Tensor> delta_forward(const Tensor& features_in,
                                                 const Tensor& window_in, const Tensor& taps_in,
                                                 const Tensor& state, const Tensor& resets_in,
                                                 int64_t heads) {
  const Tensor features = features_in.contiguous(), resets = resets_in.contiguous();
  const Tensor window = window_in.contiguous(), taps = taps_in.contiguous();
  const int64_t steps = features.size(0), batch = features.size(1), d = state.size(-1);
  TORCH_CHECK(features.size(2) == 3 * heads * d + heads && window.size(2) == 3 * heads * d &&
              taps.size(1) == 3 * heads * d && taps.size(0) == window.size(1),
              "delta_forward: features, window or taps do not fit ", heads, " heads of ", d);
  Tensor S = state.clone(at::MemoryFormat::Contiguous);
  Tensor o = at::empty({steps, batch, heads, d}, features.options());
  Tensor window_out = at::empty_like(window);
  AT_DISPATCH_FLOATING_TYPES(features.scalar_type(), "delta_forward", [&] {
    const auto conv = chunk_convolution<scalar_t>(features, window, taps);
    const auto loop = sized_loop(d, delta_forward_loop<scalar_t, 0>,
                                 delta_forward_loop<scalar_t, 16>,
                                 delta_forward_loop<scalar_t, 32>,
                                 delta_forward_loop<scalar_t, 64>);
    loop(conv, resets.data_ptr<bool>(), o.data_ptr<scalar_t>(), S.data_ptr<scalar_t>(),
         window_out.data_ptr<scalar_t>(), steps, heads, d);
  });
  return {o, S, window_out};
}

// The gradients of delta_forward's features, window, taps and state from those of its
// outputs, grad_o (T, B, h, d), grad_final (B, h, d, d) and grad_window_out (B, K, 3 h d).
std::tuple<Tensor, Tensor, Tensor, Tensor> delta_backward(
    const Tensor& grad_o_in, const Tensor& grad_final, const Tensor& grad_window_out_in,
    const Tensor& features_in, const Tensor& window_in, const Tensor& taps_in,
    const Tensor& state_in, const Tensor& resets_in, int64_t heads) {
  const Tensor features = features_in.contiguous(), resets = resets_in.contiguous();
  const Tensor window = window_in.contiguous(), taps = taps_in.contiguous();
  const Tensor grad_o = grad_o_in.contiguous(), state = state_in.contiguous();
  const Tensor grad_window_out = grad_window_out_in.contiguous();
  const int64_t d = state.size(-1);
  Tensor G = grad_final.clone(at::MemoryFormat::Contiguous);
  Tensor grad_features = at::empty_like(features), grad_window = at::zeros_like(window);
  Tensor grad_taps = at::zeros_like(taps);
  AT_DISPATCH_FLOATING_TYPES(features.scalar_type(), "delta_backward", [&] {
    const auto conv = chunk_convolution<scalar_t>(features, window, taps);
    const auto loop = sized_loop(d, delta_backward_loop<scalar_t, 0>,
                                 delta_backward_loop<scalar_t, 16>,
                                 delta_backward_loop<scalar_t, 32>,
                                 delta_backward_loop<scalar_t, 64>);
    loop(conv, grad_o.data_ptr<scalar_t>(), grad_window_out.data_ptr<scalar_t>(),
         state.data_ptr<scalar_t>(), resets.data_ptr<bool>(), G.data_ptr<scalar_t>(),
         grad_features.data_ptr<scalar_t>(), grad_window.data_ptr<scalar_t>(),
         grad_taps.data_ptr<scalar_t>(), features.size(0), heads, d);
  });
  return {grad_features, grad_window, grad_taps, G};
}
