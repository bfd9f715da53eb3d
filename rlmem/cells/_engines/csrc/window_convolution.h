// The grid encoder's second convolution and its ReLU as one matrix product over its input's
// windows, and the backward (rlmem.agents.grid_fold.window_convolution): like grid_fold.h, not
// a time loop, but a place where the CPU spent its time in an ATen call (oneDNN's convolution,
// about 0.1 ms forward and 0.3 ms backward for a PPO minibatch's 256 views of 3 × 3 × 16)
// several times larger than its arithmetic.
//
// Part of the one translation unit of loops.cpp, which includes this file inside its anonymous
// namespace after the ATen headers; not a standalone header.
//
// With x channels last (N, H, W, C), a kernel of KH × KW, stride 1, no padding, the windows
// U[(n, i, j), (dy, dx, c)] = x[n, i + dy, j + dx, c] make the convolution one product,
//   y = ReLU(U Wᵀ + b),  W[f, (dy, dx, c)] = weight[f, c, dy, dx],
// its output channels last (N, H', W', F). Backward, with g = ∂L/∂y where y > 0 (else 0):
//   ∂L/∂b = Σ_rows g,  ∂L/∂W = gᵀ U,  ∂L/∂U = g W,
// and ∂L/∂x adds each window's gradient back where the window read it.

// x's windows, one row each, (dy, dx, c) within a row.
template <typename T>
void unfold_windows(const T* x, T* windows, int64_t items, int64_t height, int64_t width,
                    int64_t channels, int64_t kernel_height, int64_t kernel_width) {
  const int64_t out_height = height - kernel_height + 1, out_width = width - kernel_width + 1;
  const int64_t span = kernel_width * channels;  // a window's row of x, contiguous in x
  T* into = windows;
  for (int64_t n = 0; n < items; ++n) {
    for (int64_t i = 0; i < out_height; ++i) {
      for (int64_t j = 0; j < out_width; ++j) {
        for (int64_t dy = 0; dy < kernel_height; ++dy) {
          std::copy_n(x + ((n * height + i + dy) * width + j) * channels, span, into);
          into += span;
        }
      }
    }
  }
}

// The backward of unfold_windows: each window's gradient added into grad_x (zero first).
template <typename T>
void fold_windows(const T* grad_windows, T* grad_x, int64_t items, int64_t height, int64_t width,
                  int64_t channels, int64_t kernel_height, int64_t kernel_width) {
  const int64_t out_height = height - kernel_height + 1, out_width = width - kernel_width + 1;
  const int64_t span = kernel_width * channels;
  const T* from = grad_windows;
  for (int64_t n = 0; n < items; ++n) {
    for (int64_t i = 0; i < out_height; ++i) {
      for (int64_t j = 0; j < out_width; ++j) {
        for (int64_t dy = 0; dy < kernel_height; ++dy) {
          T* into = grad_x + ((n * height + i + dy) * width + j) * channels;
#pragma omp simd
          for (int64_t k = 0; k < span; ++k) {
            into[k] += from[k];
          }
          from += span;
        }
      }
    }
  }
}

// ReLU's backward over rows of F: g = upstream where y > 0, else 0; and grad_bias = Σ_rows g
// (zero first), in one pass.
template <typename T>
void relu_backward_rows(const T* upstream, const T* y, T* g, T* grad_bias, int64_t rows,
                        int64_t features) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* up = upstream + r * features;
    const T* out = y + r * features;
    T* into = g + r * features;
#pragma omp simd
    for (int64_t f = 0; f < features; ++f) {
      into[f] = out[f] > T(0) ? up[f] : T(0);
      grad_bias[f] += into[f];
    }
  }
}

// The weight (F, C, KH, KW) as W (F, KH · KW · C), a window's order.
Tensor window_weight(const Tensor& weight) {
  return weight.permute({0, 2, 3, 1}).reshape({weight.size(0), -1});
}

// a b + add (add undefined: a b): the blocked product (blocked_product.h) where blocked, else
// ATen's addmm / mm.
Tensor window_product(const Tensor& a, const Tensor& b, const Tensor& add, bool blocked) {
  if (blocked) {
    return product(a, b, add.defined() ? std::optional<Tensor>(add) : std::nullopt);
  }
  return add.defined() ? at::addmm(add, a, b) : at::mm(a, b);
}

// x (N, H, W, C) channels last, weight (F, C, KH, KW), bias (F): returns ReLU(conv(x)) channels
// last (N, H', W', F) and the windows U (N · H' · W', KH · KW · C), which the backward takes.
// blocked: the products in the blocked loop (the caller's agents.blocked_linear decides; the
// backward follows the forward).
std::tuple<Tensor, Tensor> window_convolution_forward(const Tensor& x_in, const Tensor& weight,
                                                      const Tensor& bias, bool blocked) {
  const Tensor x = x_in.contiguous();
  const int64_t items = x.size(0), height = x.size(1), width = x.size(2), channels = x.size(3);
  const int64_t kernel_height = weight.size(2), kernel_width = weight.size(3);
  TORCH_CHECK(weight.size(1) == channels && height >= kernel_height && width >= kernel_width,
              "window_convolution: a ", weight.sizes(), " kernel does not fit ", x.sizes());
  const int64_t out_height = height - kernel_height + 1, out_width = width - kernel_width + 1;
  Tensor windows = at::empty({items * out_height * out_width,
                              kernel_height * kernel_width * channels}, x.options());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "window_convolution_forward", [&] {
    unfold_windows(x.data_ptr<scalar_t>(), windows.data_ptr<scalar_t>(), items, height, width,
                   channels, kernel_height, kernel_width);
  });
  Tensor y = window_product(windows, window_weight(weight).t(), bias, blocked);
  y.relu_();
  return {y.view({items, out_height, out_width, weight.size(0)}), windows};
}

// The gradients of x, the weight and the bias from grad (N, H', W', F), given the forward's
// output y and windows.
std::tuple<Tensor, Tensor, Tensor> window_convolution_backward(
    const Tensor& grad, const Tensor& y, const Tensor& windows, const Tensor& weight,
    int64_t height, int64_t width, bool blocked) {
  const int64_t features = weight.size(0), channels = weight.size(1);
  const int64_t kernel_height = weight.size(2), kernel_width = weight.size(3);
  const int64_t items = y.size(0);
  const Tensor rows = y.reshape({-1, features}), upstream = grad.reshape({-1, features});
  Tensor g = at::empty_like(upstream);
  Tensor grad_bias = at::zeros({features}, y.options());
  AT_DISPATCH_FLOATING_TYPES(y.scalar_type(), "window_convolution_relu_backward", [&] {
    relu_backward_rows(upstream.data_ptr<scalar_t>(), rows.data_ptr<scalar_t>(),
                       g.data_ptr<scalar_t>(), grad_bias.data_ptr<scalar_t>(), rows.size(0),
                       features);
  });
  const Tensor grad_weight = window_product(g.t(), windows, Tensor(), blocked)
                                 .view({features, kernel_height, kernel_width, channels})
                                 .permute({0, 3, 1, 2})
                                 .contiguous();
  const Tensor grad_windows = window_product(g, window_weight(weight), Tensor(), blocked);
  Tensor grad_x = at::zeros({items, height, width, channels}, y.options());
  AT_DISPATCH_FLOATING_TYPES(y.scalar_type(), "window_convolution_backward", [&] {
    fold_windows(grad_windows.data_ptr<scalar_t>(), grad_x.data_ptr<scalar_t>(), items, height,
                 width, channels, kernel_height, kernel_width);
  });
  return {grad_x, grad_weight, grad_bias};
}
