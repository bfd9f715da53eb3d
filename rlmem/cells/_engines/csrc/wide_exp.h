// The AVX-512 form of the exponential ATen's float32 σ and SiLU take (SLEEF's, 1-ULP), as
// torch's library exports it, looked up once at run time, and the σ written with it.
//
// Part of the one translation unit of loops.cpp, which includes this file inside its anonymous
// namespace after blocked_product.h; not a standalone header.

#if defined(__x86_64__)

// The exponential of 16 floats; null where this torch does not export it (then σ keeps the
// build's own width) or the CPU lacks AVX-512.
using WideExp = __m512 (*)(__m512);
WideExp wide_exp() {
  static const WideExp found = [] {
    void* torch_cpu = blocked_product_available()
                          ? dlopen("libtorch_cpu.so", RTLD_LAZY | RTLD_NOLOAD)
                          : nullptr;
    return torch_cpu == nullptr
               ? WideExp(nullptr)
               : reinterpret_cast<WideExp>(dlsym(torch_cpu, "Sleef_expf16_u10"));
  }();
  return found;
}

// Whether wide_exp is found.
bool wide_exp_found() { return wide_exp() != nullptr; }

// σ(x) = 1 / (1 + e^{−x}) of 16 floats, written as ATen's float32 σ with exp = wide_exp():
// kernels.h's σ and σ-dot and delta_rule_wide.h's SiLU take it.
RLMEM_WIDE inline __m512 wide_sigmoid(__m512 x, WideExp exp) {
  const __m512 one = _mm512_set1_ps(1.0f);
  return _mm512_div_ps(one, _mm512_add_ps(one, exp(_mm512_sub_ps(_mm512_setzero_ps(), x))));
}

#else

bool wide_exp_found() { return false; }

#endif
