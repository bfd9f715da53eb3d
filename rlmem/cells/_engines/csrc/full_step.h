// MemLSTM's rollout step without autograd (rlmem.cells._engines.full_attention.full_step):
// MemLSTM.step (in the doubled form) over the used slots.
//
// Part of the one translation unit of loops.cpp, which includes this file inside its anonymous
// namespace after the ATen headers (one unit, as before the split, so that the compiler sees
// and optimises the code as it did); not a standalone header.

// Over the used slots [0, used) of (B, capacity, H) keys U_a m: the logits
// σ(2 W_a s + 2 b_a + 2 U_a m_i) · 2 v_a into attention (B, capacity), -inf on an invalid slot
// (not computed: used is the batch's longest episode, a shorter one's slots beyond it are
// empty); e (H numbers) is scratch.
template <typename T>
void full_step_pre(const T* query, const T* keys, const T* score, const bool* valid, T* e,
                   T* attention, int64_t used, int64_t capacity, int64_t hidden,
                   int64_t batch) {
  for (int64_t b = 0; b < batch; ++b) {
    const T* q = query + b * hidden;
    for (int64_t i = 0; i < used; ++i) {
      if (!valid[b * capacity + i]) {
        attention[b * capacity + i] = -std::numeric_limits<T>::infinity();
        continue;
      }
      const T* key = keys + (b * capacity + i) * hidden;
      #pragma omp simd
      for (int64_t h = 0; h < hidden; ++h) {
        e[h] = q[h] + T(2) * key[h];
      }
      attention[b * capacity + i] = sigmoid_dot(e, score, hidden);
    }
  }
}

// The softmax of the logits over the used slots in attention (B, capacity), in place, and
// s = h + Σ_i w_i m_i.
template <typename T>
void full_step_attend(const T* memory, const T* h, T* attention, T* s, int64_t used,
                      int64_t capacity, int64_t hidden, int64_t batch) {
  for (int64_t b = 0; b < batch; ++b) {
    softmax_read(attention + b * capacity, used, h + b * hidden, s + b * hidden, hidden,
                 [&](int64_t i) { return memory + (b * capacity + i) * hidden; });
  }
}

// One step of MemLSTM attending over the slots [0, used): the caller guarantees that no batch
// item holds a state beyond them. x_t (B, 4H) is a step of project_input; recurrent (4H + H, H)
// is [W_hh; 2 W_a] (g rows doubled), key 2 U_a, score 2 v_a. s, c, t and valid are already
// reset where reset (B,) is true; memory and keys are not: those items' rows are emptied here.
// memory_new and keys_new (B, capacity, H) receive the new memory and keys (blocks the caller
// recycles: fresh ones of that size cost page faults), and hold zeros from slot `used` on.
// Returns s, c, t, valid, the attention (B, capacity) and the slot times.
std::vector<Tensor> full_step(const Tensor& x_t, const Tensor& s, const Tensor& c,
                              const Tensor& t, const Tensor& memory, const Tensor& keys,
                              const Tensor& valid, const Tensor& reset,
                              const Tensor& recurrent, const Tensor& key,
                              const Tensor& score, const Tensor& query_bias, int64_t used,
                              const Tensor& memory_new, const Tensor& keys_new) {
  const int64_t batch = s.size(0), hidden = s.size(1), capacity = memory.size(1);
  const int64_t gates = 4 * hidden;
  const Tensor recurrent_t = recurrent.t();
  const Tensor z = at::addmm(x_t, s, recurrent_t.narrow(1, 0, gates));
  const Tensor query = at::addmm(query_bias, s, recurrent_t.narrow(1, gates, hidden));
  // The LSTM step in the doubled form (LSTMBase.step_doubled).
  const Tensor act = z.sigmoid();
  const Tensor i = act.narrow(1, 0, hidden), f = act.narrow(1, hidden, hidden),
               g = act.narrow(1, 2 * hidden, hidden), o = act.narrow(1, 3 * hidden, hidden);
  const Tensor c_new = f.mul(c).add_(i.mul(g.mul(2.0).sub_(1.0)));
  const Tensor h = o.mul(c_new.mul(2.0).sigmoid_().mul_(2.0).sub_(1.0));
  // Slots from `used` on are empty, hence zero, in memory and keys and in the blocks the
  // caller passes (Workspace.take_unshared with rows=used): only the slots in use are copied,
  // O(t) per step rather than O(capacity); an item that resets gets zeros instead.
  const Tensor memory_rows = memory.contiguous(), keys_rows = keys.contiguous();
  const Tensor reset_rows = reset.contiguous();
  AT_DISPATCH_FLOATING_TYPES(s.scalar_type(), "full_step_copy", [&] {
    using T = scalar_t;
    const bool* resets = reset_rows.data_ptr<bool>();
    const int64_t item = capacity * hidden, span = used * hidden;
    for (const auto& [from, to] : {std::pair{&memory_rows, &memory_new},
                                   std::pair{&keys_rows, &keys_new}}) {
      const T* source = from->data_ptr<T>();
      T* target = to->data_ptr<T>();
      for (int64_t b = 0; b < batch; ++b) {
        if (resets[b]) {
          std::fill_n(target + b * item, span, T(0));
        } else {
          std::copy_n(source + b * item, span, target + b * item);
        }
      }
    }
  });
  const Tensor new_keys = at::mm(h, key.mul(0.5).t());
  const Tensor steps = t.contiguous(), rows_h = h.contiguous();
  const Tensor valid_new = valid.clone(at::MemoryFormat::Contiguous);
  Tensor slot_time = at::empty({batch, capacity}, t.options());
  Tensor pre = at::empty({hidden}, s.options());
  Tensor attention = at::zeros({batch, capacity}, s.options());
  Tensor s_new = at::empty({batch, hidden}, s.options());
  const Tensor queries = query.contiguous();
  const int64_t* step = steps.data_ptr<int64_t>();
  bool* valid_rows = valid_new.data_ptr<bool>();
  int64_t* times = slot_time.data_ptr<int64_t>();
  AT_DISPATCH_FLOATING_TYPES(s.scalar_type(), "full_step_attend", [&] {
    using T = scalar_t;
    // h_t and U_a h_t go into slot t mod capacity; slot j then holds the most recent step
    // ≡ j (mod capacity) that is ≤ t (-1 when empty), for the traces.
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t slot = step[b] % capacity, row = b * capacity + slot;
      std::copy_n(rows_h.data_ptr<T>() + b * hidden, hidden,
                  memory_new.data_ptr<T>() + row * hidden);
      std::copy_n(new_keys.data_ptr<T>() + b * hidden, hidden,
                  keys_new.data_ptr<T>() + row * hidden);
      valid_rows[row] = true;
      int64_t back = slot;  // (t - j) mod capacity, from j = 0 on
      for (int64_t j = 0; j < capacity; ++j) {
        times[b * capacity + j] = valid_rows[b * capacity + j] ? step[b] - back : -1;
        back = back == 0 ? capacity - 1 : back - 1;
      }
    }
    // Additive attention over the used slots (AdditiveAttention.attend_doubled, key_scale 2).
    full_step_pre<T>(queries.data_ptr<T>(), keys_new.data_ptr<T>(), score.data_ptr<T>(),
                     valid_rows, pre.data_ptr<T>(), attention.data_ptr<T>(), used, capacity,
                     hidden, batch);
    full_step_attend<T>(memory_new.data_ptr<T>(), rows_h.data_ptr<T>(),
                        attention.data_ptr<T>(), s_new.data_ptr<T>(), used, capacity, hidden,
                        batch);
  });
  return {s_new, c_new, t.add(1), valid_new, attention, slot_time};
}
