// The time loops' matrix products x R: where the caller asks (rlmem.cells._engines.
// onednn_linear: inside onednn_products(), float32, the CPU) the large ones in oneDNN and, on a
// CPU with AVX-512, the small ones in the blocked loop (blocked_product.h); else ATen's addmm /
// mm.
//
// Part of the one translation unit of loops.cpp, which includes this file inside its anonymous
// namespace after the ATen headers; not a standalone header.
//
// torch's float32 products go to its BLAS (MKL), which on an AMD CPU runs its AVX2 code, while
// oneDNN runs AVX-512 where the CPU has it: a step's 64 × 128 → 640 product took 47 µs in
// oneDNN against 82 µs in MKL on this project's AMD EPYC (one thread). oneDNN is reached
// through the dispatcher, as mkldnn::_linear_pointwise (the op torch's compiler emits for a CPU
// linear), which returns a new tensor: its result is added or copied into the loop's buffer.
// Products below kOneDNNMinimum multiply-adds do not go to oneDNN (its set-up costs more than
// it saves there, as onednn_linear.MIN_PRODUCT says for the Python side).

constexpr int64_t kOneDNNMinimum = int64_t(1) << 21;  // = onednn_linear.MIN_PRODUCT

std::atomic<int64_t> onednn_products_taken{0};  // products sent to oneDNN (tests read it)

// x Wᵀ in oneDNN; W (N, K) contiguous, the rows of Rᵀ.
Tensor onednn_product(const Tensor& x, const Tensor& rows) {
  static const auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("mkldnn::_linear_pointwise", "")
          .typed<Tensor(const Tensor&, const Tensor&, const std::optional<Tensor>&,
                        c10::string_view, c10::List<std::optional<c10::Scalar>>,
                        std::optional<c10::string_view>)>();
  ++onednn_products_taken;
  return op.call(x, rows, std::nullopt, "none", c10::List<std::optional<c10::Scalar>>(),
                 std::nullopt);
}

// A right-hand matrix R (K, N) of a loop's products; where oneDNN is asked for, the rows of Rᵀ
// (N, K, contiguous: oneDNN's layout), made once per chunk, for the large products, and R by
// rows for the blocked loop (blocked_product.h), which takes the small ones where the CPU has
// AVX-512 (a step's 16 × 128 → 512: about 9 µs against MKL's 20).
struct Product {
  Tensor right, rows, by_rows;

  Product(const Tensor& right_in, bool onednn)
      : right(right_in),
        rows(onednn && right_in.scalar_type() == at::kFloat ? right_in.t().contiguous()
                                                            : Tensor()),
        by_rows(rows.defined() && blocked_product_available() ? right_in.contiguous()
                                                              : Tensor()) {}

  bool in_onednn(const Tensor& x) const {
    return rows.defined() && x.size(0) * right.size(0) * right.size(1) >= kOneDNNMinimum;
  }

  // add + x R (add undefined: x R), a new tensor.
  Tensor operator()(const Tensor& add, const Tensor& x) const {
    if (in_onednn(x)) {
      Tensor product = onednn_product(x, rows);
      return add.defined() ? product.add_(add) : product;
    }
    if (by_rows.defined()) {
      return product(x, by_rows, add.defined() ? std::optional<Tensor>(add) : std::nullopt);
    }
    return add.defined() ? at::addmm(add, x, right) : at::mm(x, right);
  }

  // out = add + x R (add undefined: x R).
  void into(Tensor& out, const Tensor& add, const Tensor& x) const {
    if (in_onednn(x)) {
      Tensor product = onednn_product(x, rows);
      if (add.defined()) {
        at::add_out(out, add, product);
      } else {
        out.copy_(product);
      }
    } else if (by_rows.defined()) {
      product_into(out, add, x, by_rows);
    } else if (add.defined()) {
      at::addmm_out(out, add, x, right);
    } else {
      at::mm_out(out, x, right);
    }
  }

  // accumulated += x R.
  void add_to(Tensor& accumulated, const Tensor& x) const {
    if (in_onednn(x)) {
      accumulated.add_(onednn_product(x, rows));
    } else if (by_rows.defined()) {
      product_into(accumulated, accumulated, x, by_rows);
    } else {
      accumulated.addmm_(x, right);
    }
  }
};

// The count above, for the tests.
int64_t onednn_product_count() { return onednn_products_taken.load(); }
