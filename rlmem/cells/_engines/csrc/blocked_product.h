// out = add + a b for float32 on a CPU with AVX-512, blocked in registers; ATen's addmm / mm
// otherwise.
//
// Part of the one translation unit of loops.cpp, which includes this file inside its anonymous
// namespace after the ATen headers and <immintrin.h>; not a standalone header.
//
// Why: torch's float32 products go to MKL, which on an AMD CPU runs its AVX2 code and, for the
// small products of an LSTM step (16 × 64 → 256), costs several times their arithmetic: 11 µs
// forward and 21 µs backward a step on this project's AMD EPYC (family 26, one thread), where
// this loop takes about 2 µs (near the core's peak of two 16-wide FMAs a cycle). oneDNN is as
// fast on large products but pays its set-up on small ones (products.h).
//
// The loop: out's columns in blocks of 32 (two 16-float registers, the last block masked), and
// within each block out's rows 8 at a time, 16 accumulators held in registers over the whole
// inner dimension K; a[r, k] is broadcast, b's row k read once per 8 rows. Each element of out
// is add[r, j] + Σ_k a[r, k] b[k, j], summed in k order with fused multiply-adds: the same
// function as ATen's product, rounded otherwise (tests/cells/test_blocked_product.py holds it
// within float32 rounding of a float64 product, every shape remainder and operand layout).
//
// Only the product's own function is compiled for AVX-512 (a target attribute), chosen at run
// time where the CPU reports it and ATen's kernels run it: the rest of the build keeps the
// flags of compiled.py.

#if defined(__x86_64__)

// Whether this CPU runs the blocked loop: it has AVX-512 and ATen's kernels use it
// (at::get_cpu_capability, which ATEN_CPU_CAPABILITY=avx2 narrows: a process narrowed so, as
// the bit-exact reference's fixture test runs on such a CPU, computes with no loop wider than
// ATen's).
bool blocked_product_available() {
  static const bool available =
      __builtin_cpu_supports("avx512f") && at::get_cpu_capability() == "AVX512";
  return available;
}

// Rows [0, kRows) of out from a (row stride a_row, column stride a_col), b (row stride ldb,
// columns contiguous), add (row stride add_row, 0 to broadcast one row; null: none).
template <int kRows>
RLMEM_WIDE void blocked_rows(
    const float* a, int64_t a_row, int64_t a_col, const float* b, int64_t ldb,
    const float* add, int64_t add_row, float* out, int64_t ldo, int64_t inner, int64_t columns) {
  for (int64_t j = 0; j < columns; j += 32) {
    const int64_t left = columns - j;
    const __mmask16 low = left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
    const __mmask16 high = left >= 32   ? __mmask16(0xFFFF)
                           : left > 16 ? __mmask16((1u << (left - 16)) - 1)
                                       : __mmask16(0);
    __m512 acc[kRows][2];
    for (int r = 0; r < kRows; ++r) {
      if (add != nullptr) {
        acc[r][0] = _mm512_maskz_loadu_ps(low, add + r * add_row + j);
        acc[r][1] = _mm512_maskz_loadu_ps(high, add + r * add_row + j + 16);
      } else {
        acc[r][0] = _mm512_setzero_ps();
        acc[r][1] = _mm512_setzero_ps();
      }
    }
    for (int64_t k = 0; k < inner; ++k) {
      const float* row = b + k * ldb + j;
      const __m512 b0 = _mm512_maskz_loadu_ps(low, row);
      const __m512 b1 = _mm512_maskz_loadu_ps(high, row + 16);
      for (int r = 0; r < kRows; ++r) {
        const __m512 value = _mm512_set1_ps(a[r * a_row + k * a_col]);
        acc[r][0] = _mm512_fmadd_ps(value, b0, acc[r][0]);
        acc[r][1] = _mm512_fmadd_ps(value, b1, acc[r][1]);
      }
    }
    for (int r = 0; r < kRows; ++r) {
      _mm512_mask_storeu_ps(out + r * ldo + j, low, acc[r][0]);
      _mm512_mask_storeu_ps(out + r * ldo + j + 16, high, acc[r][1]);
    }
  }
}

constexpr int64_t kInnerBlock = 256;
// The inner dimension is taken kInnerBlock at a time (a weight gradient's sum over a batch's
// thousands of rows): b's rows of one block stay in the core's cache while every group of out's
// rows reads them. out holds the running sum between blocks, stored and reloaded exactly, so
// each element is summed in k order as in one pass.

// The rows of out from row 0 to rows, 8 at a time, the last group of 1 to 7 rows by its own
// instantiation.
void blocked_all_rows(const float* a, int64_t a_row, int64_t a_col, const float* b, int64_t ldb,
                      const float* add, int64_t add_row, float* out, int64_t ldo, int64_t rows,
                      int64_t inner, int64_t columns) {
  using Rows = void (*)(const float*, int64_t, int64_t, const float*, int64_t, const float*,
                        int64_t, float*, int64_t, int64_t, int64_t);
  static constexpr Rows by_count[9] = {nullptr,         blocked_rows<1>, blocked_rows<2>,
                                       blocked_rows<3>, blocked_rows<4>, blocked_rows<5>,
                                       blocked_rows<6>, blocked_rows<7>, blocked_rows<8>};
  int64_t k = 0;
  do {  // at least once: an empty inner dimension still writes add (or zeros) into out
    const int64_t depth = std::min(kInnerBlock, inner - k);
    const float* addend = k == 0 ? add : out;
    const int64_t addend_row = k == 0 ? add_row : ldo;
    for (int64_t r = 0; r < rows; r += 8) {
      const int64_t count = std::min<int64_t>(8, rows - r);
      by_count[count](a + r * a_row + k * a_col, a_row, a_col, b + k * ldb, ldb,
                      addend == nullptr ? nullptr : addend + r * addend_row, addend_row,
                      out + r * ldo, ldo, depth, columns);
    }
    k += depth;
  } while (k < inner);
}

#else  // not x86-64: no blocked loop, every product ATen's

bool blocked_product_available() { return false; }

void blocked_all_rows(const float*, int64_t, int64_t, const float*, int64_t, const float*,
                      int64_t, float*, int64_t, int64_t, int64_t, int64_t) {
  TORCH_CHECK(false, "blocked_all_rows: the blocked loop needs x86-64 with AVX-512");
}

#endif

// Whether out = add + a b can take the blocked loop: float32 on a CPU that has it, 2-D
// operands, out's columns contiguous, add (if any) of out's shape.
bool blocked_applies(const Tensor& out, const Tensor& add, const Tensor& a, const Tensor& b) {
  if (!blocked_product_available() || a.scalar_type() != at::kFloat ||
      b.scalar_type() != at::kFloat || out.scalar_type() != at::kFloat || a.dim() != 2 ||
      b.dim() != 2 || out.dim() != 2 || out.stride(1) != 1) {
    return false;
  }
  return !add.defined() || (add.scalar_type() == at::kFloat && add.dim() == 2 &&
                            add.size(0) == out.size(0) && add.size(1) == out.size(1));
}

// out (M, N) = add + a (M, K) b (K, N) (add undefined: a b). out may be add itself; neither
// may overlap a or b. b is copied first where its rows are not contiguous (a transposed
// weight: a copy of K × N numbers, once), and add where its columns are not (the expanded
// gradient of a sum); add may repeat one row (row stride 0, a bias).
void product_into(Tensor& out, const Tensor& add, const Tensor& a, const Tensor& b) {
  if (!blocked_applies(out, add, a, b)) {
    if (add.defined()) {
      at::addmm_out(out, add, a, b);
    } else {
      at::mm_out(out, a, b);
    }
    return;
  }
  TORCH_CHECK(a.size(1) == b.size(0) && out.size(0) == a.size(0) && out.size(1) == b.size(1),
              "product: a ", a.sizes(), " times b ", b.sizes(), " into out ", out.sizes());
  const Tensor right = b.stride(1) == 1 ? b : b.contiguous();
  const Tensor addend = add.defined() && add.stride(1) != 1 ? add.contiguous() : add;
  blocked_all_rows(a.data_ptr<float>(), a.stride(0), a.stride(1), right.data_ptr<float>(),
                   right.stride(0), addend.defined() ? addend.data_ptr<float>() : nullptr,
                   addend.defined() ? addend.stride(0) : 0, out.data_ptr<float>(),
                   out.stride(0), out.size(0), a.size(1), out.size(1));
}

// add + a b as a new (M, N) tensor (add: (M, N), (N,) or undefined).
Tensor product(const Tensor& a, const Tensor& b, const std::optional<Tensor>& add) {
  Tensor out = at::empty({a.size(0), b.size(1)}, a.options());
  const Tensor rows = add.has_value() ? add->expand({a.size(0), b.size(1)}) : Tensor();
  product_into(out, rows, a, b);
  return out;
}
