// MemLSTM's full attention, the chunk engine: forward, backward and traces
// (rlmem.cells._engines.full_attention).
//
// Part of the one translation unit of loops.cpp, which includes this file inside its anonymous
// namespace after the ATen headers (one unit, as before the split, so that the compiler sees
// and optimises the code as it did); not a standalone header.

// A step's window: the first `incoming` slots of the incoming memory, then the chunk's states
// first..end-1 (see _full_forward). Entry i of the window is a row of H numbers in `memory`
// (B, capacity, H) or `chunk` (B, T, H); the attention over it is written out as loops over
// those rows, one pass for what the Python engine does in several ops.

struct Window {
  int64_t incoming, first, end;
  int64_t width() const { return incoming + end - first; }
};

Window window(int64_t k, int64_t n_in, int64_t capacity) {
  const int64_t first = std::max<int64_t>(0, k + 1 - capacity);
  return {first == 0 ? n_in : 0, first, k + 1};
}

// Row i of a step's window for batch item b: an incoming slot, or a state of the chunk.
template <typename T>
inline const T* window_row(const T* slots, const T* chunk, int64_t b, int64_t i,
                           const Window& w, int64_t capacity, int64_t steps, int64_t hidden) {
  return i < w.incoming ? slots + (b * capacity + i) * hidden
                        : chunk + (b * steps + w.first + i - w.incoming) * hidden;
}

template <typename T>
inline T* window_row(T* slots, T* chunk, int64_t b, int64_t i, const Window& w,
                     int64_t capacity, int64_t steps, int64_t hidden) {
  return i < w.incoming ? slots + (b * capacity + i) * hidden
                        : chunk + (b * steps + w.first + i - w.incoming) * hidden;
}

// e[b, i] = σ(q[b] + 2 U_a m_i) over the window, and the logits e_i · 2 v_a plus the mask into
// weights (B, width), which full_attend turns into the softmax. A masked entry (another
// episode's, or an empty slot: the window is as wide as the batch's longest episode) gets
// its -inf logit alone: its weight is exactly 0 whatever e_i is, so e_i is neither computed
// nor read (the backward skips every entry of weight 0).
template <typename T>
void full_pre(const T* query, int64_t query_stride, const T* keys, const T* chunk_keys, T* e,
              const T* score, const T* mask, int64_t mask_stride, int64_t column, T* weights,
              const Window& w, int64_t batch, int64_t capacity, int64_t steps, int64_t hidden) {
  const int64_t width = w.width();
  for (int64_t b = 0; b < batch; ++b) {
    const T* q = query + b * query_stride;
    for (int64_t i = 0; i < width; ++i) {
      const T masked = mask[b * mask_stride + column + i];
      if (std::isinf(masked)) {
        weights[b * width + i] = masked;
        continue;
      }
      const T* key = window_row(keys, chunk_keys, b, i, w, capacity, steps, hidden);
      T* out = e + (b * width + i) * hidden;
      #pragma omp simd
      for (int64_t h = 0; h < hidden; ++h) {
        out[h] = q[h] + T(2) * key[h];
      }
      weights[b * width + i] = sigmoid_dot(out, score, hidden) + masked;
    }
  }
}

// The softmax of the logits in weights over the window, and s = h_k + Σ_i w_i m_i.
template <typename T>
void full_attend(T* weights, T* weights_full, int64_t full_stride, int64_t column,
                 const T* memory, const T* chunk, T* y, const Window& w, int64_t k,
                 int64_t batch, int64_t capacity, int64_t steps, int64_t hidden) {
  const int64_t width = w.width();
  for (int64_t b = 0; b < batch; ++b) {
    T* row = weights + b * width;
    softmax_read(row, width, chunk + (b * steps + k) * hidden, y + b * hidden, hidden,
                 [&](int64_t i) {
                   return window_row(memory, chunk, b, i, w, capacity, steps, hidden);
                 });
    std::copy_n(row, width, weights_full + b * full_stride + column);
  }
}

void full_forward(const Tensor& xp, const Tensor& s0, const Tensor& resets,
                  const Tensor& recurrent_t, const Tensor& key_t, const Tensor& score,
                  const Tensor& memory, const Tensor& keys, const Tensor& chunk,
                  const Tensor& chunk_keys, const Tensor& z_in, const Tensor& z,
                  const Tensor& mask, const Tensor& weights_full, const Tensor& y,
                  const Tensor& e_block, const Tensor& w_block, const Tensor& act,
                  const Tensor& partner, const Tensor& minus_one, int64_t n_in, bool save,
                  bool onednn) {
  const int64_t steps = xp.size(0), batch = s0.size(0), hidden = s0.size(1);
  const int64_t capacity = memory.size(1), gates = 4 * hidden, columns = n_in + steps;
  const std::vector<bool> any_reset = reset_steps(resets);
  const Base base{true, save, act, partner, minus_one};
  const Product recurrent_product(recurrent_t, onednn), key_product(key_t, onednn);
  Tensor z_in_base = z_in.narrow(1, 0, gates), z_out = z;
  const Tensor z_base = z.narrow(1, 0, gates).view({batch, 4, hidden});
  int64_t e_offset = 0, w_offset = 0;
  Tensor s = s0;
  for (int64_t k = 0; k < steps; ++k) {
    const Window w = window(k, n_in, capacity);
    if (any_reset[k]) {
      const Tensor reset = resets[k].view({batch, 1});
      s = reset_where(s, reset);
      base.reset(k, reset);
    }
    z_in_base.copy_(xp[k]);
    recurrent_product.into(z_out, z_in, s);
    base.forward(k, z_base, chunk.select(1, k));
    Tensor keys_k = chunk_keys.select(1, k);
    key_product.into(keys_k, Tensor(), chunk.select(1, k));
    const int64_t width = w.width();
    Tensor e = e_block.narrow(0, e_offset, batch * width * hidden);
    const int64_t column = n_in + w.first - w.incoming;
    AT_DISPATCH_FLOATING_TYPES(xp.scalar_type(), "full_attend", [&] {
      using T = scalar_t;
      full_pre<T>(z.data_ptr<T>() + gates, z.stride(0), keys.data_ptr<T>(),
                  chunk_keys.data_ptr<T>(), e.data_ptr<T>(), score.data_ptr<T>(),
                  mask.data_ptr<T>() + k * batch * columns, columns, column,
                  w_block.data_ptr<T>() + w_offset, w, batch, capacity, steps, hidden);
      full_attend<T>(w_block.data_ptr<T>() + w_offset,
                     weights_full.data_ptr<T>() + k * batch * columns, columns, column,
                     memory.data_ptr<T>(), chunk.data_ptr<T>(),
                     y.data_ptr<T>() + k * batch * hidden, w, k, batch, capacity, steps, hidden);
    });
    if (save) {
      e_offset += batch * width * hidden;
    }
    w_offset += batch * width;
    s = y[k];
  }
}

// ds · m, and dm += weight ds, over n numbers, in explicit vectors (at::vec): with `omp simd`
// the compiler left this loop scalar, most of MemLSTM's backward (a row a slot, up to capacity
// slots a step).
template <typename T>
T dot_and_add(const T* ds, const T* m, T weight, T* dm, int64_t n) {
  using V = at::vec::Vectorized<T>;
  const V scale(weight);
  V total(T(0));
  int64_t h = 0;
  for (; h + V::size() <= n; h += V::size()) {
    const V d = V::loadu(ds + h);
    total = at::vec::fmadd(d, V::loadu(m + h), total);
    at::vec::fmadd(scale, d, V::loadu(dm + h)).store(dm + h);
  }
  T dot = lane_sum(total);
  for (; h < n; ++h) {
    dot += ds[h] * m[h];
    dm[h] += weight * ds[h];
  }
  return dot;
}

// The attention's backward at one step: d_weights_i = ds · m_i, the softmax's backward, and
// the gradients of the rows read (d m_i += w_i ds), of the keys (d U_a m_i += 2 v_a ⊙ dp_i),
// of the query (Σ_i 2 v_a ⊙ dp_i) and of the score vector (Σ_i dlogit_i e_i), with
// dp_i = dlogit_i σ'(e_i). An entry of weight 0 (every masked one) contributes only zeros to
// these sums, and is skipped: its e_i was never computed (full_pre).
template <typename T>
void full_attend_backward(const T* ds, const T* weights, const T* e, const T* score,
                          const T* memory, const T* chunk, T* d_memory, T* d_keys, T* d_chunk,
                          T* d_chunk_keys, T* d_query, int64_t d_query_stride, T* d_score,
                          T* d_logits, const Window& w, int64_t batch, int64_t capacity,
                          int64_t steps, int64_t hidden) {
  const int64_t width = w.width();
  for (int64_t b = 0; b < batch; ++b) {
    const T* ds_b = ds + b * hidden;
    const T* w_b = weights + b * width;
    T* dl = d_logits + b * width;
    T weighted = 0;
    for (int64_t i = 0; i < width; ++i) {
      const T weight = w_b[i];
      if (weight == T(0)) {
        continue;
      }
      const T* m = window_row(memory, chunk, b, i, w, capacity, steps, hidden);
      T* dm = window_row(d_memory, d_chunk, b, i, w, capacity, steps, hidden);
      const T dot = dot_and_add(ds_b, m, weight, dm, hidden);
      dl[i] = dot;
      weighted += dot * weight;
    }
    T* dq = d_query + b * d_query_stride;
    T* dsc = d_score + b * hidden;
    #pragma omp simd
    for (int64_t h = 0; h < hidden; ++h) {
      dq[h] = 0;
    }
    for (int64_t i = 0; i < width; ++i) {
      if (w_b[i] == T(0)) {
        continue;
      }
      const T d_logit = w_b[i] * (dl[i] - weighted);
      const T* e_i = e + (b * width + i) * hidden;
      T* dk = window_row(d_keys, d_chunk_keys, b, i, w, capacity, steps, hidden);
      #pragma omp simd
      for (int64_t h = 0; h < hidden; ++h) {
        const T dp = d_logit * (T(1) - e_i[h]) * e_i[h];
        dq[h] += dp;
        dk[h] += T(2) * score[h] * dp;
        dsc[h] += d_logit * e_i[h];
      }
    }
    #pragma omp simd
    for (int64_t h = 0; h < hidden; ++h) {
      dq[h] *= score[h];
    }
  }
}

std::tuple<Tensor, Tensor> full_backward(
    const Tensor& g_y_or_empty, const Tensor& g_c_or_empty, const Tensor& resets,
    const Tensor& recurrent, const Tensor& key, const Tensor& score, const Tensor& memory,
    const Tensor& chunk, const Tensor& e_block, const Tensor& w_block, int64_t n_in,
    const Tensor& d_chunk, const Tensor& d_chunk_keys, const Tensor& d_memory,
    const Tensor& d_keys, const Tensor& d_score_rows, const Tensor& dz,
    const Tensor& d_logits, const Tensor& dc_buffers,
    const Tensor& act, const Tensor& partner, bool onednn) {
  const int64_t steps = dz.size(0), batch = dz.size(1), hidden = key.size(0);
  const int64_t capacity = memory.size(1), gates = 4 * hidden;
  const std::vector<bool> any_reset = reset_steps(resets);
  const Base base{true, true, act, partner, Tensor()};
  const Product recurrent_product(recurrent, onednn), key_product(key, onednn);
  const bool has_g_y = g_y_or_empty.numel() > 0;
  std::vector<int64_t> e_offsets(steps), w_offsets(steps);
  int64_t e_offset = 0, w_offset = 0;
  for (int64_t k = 0; k < steps; ++k) {
    const int64_t width = window(k, n_in, capacity).width();
    e_offsets[k] = e_offset;
    w_offsets[k] = w_offset;
    e_offset += batch * width * hidden;
    w_offset += batch * width;
  }
  Tensor ds = has_g_y ? g_y_or_empty[steps - 1].contiguous()
                      : at::zeros({batch, hidden}, key.options());
  Tensor dc = g_c_or_empty.numel() > 0 ? g_c_or_empty : Tensor();
  for (int64_t k = steps - 1; k >= 0; --k) {
    const Window w = window(k, n_in, capacity);
    Tensor dz_k = dz[k];
    AT_DISPATCH_FLOATING_TYPES(key.scalar_type(), "full_attend_backward", [&] {
      full_attend_backward<scalar_t>(
          ds.data_ptr<scalar_t>(), w_block.data_ptr<scalar_t>() + w_offsets[k],
          e_block.data_ptr<scalar_t>() + e_offsets[k], score.data_ptr<scalar_t>(),
          memory.data_ptr<scalar_t>(), chunk.data_ptr<scalar_t>(),
          d_memory.data_ptr<scalar_t>(), d_keys.data_ptr<scalar_t>(),
          d_chunk.data_ptr<scalar_t>(), d_chunk_keys.data_ptr<scalar_t>(),
          dz_k.data_ptr<scalar_t>() + gates, dz_k.stride(0), d_score_rows.data_ptr<scalar_t>(),
          d_logits.data_ptr<scalar_t>(), w, batch, capacity, steps, hidden);
    });
    // Every read of h_k happens at steps ≥ k, so its gradient is complete here.
    const Tensor dh = key_product(ds.add(d_chunk.select(1, k)), d_chunk_keys.select(1, k));
    const Tensor dz_base = dz_k.narrow(1, 0, gates).view({batch, 4, hidden});
    dc = base.backward(k, chunk.select(1, k), dh, dc, dz_base,
                       dc_buffers[k % 2].view({batch, hidden}));
    const bool carried = has_g_y && k > 0;
    if (any_reset[k]) {
      const Tensor reset = resets[k].view({batch, 1});
      ds = reset_where(recurrent_product(Tensor(), dz_k), reset, 0.0, true);
      if (carried) {
        ds.add_(g_y_or_empty[k - 1]);
      }
      if (dc.defined()) {
        dc = reset_where(dc, reset);
      }
    } else if (carried) {
      ds = recurrent_product(g_y_or_empty[k - 1], dz_k);
    } else {
      ds = recurrent_product(Tensor(), dz_k);
    }
  }
  return {ds, dc.defined() ? dc.clone() : at::empty({0}, key.options())};
}

// MemLSTM's traces in slot order (see _full_forward): the attention each slot's state received
// at each step, and the episode step each slot holds (-1 when empty), from the weights over the
// chunk's entries (T, B, n_in + T), the episode time (T, B), the step each item's episode
// started in the chunk (-1 if before it) and the incoming valid slots.
std::tuple<Tensor, Tensor> full_traces(const Tensor& weights_full, const Tensor& time,
                                       const Tensor& episode_start, const Tensor& valid,
                                       int64_t n_in, int64_t capacity) {
  const int64_t steps = time.size(0), batch = time.size(1), columns = n_in + steps;
  Tensor attention = at::zeros({steps, batch, capacity}, weights_full.options());
  Tensor slot_time = at::empty({steps, batch, capacity}, time.options());
  const Tensor time_rows = time.contiguous(), start_rows = episode_start.contiguous();
  const Tensor valid_rows = valid.contiguous();
  const int64_t* t_data = time_rows.data_ptr<int64_t>();
  const int64_t* start = start_rows.data_ptr<int64_t>();
  const bool* valid_data = valid_rows.data_ptr<bool>();
  int64_t* slot_data = slot_time.data_ptr<int64_t>();
  AT_DISPATCH_FLOATING_TYPES(weights_full.scalar_type(), "full_traces", [&] {
    const scalar_t* w = weights_full.data_ptr<scalar_t>();
    scalar_t* a = attention.data_ptr<scalar_t>();
    for (int64_t k = 0; k < steps; ++k) {
      const Window win = window(k, n_in, capacity);
      for (int64_t b = 0; b < batch; ++b) {
        const scalar_t* w_kb = w + (k * batch + b) * columns;
        scalar_t* a_kb = a + (k * batch + b) * capacity;
        for (int64_t i = 0; i < win.incoming; ++i) {
          a_kb[i] += w_kb[i];
        }
        for (int64_t j = win.first; j < win.end; ++j) {
          const int64_t slot = ((t_data[j * batch + b] % capacity) + capacity) % capacity;
          a_kb[slot] += w_kb[n_in + j];
        }
      }
    }
  });
  for (int64_t k = 0; k < steps; ++k) {
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t t_kb = t_data[k * batch + b], start_kb = start[k * batch + b];
      const int64_t seen = k + 1 - std::max<int64_t>(start_kb, 0);
      int64_t* out = slot_data + (k * batch + b) * capacity;
      int64_t age = ((t_kb % capacity) + capacity) % capacity;  // (t - j) mod capacity at j = 0
      for (int64_t j = 0; j < capacity; ++j) {
        const bool held = age < seen || (start_kb < 0 && valid_data[b * capacity + j]);
        out[j] = held ? t_kb - age : -1;
        age = age == 0 ? capacity - 1 : age - 1;
      }
    }
  }
  return {attention, slot_time};
}
