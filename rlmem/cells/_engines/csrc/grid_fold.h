// The grid encoder's embedding, first convolution, ReLU and 2 × 2 max-pool as one table lookup,
// and its backward (rlmem.agents.grid_fold): not a time loop, but the one other place where the
// CPU spent its time in ATen calls far larger than their arithmetic.
//
// Part of the one translation unit of loops.cpp, which includes this file inside its anonymous
// namespace after the ATen headers; not a standalone header.
//
// Each cell of the grid holds C table rows (its object, colour and state indices, offset into
// one table); the convolution (kernel KH × KW, stride 1) of the embedded grid is linear in the
// embedding, so with the table U[o, r, :] = W_o E_r (o a kernel offset, r a row, built in
// Python) its output at (i, j) is
//   y[n, i, j, :] = b + Σ_{o=(dy,dx)} Σ_c U[o, rows[n, i+dy, j+dx, c], :],
// KH·KW·C additions of a row of F numbers, where the convolution multiplies F × (C·K) × KH·KW.
// Then z = max over each 2 × 2 window (stride 2, the last row or column dropped where H' or W'
// is odd) of ReLU(y), feature by feature; where = the window position of the maximum (the
// first in row order among equal ones, as torch's max-pool), -1 where z = 0.
// The backward adds each pooled feature's gradient into the rows its maximum read:
//   ∂L/∂U[o, r, f] = Σ over the (n, p, c) whose maximum at feature f read row r at offset o,
//   ∂L/∂b_f = Σ of the gradients of the z that are not 0.
// Every tensor is channels last, (N, H, W, F): a position's F numbers are one row, which the
// compiler vectorises (F = 16, MiniGrid's encoder, is compiled for its size).

template <typename T, int64_t kFeatures>
struct GridFold {
  const int64_t* rows;  // (N, H, W, C)
  int64_t height, width, channels, kernel_height, kernel_width, table_rows, features;

  int64_t size() const { return kFeatures > 0 ? kFeatures : features; }

  // Calls visit(r) for each table row r that position (i, j) of item n reads, in the order the
  // sums take them: for each kernel offset o = (dy, dx), then each channel c,
  // r = o · R + rows[n, i+dy, j+dx, c] (the table's rows, (KH·KW·R, F), counted across offsets).
  template <typename Visit>
  void for_each_row(int64_t n, int64_t i, int64_t j, Visit visit) const {
    for (int64_t dy = 0; dy < kernel_height; ++dy) {
      for (int64_t dx = 0; dx < kernel_width; ++dx) {
        const int64_t* cell = rows + ((n * height + i + dy) * width + j + dx) * channels;
        const int64_t offset = (dy * kernel_width + dx) * table_rows;
        for (int64_t c = 0; c < channels; ++c) {
          visit(offset + cell[c]);
        }
      }
    }
  }

  // y = bias + Σ_o Σ_c table[o, rows[n, i+dy, j+dx, c]]
  void convolve(const T* table, const T* bias, int64_t n, int64_t i, int64_t j, T* y) const {
    const int64_t f_size = size();
    std::copy_n(bias, f_size, y);
    for_each_row(n, i, j, [&](int64_t r) {
      const T* row = table + r * f_size;
#pragma omp simd
      for (int64_t f = 0; f < f_size; ++f) {
        y[f] += row[f];
      }
    });
  }

  // grad_table[o, rows[n, i+dy, j+dx, c]] += g for every offset and channel
  void scatter(T* grad_table, int64_t n, int64_t i, int64_t j, const T* g) const {
    const int64_t f_size = size();
    for_each_row(n, i, j, [&](int64_t r) {
      T* row = grad_table + r * f_size;
#pragma omp simd
      for (int64_t f = 0; f < f_size; ++f) {
        row[f] += g[f];
      }
    });
  }

  // forward() where F is compiled in and a multiple of the vector width: a position's sums
  // and a window's maxima held in vector registers. Through memory, each row's addition waited
  // for the previous row's to be stored (about 60 cycles a position); the same additions in the
  // same order, the same comparisons.
  void forward_in_registers(const T* table, const T* bias, T* out, int8_t* where,
                            int64_t batch) const {
    using V = at::vec::Vectorized<T>;
    constexpr int64_t kVectors = kFeatures / V::size();
    const int64_t pooled_height = (height - kernel_height + 1) / 2;
    const int64_t pooled_width = (width - kernel_width + 1) / 2;
    const V none(T(-1));
    for (int64_t n = 0; n < batch; ++n) {
      for (int64_t p = 0; p < pooled_height; ++p) {
        for (int64_t q = 0; q < pooled_width; ++q) {
          V z[kVectors], w[kVectors];  // ReLU: a maximum below 0 leaves z = 0, where = -1
          for (int64_t v = 0; v < kVectors; ++v) {
            z[v] = V(T(0));
            w[v] = none;
          }
          for (int64_t k = 0; k < 4; ++k) {
            const int64_t i = 2 * p + k / 2, j = 2 * q + k % 2;
            V y[kVectors];
            for (int64_t v = 0; v < kVectors; ++v) y[v] = V::loadu(bias + v * V::size());
            for_each_row(n, i, j, [&](int64_t r) {
              const T* row = table + r * kFeatures;
              for (int64_t v = 0; v < kVectors; ++v) y[v] = y[v] + V::loadu(row + v * V::size());
            });
            const V position(static_cast<T>(k));
            for (int64_t v = 0; v < kVectors; ++v) {  // strictly: the first of equal maxima
              const V above = y[v] > z[v];
              z[v] = V::blendv(z[v], y[v], above);
              w[v] = V::blendv(w[v], position, above);
            }
          }
          const int64_t at = ((n * pooled_height + p) * pooled_width + q) * kFeatures;
          T positions[kFeatures];
          for (int64_t v = 0; v < kVectors; ++v) {
            z[v].store(out + at + v * V::size());
            w[v].store(positions + v * V::size());
          }
          for (int64_t f = 0; f < kFeatures; ++f) {
            where[at + f] = static_cast<int8_t>(positions[f]);
          }
        }
      }
    }
  }

  void forward(const T* table, const T* bias, T* out, int8_t* where, int64_t batch) const {
    if constexpr (kFeatures > 0 && kFeatures % at::vec::Vectorized<T>::size() == 0) {
      forward_in_registers(table, bias, out, where, batch);
      return;
    }
    const int64_t f_size = size();
    const int64_t pooled_height = (height - kernel_height + 1) / 2;
    const int64_t pooled_width = (width - kernel_width + 1) / 2;
    std::vector<T> y(f_size);
    for (int64_t n = 0; n < batch; ++n) {
      for (int64_t p = 0; p < pooled_height; ++p) {
        for (int64_t q = 0; q < pooled_width; ++q) {
          const int64_t at = ((n * pooled_height + p) * pooled_width + q) * f_size;
          T* z = out + at;
          int8_t* w = where + at;
          std::fill_n(z, f_size, T(0));  // ReLU: a maximum below 0 leaves z = 0, where = -1
          std::fill_n(w, f_size, int8_t(-1));
          for (int64_t k = 0; k < 4; ++k) {
            convolve(table, bias, n, 2 * p + k / 2, 2 * q + k % 2, y.data());
            for (int64_t f = 0; f < f_size; ++f) {
              if (y[f] > z[f]) {  // strictly: the first of equal maxima stays
                z[f] = y[f];
                w[f] = static_cast<int8_t>(k);
              }
            }
          }
        }
      }
    }
  }

  // backward() as forward_in_registers() is forward(): a window's gradient, its positions and
  // the bias's gradient held in vector registers; the same additions in the same order (a
  // position that holds no maximum adds nothing, as below).
  void backward_in_registers(const T* grad, const int8_t* where, T* grad_table, T* grad_bias,
                             int64_t batch) const {
    using V = at::vec::Vectorized<T>;
    constexpr int64_t kVectors = kFeatures / V::size();
    constexpr int kNoneSelected = (1 << V::size()) - 1;  // zero_mask: every lane 0
    const int64_t pooled_height = (height - kernel_height + 1) / 2;
    const int64_t pooled_width = (width - kernel_width + 1) / 2;
    std::fill_n(grad_table, kernel_height * kernel_width * table_rows * kFeatures, T(0));
    V bias_sum[kVectors];
    for (int64_t v = 0; v < kVectors; ++v) bias_sum[v] = V(T(0));
    for (int64_t n = 0; n < batch; ++n) {
      for (int64_t p = 0; p < pooled_height; ++p) {
        for (int64_t q = 0; q < pooled_width; ++q) {
          const int64_t at = ((n * pooled_height + p) * pooled_width + q) * kFeatures;
          T positions[kFeatures];
          for (int64_t f = 0; f < kFeatures; ++f) positions[f] = static_cast<T>(where[at + f]);
          for (int64_t k = 0; k < 4; ++k) {
            const V position(static_cast<T>(k));
            V g[kVectors];
            bool any = false;
            for (int64_t v = 0; v < kVectors; ++v) {
              const V here = V::loadu(positions + v * V::size()) == position;
              g[v] = V::blendv(V(T(0)), V::loadu(grad + at + v * V::size()), here);
              any = any || here.zero_mask() != kNoneSelected;
            }
            if (!any) {
              continue;
            }
            for (int64_t v = 0; v < kVectors; ++v) bias_sum[v] = bias_sum[v] + g[v];
            for_each_row(n, 2 * p + k / 2, 2 * q + k % 2, [&](int64_t r) {
              T* row = grad_table + r * kFeatures;
              for (int64_t v = 0; v < kVectors; ++v) {
                (V::loadu(row + v * V::size()) + g[v]).store(row + v * V::size());
              }
            });
          }
        }
      }
    }
    for (int64_t v = 0; v < kVectors; ++v) bias_sum[v].store(grad_bias + v * V::size());
  }

  void backward(const T* grad, const int8_t* where, T* grad_table, T* grad_bias,
                int64_t batch) const {
    if constexpr (kFeatures > 0 && kFeatures % at::vec::Vectorized<T>::size() == 0) {
      backward_in_registers(grad, where, grad_table, grad_bias, batch);
      return;
    }
    const int64_t f_size = size();
    const int64_t pooled_height = (height - kernel_height + 1) / 2;
    const int64_t pooled_width = (width - kernel_width + 1) / 2;
    std::fill_n(grad_table, kernel_height * kernel_width * table_rows * f_size, T(0));
    std::fill_n(grad_bias, f_size, T(0));
    std::vector<T> g(f_size);
    for (int64_t n = 0; n < batch; ++n) {
      for (int64_t p = 0; p < pooled_height; ++p) {
        for (int64_t q = 0; q < pooled_width; ++q) {
          const int64_t at = ((n * pooled_height + p) * pooled_width + q) * f_size;
          for (int64_t k = 0; k < 4; ++k) {
            bool any = false;
            for (int64_t f = 0; f < f_size; ++f) {
              const bool here = where[at + f] == k;
              g[f] = here ? grad[at + f] : T(0);
              any = any || here;
            }
            if (!any) {
              continue;
            }
#pragma omp simd
            for (int64_t f = 0; f < f_size; ++f) {
              grad_bias[f] += g[f];
            }
            scatter(grad_table, n, 2 * p + k / 2, 2 * q + k % 2, g.data());
          }
        }
      }
    }
  }
};

void grid_fold_check(const Tensor& rows, const Tensor& table, int64_t kernel_width) {
  TORCH_CHECK(rows.dim() == 4 && rows.scalar_type() == at::kLong,
              "grid_fold: rows must be (N, H, W, C) int64, got ", rows.sizes(), " ",
              rows.scalar_type());
  TORCH_CHECK(table.dim() == 3 && kernel_width > 0 && table.size(0) % kernel_width == 0,
              "grid_fold: table must be (KH * KW, R, F) with KW = ", kernel_width, ", got ",
              table.sizes());
  TORCH_CHECK(rows.size(1) - table.size(0) / kernel_width + 1 >= 2 &&
                  rows.size(2) - kernel_width + 1 >= 2,
              "grid_fold: a grid of ", rows.size(1), " x ", rows.size(2),
              " leaves no 2 x 2 window to pool after the kernel");
}

template <typename T, typename Body>
void with_grid_fold(const Tensor& rows, int64_t kernel_height, int64_t kernel_width,
                    int64_t table_rows, int64_t features, Body body) {
  const int64_t* data = rows.data_ptr<int64_t>();
  if (features == 16) {
    body(GridFold<T, 16>{data, rows.size(1), rows.size(2), rows.size(3), kernel_height,
                         kernel_width, table_rows, features});
  } else {
    body(GridFold<T, 0>{data, rows.size(1), rows.size(2), rows.size(3), kernel_height,
                        kernel_width, table_rows, features});
  }
}

// Every row index in [0, R): an observation's value beyond its channel's vocabulary would
// read outside the table (where the modules' embedding raises an IndexError).
void grid_fold_check_rows(const Tensor& rows, int64_t table_rows) {
  const int64_t* data = rows.data_ptr<int64_t>();
  const int64_t count = rows.numel();
  int64_t lowest = 0, highest = 0;
  #pragma omp simd reduction(min : lowest) reduction(max : highest)
  for (int64_t i = 0; i < count; ++i) {
    lowest = std::min(lowest, data[i]);
    highest = std::max(highest, data[i]);
  }
  TORCH_CHECK(lowest >= 0 && highest < table_rows,
              "grid_fold: a grid cell's value is outside its channel's vocabulary (table rows ",
              lowest, " to ", highest, " for a table of ", table_rows,
              "): the observation is not a MiniGrid grid of object, colour and state indices");
}

// rows (N, H, W, C) int64 table rows, table (KH·KW, R, F), bias (F): z (N, P, Q, F) and where
// (N, P, Q, F) int8, P = (H - KH + 1) / 2, Q = (W - KW + 1) / 2. Every index must be below R
// (checked first).
std::tuple<Tensor, Tensor> grid_fold_forward(const Tensor& rows_in, const Tensor& table_in,
                                             const Tensor& bias_in, int64_t kernel_width) {
  grid_fold_check(rows_in, table_in, kernel_width);
  const Tensor rows = rows_in.contiguous(), table = table_in.contiguous();
  grid_fold_check_rows(rows, table.size(1));
  const Tensor bias = bias_in.contiguous();
  const int64_t kernel_height = table.size(0) / kernel_width, features = table.size(2);
  const std::vector<int64_t> shape = {rows.size(0), (rows.size(1) - kernel_height + 1) / 2,
                                      (rows.size(2) - kernel_width + 1) / 2, features};
  Tensor out = at::empty(shape, table.options());
  Tensor where = at::empty(shape, table.options().dtype(at::kChar));
  AT_DISPATCH_FLOATING_TYPES(table.scalar_type(), "grid_fold_forward", [&] {
    with_grid_fold<scalar_t>(rows, kernel_height, kernel_width, table.size(1), features,
                             [&](const auto& fold) {
                               fold.forward(table.data_ptr<scalar_t>(),
                                            bias.data_ptr<scalar_t>(),
                                            out.data_ptr<scalar_t>(),
                                            where.data_ptr<int8_t>(), rows.size(0));
                             });
  });
  return {out, where};
}

// The gradients of the table (KH·KW, R, F) and of the bias (F) from grad (N, P, Q, F) of z.
std::tuple<Tensor, Tensor> grid_fold_backward(const Tensor& grad_in, const Tensor& rows_in,
                                              const Tensor& where_in, int64_t table_rows,
                                              int64_t kernel_height, int64_t kernel_width) {
  const Tensor grad = grad_in.contiguous(), rows = rows_in.contiguous();
  const Tensor where = where_in.contiguous();
  const int64_t features = grad.size(3);
  Tensor grad_table = at::empty({kernel_height * kernel_width, table_rows, features},
                                grad.options());
  Tensor grad_bias = at::empty({features}, grad.options());
  AT_DISPATCH_FLOATING_TYPES(grad.scalar_type(), "grid_fold_backward", [&] {
    with_grid_fold<scalar_t>(rows, kernel_height, kernel_width, table_rows, features,
                             [&](const auto& fold) {
                               fold.backward(grad.data_ptr<scalar_t>(),
                                             where.data_ptr<int8_t>(),
                                             grad_table.data_ptr<scalar_t>(),
                                             grad_bias.data_ptr<scalar_t>(), rows.size(0));
                             });
  });
  return {grad_table, grad_bias};
}
