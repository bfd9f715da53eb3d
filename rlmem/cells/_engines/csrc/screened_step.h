// Relevancy screening's rollout step without autograd
// (rlmem.cells._engines.screened.screened_step): RelevancyScreening.step_with, Algorithm 1's
// screening.
//
// Part of the one translation unit of loops.cpp, which includes this file inside its anonymous
// namespace after the ATen headers (one unit, as before the split, so that the compiler sees
// and optimises the code as it did); not a standalone header.

// The state's memory after the screening and the new state: R with the state leaving S (slot 0,
// the oldest) written over its lowest-scored slot if it beats it (a free slot scores -inf, the
// first lowest wins), then S shifted by one with h_t last. memory (B, ν+ρ, H) gets [S, R].
template <typename T>
void screen_step(const T* short_in, const T* short_score, const bool* short_valid,
                 const int64_t* short_time, const T* h, const int64_t* t, T* relevant,
                 T* relevant_score, bool* relevant_valid, int64_t* relevant_time, T* short_out,
                 T* short_score_out, bool* short_valid_out, int64_t* short_time_out, T* memory,
                 int64_t nu, int64_t rho, int64_t hidden, int64_t batch) {
  for (int64_t b = 0; b < batch; ++b) {
    T* score_b = relevant_score + b * rho;
    bool* valid_b = relevant_valid + b * rho;
    int64_t lowest = 0;
    T lowest_score = valid_b[0] ? score_b[0] : -std::numeric_limits<T>::infinity();
    for (int64_t j = 1; j < rho; ++j) {
      const T value = valid_b[j] ? score_b[j] : -std::numeric_limits<T>::infinity();
      if (value < lowest_score) {
        lowest_score = value;
        lowest = j;
      }
    }
    if (short_valid[b * nu] && short_score[b * nu] > lowest_score) {
      std::copy_n(short_in + b * nu * hidden, hidden, relevant + (b * rho + lowest) * hidden);
      score_b[lowest] = short_score[b * nu];
      valid_b[lowest] = true;
      relevant_time[b * rho + lowest] = short_time[b * nu];
    }
    std::copy_n(short_in + (b * nu + 1) * hidden, (nu - 1) * hidden, short_out + b * nu * hidden);
    std::copy_n(h + b * hidden, hidden, short_out + (b * nu + nu - 1) * hidden);
    for (int64_t i = 0; i + 1 < nu; ++i) {
      short_score_out[b * nu + i] = short_score[b * nu + i + 1];
      short_valid_out[b * nu + i] = short_valid[b * nu + i + 1];
      short_time_out[b * nu + i] = short_time[b * nu + i + 1];
    }
    short_score_out[b * nu + nu - 1] = 0;
    short_valid_out[b * nu + nu - 1] = true;
    short_time_out[b * nu + nu - 1] = t[b];
    T* memory_b = memory + b * (nu + rho) * hidden;
    std::copy_n(short_out + b * nu * hidden, nu * hidden, memory_b);
    std::copy_n(relevant + b * rho * hidden, rho * hidden, memory_b + nu * hidden);
  }
}

// Attention over [S, R] from e = σ(2 W_a s + 2 b_a + 2 U_a m_i) (B, ν+ρ, H): the weights (into
// attention), s = h + read, the weights added to the scores of S, and the slot times.
template <typename T>
void screened_step_attend(const T* e, const T* score, const T* memory, const T* h,
                          const bool* short_valid, const bool* relevant_valid,
                          const int64_t* short_time, const int64_t* relevant_time, T* attention,
                          T* s, T* short_score, int64_t* slot_time, int64_t nu, int64_t rho,
                          int64_t hidden, int64_t batch) {
  const int64_t slots = nu + rho;
  for (int64_t b = 0; b < batch; ++b) {
    T* w = attention + b * slots;
    for (int64_t i = 0; i < slots; ++i) {
      const bool valid = i < nu ? short_valid[b * nu + i] : relevant_valid[b * rho + i - nu];
      const T* e_i = e + (b * slots + i) * hidden;
      T logit = 0;
      #pragma omp simd reduction(+ : logit)
      for (int64_t k = 0; k < hidden; ++k) {
        logit += e_i[k] * score[k];
      }
      w[i] = valid ? logit : -std::numeric_limits<T>::infinity();
      slot_time[b * slots + i] =
          valid ? (i < nu ? short_time[b * nu + i] : relevant_time[b * rho + i - nu]) : -1;
    }
    softmax_read(w, slots, h + b * hidden, s + b * hidden, hidden,
                 [&](int64_t i) { return memory + (b * slots + i) * hidden; });
    for (int64_t i = 0; i < nu; ++i) {
      short_score[b * nu + i] += w[i];
    }
  }
}

// One step of ReLSTM (c defined) or ReLRNN without autograd, from x_t (B, G) of project_input,
// the state's fields and the engine's weights. Returns the new s, c (empty for the RNN), t, S
// and R fields, and the traces: attention (B, ν+ρ) and slot_time (B, ν+ρ).
std::vector<Tensor> screened_step(const Tensor& x_t, const Tensor& s, const Tensor& c,
                                  const Tensor& t, const Tensor& short_in,
                                  const Tensor& short_score, const Tensor& short_valid,
                                  const Tensor& short_time, const Tensor& relevant_in,
                                  const Tensor& relevant_score_in,
                                  const Tensor& relevant_valid_in,
                                  const Tensor& relevant_time_in, const Tensor& recurrent,
                                  const Tensor& key, const Tensor& score,
                                  const Tensor& query_bias) {
  const int64_t batch = s.size(0), hidden = s.size(1), gates = x_t.size(1);
  const int64_t nu = short_in.size(1), rho = relevant_in.size(1);
  const bool lstm = c.numel() > 0;
  const Tensor recurrent_t = recurrent.t();
  const Tensor z = at::addmm(x_t, s, recurrent_t.narrow(1, 0, gates));
  const Tensor query = at::addmm(query_bias, s, recurrent_t.narrow(1, gates, hidden));
  Tensor h = at::empty({batch, hidden}, s.options());
  Tensor c_new = lstm ? at::empty({batch, hidden}, s.options()) : at::empty({0}, s.options());
  if (lstm) {
    Tensor act = z.sigmoid(), partner = at::empty({batch, 4, hidden}, s.options());
    partner.select(1, 1).copy_(c);
    AT_DISPATCH_FLOATING_TYPES(s.scalar_type(), "lstm_cell", [&] {
      lstm_cell<scalar_t>(act.data_ptr<scalar_t>(), partner.data_ptr<scalar_t>(),
                          c_new.data_ptr<scalar_t>(), hidden, batch, hidden);
    });
    partner.select(1, 3).sigmoid_();
    AT_DISPATCH_FLOATING_TYPES(s.scalar_type(), "lstm_output", [&] {
      lstm_output<scalar_t>(act.data_ptr<scalar_t>(), partner.data_ptr<scalar_t>(),
                            h.data_ptr<scalar_t>(), hidden, batch, hidden);
    });
  } else {
    at::sigmoid_out(h, z).mul_(2.0).sub_(1.0);
  }
  const Tensor short_rows = short_in.contiguous(), short_scores = short_score.contiguous();
  const Tensor short_valids = short_valid.contiguous(), short_times = short_time.contiguous();
  Tensor relevant = relevant_in.clone(at::MemoryFormat::Contiguous);
  Tensor relevant_score = relevant_score_in.clone(at::MemoryFormat::Contiguous);
  Tensor relevant_valid = relevant_valid_in.clone(at::MemoryFormat::Contiguous);
  Tensor relevant_time = relevant_time_in.clone(at::MemoryFormat::Contiguous);
  Tensor short_out = at::empty_like(short_rows), short_score_out = at::empty_like(short_scores);
  Tensor short_valid_out = at::empty_like(short_valids);
  Tensor short_time_out = at::empty_like(short_times);
  Tensor memory = at::empty({batch, nu + rho, hidden}, s.options());
  const Tensor t_rows = t.contiguous();
  AT_DISPATCH_FLOATING_TYPES(s.scalar_type(), "screen_step", [&] {
    using T = scalar_t;
    screen_step<T>(short_rows.data_ptr<T>(), short_scores.data_ptr<T>(),
                   short_valids.data_ptr<bool>(), short_times.data_ptr<int64_t>(),
                   h.data_ptr<T>(), t_rows.data_ptr<int64_t>(), relevant.data_ptr<T>(),
                   relevant_score.data_ptr<T>(), relevant_valid.data_ptr<bool>(),
                   relevant_time.data_ptr<int64_t>(), short_out.data_ptr<T>(),
                   short_score_out.data_ptr<T>(), short_valid_out.data_ptr<bool>(),
                   short_time_out.data_ptr<int64_t>(), memory.data_ptr<T>(), nu, rho, hidden,
                   batch);
  });
  Tensor e = at::matmul(memory, key.t());
  e.add_(query.unsqueeze(1)).sigmoid_();
  Tensor attention = at::empty({batch, nu + rho}, s.options());
  Tensor slot_time = at::empty({batch, nu + rho}, t.options());
  Tensor s_new = at::empty({batch, hidden}, s.options());
  AT_DISPATCH_FLOATING_TYPES(s.scalar_type(), "screened_step_attend", [&] {
    using T = scalar_t;
    screened_step_attend<T>(e.data_ptr<T>(), score.data_ptr<T>(), memory.data_ptr<T>(),
                            h.data_ptr<T>(), short_valid_out.data_ptr<bool>(),
                            relevant_valid.data_ptr<bool>(), short_time_out.data_ptr<int64_t>(),
                            relevant_time.data_ptr<int64_t>(), attention.data_ptr<T>(),
                            s_new.data_ptr<T>(), short_score_out.data_ptr<T>(),
                            slot_time.data_ptr<int64_t>(), nu, rho, hidden, batch);
  });
  return {s_new, c_new, t.add(1), short_out, short_score_out, short_valid_out, short_time_out,
          relevant, relevant_score, relevant_valid, relevant_time, attention, slot_time};
}
