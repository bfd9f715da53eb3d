// What the compiled engines share: σ in place, the attention's σ-dot and softmax-read over
// rows, and the host read of which steps reset.
//
// Part of the one translation unit of loops.cpp, which includes this file inside its anonymous
// namespace after the ATen headers and wide_exp.h (one unit, as before the split, so that the
// compiler sees and optimises the code as it did); not a standalone header.

// The sum of a vector's lanes, in lane order.
template <typename T>
T lane_sum(const at::vec::Vectorized<T>& value) {
  T parts[at::vec::Vectorized<T>::size()];
  value.store(parts);
  T total = 0;
  for (int64_t j = 0; j < at::vec::Vectorized<T>::size(); ++j) {
    total += parts[j];
  }
  return total;
}

#if defined(__x86_64__)
// sigmoid_dot below for float32, 16 numbers at a time (the last ones masked), with exp,
// wide_exp.h's exponential: the attentive cells' σ over every slot's row, most of MemLSTM's
// forward (a row of hidden numbers a slot, up to capacity slots a step).
RLMEM_WIDE float sigmoid_dot_avx512(float* row, const float* score, int64_t n, WideExp exp) {
  __m512 total = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const int64_t left = n - i;
    const __mmask16 mask = left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
    const __m512 sigma = wide_sigmoid(_mm512_maskz_loadu_ps(mask, row + i), exp);
    _mm512_mask_storeu_ps(row + i, mask, sigma);
    total = _mm512_fmadd_ps(sigma, _mm512_maskz_loadu_ps(mask, score + i), total);  // masked: 0
  }
  return _mm512_reduce_add_ps(total);
}

// σ over n float32 numbers in place, 16 at a time (the last ones masked), with exp, the
// exponential of wide_exp.h.
RLMEM_WIDE void sigmoid_in_place_avx512(float* x, int64_t n, WideExp exp) {
  for (int64_t i = 0; i < n; i += 16) {
    const int64_t left = n - i;
    const __mmask16 mask = left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
    _mm512_mask_storeu_ps(x + i, mask, wide_sigmoid(_mm512_maskz_loadu_ps(mask, x + i), exp));
  }
}
#endif

// x ← σ(x) over n numbers, vectorised as ATen's σ (at::vec, AVX2 where the build has it; 16
// wide for float32 where wide_exp is found).
template <typename T>
void sigmoid_in_place(T* x, int64_t n) {
#if defined(__x86_64__)
  if constexpr (std::is_same_v<T, float>) {
    if (const WideExp exp = wide_exp(); exp != nullptr) {
      sigmoid_in_place_avx512(x, n, exp);
      return;
    }
  }
#endif
  using V = at::vec::Vectorized<T>;
  const V one(T(1));
  int64_t i = 0;
  for (; i + V::size() <= n; i += V::size()) {
    (one / (one + V::loadu(x + i).neg().exp())).store(x + i);
  }
  for (; i < n; ++i) {
    x[i] = T(1) / (T(1) + std::exp(-x[i]));
  }
}

// σ in place over a row of n numbers, vectorised like ATen's sigmoid (at::vec; AVX2 where the
// build has it, see compiled.py; for float32 where wide_exp.h's exponential is found, 16 wide),
// and the dot product of the result with score.
template <typename T>
T sigmoid_dot(T* row, const T* score, int64_t n) {
#if defined(__x86_64__)
  if constexpr (std::is_same_v<T, float>) {
    if (const WideExp exp = wide_exp(); exp != nullptr) {
      return sigmoid_dot_avx512(row, score, n, exp);
    }
  }
#endif
  using V = at::vec::Vectorized<T>;
  const V one(T(1));
  V acc(T(0));
  int64_t i = 0;
  for (; i + V::size() <= n; i += V::size()) {
    const V value = one / (one + V::loadu(row + i).neg().exp());
    value.store(row + i);
    acc = acc + value * V::loadu(score + i);
  }
  T total = lane_sum(acc);
  for (; i < n; ++i) {
    row[i] = T(1) / (T(1) + std::exp(-row[i]));
    total += row[i] * score[i];
  }
  return total;
}

// The softmax of the n logits in w, in place, and out = own + Σ_i w_i row(i), each of the
// H numbers that row(i) points to: the read of every attention. A row of weight 0 (a masked
// entry's, whose row may not hold numbers) adds nothing and is not read.
template <typename T, typename Row>
void softmax_read(T* w, int64_t n, const T* own, T* out, int64_t hidden, Row row) {
  T largest = -std::numeric_limits<T>::infinity();
  for (int64_t i = 0; i < n; ++i) {
    largest = std::max(largest, w[i]);
  }
  T total = 0;
  for (int64_t i = 0; i < n; ++i) {
    w[i] = std::exp(w[i] - largest);
    total += w[i];
  }
  std::copy_n(own, hidden, out);
  for (int64_t i = 0; i < n; ++i) {
    w[i] /= total;
    const T weight = w[i];
    if (weight == T(0)) {
      continue;
    }
    const T* m = row(i);
    #pragma omp simd
    for (int64_t h = 0; h < hidden; ++h) {
      out[h] += weight * m[h];
    }
  }
}

// Which steps reset some batch item: resets is a (T, B) bool CPU tensor.
std::vector<bool> reset_steps(const Tensor& resets) {
  const Tensor flags = resets.contiguous();
  const bool* data = flags.data_ptr<bool>();
  const int64_t steps = flags.size(0), batch = flags.size(1);
  std::vector<bool> any(steps, false);
  for (int64_t t = 0; t < steps; ++t) {
    for (int64_t b = 0; b < batch; ++b) {
      if (data[t * batch + b]) {
        any[t] = true;
        break;
      }
    }
  }
  return any;
}
