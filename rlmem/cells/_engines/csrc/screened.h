// Relevancy screening's chunk engine, forward and backward (rlmem.cells._engines.screened).
//
// Part of the one translation unit of loops.cpp, which includes this file inside its anonymous
// namespace after the ATen headers (one unit, as before the split, so that the compiler sees
// and optimises the code as it did); not a standalone header.

// The slots are rows of slot_data (B, ν+ρ+1, width): [m_i, 2 U_a m_i, score, mask, rank, episode
// step, padding], S as a ring (its oldest state in slot k mod ν at step k), then R, then a scratch
// slot that takes the write of a candidate that does not enter R.

// The screening C(i): the state leaving S from slot p enters R at the lowest-ranked slot (a free
// one ranks -inf, the first lowest wins) if it ranks above it, else goes to the scratch slot.
// Records the target row, what it held (evicted, if not null) and moves the candidate there.
template <typename T>
void screen(T* slots_data, int64_t* targets, T* evicted, int64_t p, int64_t nu, int64_t slots,
            int64_t width, int64_t wide, int64_t batch) {
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t first_row = b * (slots + 1);
    T* rows = slots_data + first_row * width;
    int64_t lowest = nu;
    for (int64_t i = nu + 1; i < slots; ++i) {
      if (rows[i * width + wide + 2] < rows[lowest * width + wide + 2]) {
        lowest = i;
      }
    }
    const int64_t target = rows[p * width + wide + 2] > rows[lowest * width + wide + 2]
                               ? lowest : slots;
    targets[b] = first_row + target;
    if (evicted != nullptr) {
      std::copy_n(rows + target * width, width, evicted + b * width);
    }
    std::copy_n(rows + p * width, width, rows + target * width);
  }
}

// The new state's meta data into slot p, e_i = σ(2 U_a m_i + 2 W_a s + 2 b_a) for every slot,
// and the logits e_i · 2 v_a plus the slots' masks into attention (B, ν+ρ).
template <typename T>
void screened_pre(T* slots_data, const T* query, int64_t query_stride, const T* entering, T* e,
                  const T* score, T* attention, int64_t p, int64_t slots, int64_t width,
                  int64_t hidden, int64_t batch) {
  for (int64_t b = 0; b < batch; ++b) {
    T* rows = slots_data + b * (slots + 1) * width;
    std::copy_n(entering + b * 4, 4, rows + p * width + 2 * hidden);
    const T* q = query + b * query_stride;
    for (int64_t i = 0; i < slots; ++i) {
      const T* key = rows + i * width + hidden;
      T* out = e + (b * slots + i) * hidden;
      #pragma omp simd
      for (int64_t h = 0; h < hidden; ++h) {
        out[h] = key[h] + q[h];
      }
      attention[b * slots + i] = sigmoid_dot(out, score, hidden) + rows[i * width + 2 * hidden + 1];
    }
  }
}

// The softmax of the logits in attention over the slots, s = h + Σ_i w_i m_i, the attention
// added to the scores (and ranks) of S, and the slots' meta data recorded for the traces.
// Normalised screening adds each weight times |M_t| / ν, |M_t| the slots holding a state.
template <typename T>
void screened_attend(T* slots_data, T* attention, T* history, T* y, int64_t p, int64_t nu,
                     int64_t slots, int64_t width, int64_t hidden, int64_t batch,
                     bool normalised) {
  const int64_t wide = 2 * hidden;
  for (int64_t b = 0; b < batch; ++b) {
    T* rows = slots_data + b * (slots + 1) * width;
    T* w = attention + b * slots;
    softmax_read(w, slots, rows + p * width, y + b * hidden, hidden,
                 [&](int64_t i) { return rows + i * width; });
    T share = T(1);
    if (normalised) {
      int64_t held = 0;
      for (int64_t i = 0; i < slots; ++i) {
        held += rows[i * width + wide + 1] == T(0);
      }
      share = static_cast<T>(held) / static_cast<T>(nu);
    }
    for (int64_t i = 0; i < nu; ++i) {
      const T received = normalised ? w[i] * share : w[i];
      rows[i * width + wide] += received;
      rows[i * width + wide + 2] += received;
    }
    for (int64_t i = 0; i < slots; ++i) {
      std::copy_n(rows + i * width + wide, 4, history + (b * slots + i) * 4);
    }
  }
}

// The forward loop over the buffers _screened_forward prepared. Returns the slots as they were
// before each reset (one clone per step that resets some item, in order), when saving.
std::vector<Tensor> screened_forward(
    const Tensor& xp, const Tensor& s0, const Tensor& resets, const Tensor& recurrent_t,
    const Tensor& key_t, const Tensor& score_vector, const Tensor& slot_data,
    const Tensor& z_in, const Tensor& z, const Tensor& entering, const Tensor& e,
    const Tensor& attention, const Tensor& history, const Tensor& targets,
    const Tensor& evicted, const Tensor& y, const Tensor& act, const Tensor& partner,
    const Tensor& minus_one, int64_t nu, bool lstm, bool normalised, double uniform_share,
    bool save, bool onednn) {
  const int64_t steps = xp.size(0), batch = s0.size(0), hidden = s0.size(1);
  const int64_t slots = attention.size(2), gates = lstm ? 4 * hidden : hidden;
  const int64_t wide = 2 * hidden, width = slot_data.size(2);
  const double minus_inf = -std::numeric_limits<double>::infinity();
  const std::vector<bool> any_reset = reset_steps(resets);
  const Base base{lstm, save, act, partner, minus_one};
  const Product recurrent_product(recurrent_t, onednn), key_product(key_t, onednn);
  const Tensor mask = slot_data.select(2, wide + 1), rank = slot_data.select(2, wide + 2);
  Tensor z_in_base = z_in.narrow(1, 0, gates);
  const Tensor z_base = lstm ? z.narrow(1, 0, gates).view({batch, 4, hidden})
                             : z.narrow(1, 0, gates);
  // Slot p's columns of states and keys, (B, H) views made once rather than at every step.
  std::vector<Tensor> contents, keys;
  for (int64_t p = 0; p < nu; ++p) {
    const Tensor slot_p = slot_data.select(1, p);
    contents.push_back(slot_p.narrow(1, 0, hidden));
    keys.push_back(slot_p.narrow(1, hidden, hidden));
  }
  const Tensor xp_rows = xp.contiguous();
  std::vector<Tensor> before_reset;
  Tensor s = s0;
  Tensor z_out = z;
  for (int64_t k = 0; k < steps; ++k) {
    const int64_t p = k % nu;
    if (any_reset[k]) {
      const Tensor reset = resets[k].view({batch, 1});
      s = reset_where(s, reset);
      base.reset(k, reset);
      if (save) {
        before_reset.push_back(slot_data.clone());
      }
      reset_where(slot_data, reset.unsqueeze(2), 0.0, true);
      reset_where(mask, reset, minus_inf, true);
      reset_where(rank, reset, minus_inf, true);
      if (normalised) {  // a free slot of R ranks at the uniform share
        reset_where(rank.narrow(1, nu, slots - nu), reset, uniform_share, true);
      }
    }
    AT_DISPATCH_FLOATING_TYPES(xp.scalar_type(), "screened_input", [&] {  // z's input terms
      using T = scalar_t;
      const T* x_k = xp_rows.data_ptr<T>() + k * xp_rows.stride(0);
      for (int64_t b = 0; b < batch; ++b) {
        std::copy_n(x_k + b * gates, gates, z_in_base.data_ptr<T>() + b * z_in.stride(0));
      }
    });
    recurrent_product.into(z_out, z_in, s);
    // h_{t-ν} leaves S from slot p and is screened into R (see relevancy.screen).
    AT_DISPATCH_FLOATING_TYPES(xp.scalar_type(), "screen", [&] {
      using T = scalar_t;
      screen<T>(slot_data.data_ptr<T>(), targets.data_ptr<int64_t>() + k * batch,
                save ? evicted.data_ptr<T>() + k * evicted.stride(0) : nullptr, p, nu, slots,
                width, wide, batch);
    });
    // h_t enters S in the slot just vacated.
    base.forward(k, z_base, contents[p]);
    key_product.into(keys[p], Tensor(), contents[p]);
    AT_DISPATCH_FLOATING_TYPES(xp.scalar_type(), "screened_attend", [&] {
      using T = scalar_t;
      T* attention_k = attention.data_ptr<T>() + k * attention.stride(0);
      screened_pre<T>(slot_data.data_ptr<T>(), z.data_ptr<T>() + gates, z.stride(0),
                      entering.data_ptr<T>() + k * entering.stride(0),
                      e.data_ptr<T>() + (save ? k : 0) * e.stride(0), score_vector.data_ptr<T>(),
                      attention_k, p, slots, width, hidden, batch);
      screened_attend<T>(slot_data.data_ptr<T>(), attention_k,
                         history.data_ptr<T>() + k * history.stride(0),
                         y.data_ptr<T>() + k * y.stride(0), p, nu, slots, width, hidden, batch,
                         normalised);
    });
    s = y[k];
  }
  return before_reset;
}

// The attention's backward at one step, over the slots as step k saw them: d_weights_i = ds·m_i,
// the softmax's backward (into d_logits), and the gradients of what the slots hold
// (grad rows [m_i, 2 U_a m_i, score]: d m_i += w_i ds, d(2 U_a m_i) += 2 v_a ⊙ dp_i) and of the
// query (Σ_i 2 v_a ⊙ dp_i), with dp_i = dlogit_i σ'(e_i).
template <typename T>
void screened_attend_backward(const T* ds, const T* weights, const T* e, const T* score,
                              const T* slots_data, T* grad, T* d_logits, T* d_query,
                              int64_t d_query_stride, int64_t slots, int64_t width,
                              int64_t hidden, int64_t batch) {
  const int64_t grad_width = 2 * hidden + 1;
  for (int64_t b = 0; b < batch; ++b) {
    const T* ds_b = ds + b * hidden;
    const T* w_b = weights + b * slots;
    const T* rows = slots_data + b * (slots + 1) * width;
    T* grad_rows = grad + b * (slots + 1) * grad_width;
    T* dl = d_logits + b * slots;
    T weighted = 0;
    for (int64_t i = 0; i < slots; ++i) {
      const T* m = rows + i * width;
      T* dm = grad_rows + i * grad_width;
      const T weight = w_b[i];
      T dot = 0;
      #pragma omp simd reduction(+ : dot)
      for (int64_t h = 0; h < hidden; ++h) {
        dot += ds_b[h] * m[h];
        dm[h] += weight * ds_b[h];
      }
      dl[i] = dot;
      weighted += dot * weight;
    }
    T* dq = d_query + b * d_query_stride;
    #pragma omp simd
    for (int64_t h = 0; h < hidden; ++h) {
      dq[h] = 0;
    }
    for (int64_t i = 0; i < slots; ++i) {
      dl[i] = w_b[i] * (dl[i] - weighted);
      const T d_logit = dl[i];
      const T* e_i = e + (b * slots + i) * hidden;
      T* dk = grad_rows + i * grad_width + hidden;
      #pragma omp simd
      for (int64_t h = 0; h < hidden; ++h) {
        const T dp = d_logit * (T(1) - e_i[h]) * e_i[h];
        dq[h] += dp;
        dk[h] += dp * score[h];
      }
    }
    #pragma omp simd
    for (int64_t h = 0; h < hidden; ++h) {
      dq[h] *= score[h];
    }
  }
}

// Undoes the writes of step k, to the gradients and to the slots: h_k (copied into h) leaves
// slot p with its gradient, the candidate comes back to p from its target with the gradient it
// gathered there, and the target gets back what it held (evicted) and no gradient.
template <typename T>
void screened_undo(T* slots_data, T* grad, const int64_t* targets, const T* evicted, T* h,
                   int64_t p, int64_t slots, int64_t width, int64_t hidden, int64_t batch) {
  const int64_t grad_width = 2 * hidden + 1;
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t row_p = b * (slots + 1) + p, target = targets[b];
    std::copy_n(grad + target * grad_width, grad_width, grad + row_p * grad_width);
    std::fill_n(grad + target * grad_width, grad_width, T(0));
    std::copy_n(slots_data + row_p * width, hidden, h + b * hidden);
    std::copy_n(slots_data + target * width, width, slots_data + row_p * width);
    std::copy_n(evicted + b * width, width, slots_data + target * width);
  }
}

// The backward loop of _screened_backward. grad (B, ν+ρ+1, 2H+1) holds the gradient of what
// each slot holds; slot_data the forward's final slots, restored step by step. Returns the
// gradients of s0 and c0 (undefined without the LSTM or without a gradient).
std::tuple<Tensor, Tensor> screened_backward(
    const Tensor& g_y_or_empty, const Tensor& g_c_or_empty, const Tensor& resets,
    const Tensor& recurrent, const Tensor& key, const Tensor& score_vector,
    const Tensor& attention, const Tensor& e, const Tensor& targets, const Tensor& evicted,
    const std::vector<Tensor>& before_reset, const Tensor& slot_data, const Tensor& grad,
    const Tensor& dz, const Tensor& d_logits, const Tensor& d_keys_h, const Tensor& h_buffer,
    const Tensor& dc_buffers, const Tensor& act, const Tensor& partner, int64_t nu,
    bool lstm, bool onednn) {
  const int64_t steps = attention.size(0), batch = attention.size(1), slots = attention.size(2);
  const int64_t hidden = key.size(0), gates = lstm ? 4 * hidden : hidden;
  const std::vector<bool> any_reset = reset_steps(resets);
  const Base base{lstm, true, act, partner, Tensor()};
  const Product recurrent_product(recurrent, onednn), key_product(key, onednn);
  const bool has_g_y = g_y_or_empty.numel() > 0;
  const int64_t width = slot_data.size(2);
  Tensor ds = has_g_y ? g_y_or_empty[steps - 1].contiguous()
                      : at::zeros({batch, hidden}, key.options());
  Tensor dc = g_c_or_empty.numel() > 0 ? g_c_or_empty : Tensor();
  // Made once rather than at every step: the two (B, H) views of c's gradient the steps
  // alternate between, and the scratch of dh's incoming part, ds + the gradient of m_p.
  const Tensor dc_views[2] = {dc_buffers[0].view({batch, hidden}),
                              dc_buffers[1].view({batch, hidden})};
  const Tensor dh_in = at::empty({batch, hidden}, key.options());
  const int64_t grad_width = grad.size(2);
  int64_t reset_index = static_cast<int64_t>(before_reset.size());
  for (int64_t k = steps - 1; k >= 0; --k) {
    const int64_t p = k % nu;
    Tensor dz_k = dz[k];
    Tensor d_keys_k = d_keys_h[k];
    if (!ds.is_contiguous()) {
      ds = ds.contiguous();
    }
    AT_DISPATCH_FLOATING_TYPES(key.scalar_type(), "screened_attend_backward", [&] {
      using T = scalar_t;
      screened_attend_backward<T>(
          ds.data_ptr<T>(), attention.data_ptr<T>() + k * attention.stride(0),
          e.data_ptr<T>() + k * e.stride(0), score_vector.data_ptr<T>(),
          slot_data.data_ptr<T>(), grad.data_ptr<T>(),
          d_logits.data_ptr<T>() + k * d_logits.stride(0), dz_k.data_ptr<T>() + gates,
          dz_k.stride(0), slots, width, hidden, batch);
      // h_k's key gradient, and dh's incoming part: ds + the gradient slot p gathered for m_p
      const T *rows = grad.data_ptr<T>(), *ds_rows = ds.data_ptr<T>();
      T *d_keys = d_keys_k.data_ptr<T>(), *incoming = dh_in.data_ptr<T>();
      for (int64_t b = 0; b < batch; ++b) {
        const T* grad_p = rows + (b * (slots + 1) + p) * grad_width;
        std::copy_n(grad_p + hidden, hidden, d_keys + b * hidden);
        for (int64_t h = 0; h < hidden; ++h) {
          incoming[b * hidden + h] = ds_rows[b * hidden + h] + grad_p[h];
        }
      }
    });
    const Tensor dh = key_product(dh_in, d_keys_k);
    // Undo the writes of step k: h_k leaves slot p with its gradient; the candidate comes back
    // to p with the gradient it gathered at its target, which held nothing before.
    Tensor h = h_buffer[k];
    AT_DISPATCH_FLOATING_TYPES(key.scalar_type(), "screened_undo", [&] {
      using T = scalar_t;
      screened_undo<T>(slot_data.data_ptr<T>(), grad.data_ptr<T>(),
                       targets.data_ptr<int64_t>() + k * batch,
                       evicted.data_ptr<T>() + k * evicted.stride(0), h.data_ptr<T>(), p, slots,
                       width, hidden, batch);
    });
    if (any_reset[k]) {
      slot_data.copy_(before_reset[--reset_index]);
    }
    dc = base.backward(k, h, dh, dc, dz_k, dc_views[k % 2]);
    const bool carried = has_g_y && k > 0;
    if (any_reset[k]) {
      const Tensor reset = resets[k].view({batch, 1});
      ds = reset_where(recurrent_product(Tensor(), dz_k), reset, 0.0, true);
      if (carried) {
        ds.add_(g_y_or_empty[k - 1]);
      }
      reset_where(grad, reset.unsqueeze(2), 0.0, true);
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
