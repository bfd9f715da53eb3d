// The time loops of rlmem's research cells, compiled: the same ATen calls as their engines'
// Python loops (rlmem/cells/_engines/tarnn.py, screened.py, full_attention.py), without an
// interpreter between them; and DeltaNet's delta rule step by step (delta_rule.h), where the
// Python engine composes blocks, and FFM's and LRU's elementwise recurrence (diagonal.h); and
// one piece that is not a time loop, the grid encoder's embedding and first convolution as one
// table lookup (grid_fold.h), and its second convolution as one product over its windows
// (window_convolution.h); and an LSTM and a GRU over a chunk with its resets inside one call
// (lstm_chunk.h, gru_chunk.h); and MiniGrid's step and view for the tensor envs (minigrid.h),
// not a cell's at all. At batch 16 a small op costs about as much to call from Python as
// to run; here it is called from C++. Built and loaded by rlmem/cells/_engines/compiled.py, which
// falls back to the Python loops when it cannot be built. CPU only: the caller checks the device.
//
// One translation unit: each engine's loops are in a file of their own (the .h files here),
// included below in the order they were written in (each uses what the ones before define).
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/Version.h>
#include <ATen/cpu/vec/vec.h>
#include <ATen/ops/_softmax.h>
#include <ATen/ops/_softmax_backward_data.h>
#include <ATen/ops/add.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/baddbmm.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/gt.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/lerp.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/min.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/mv.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/sigmoid_backward.h>
#include <ATen/ops/sign.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/tanh_backward.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <ATen/ops/arange.h>

#if defined(__x86_64__)  // the blocked AVX-512 product (blocked_product.h), chosen at run time
#include <dlfcn.h>
#include <immintrin.h>
#define RLMEM_WIDE __attribute__((target("avx512f")))
#else  // no AVX-512 here: the loops keep the build's width, the products ATen's
#define RLMEM_WIDE
#endif

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <tuple>
#include <type_traits>
#include <vector>

namespace {

using at::Tensor;

#include "reset.h"
#include "blocked_product.h"
#include "wide_exp.h"
#include "kernels.h"
#include "products.h"
#include "tarnn.h"
#include "base_recurrence.h"
#include "screened.h"
#include "full_attention.h"
#include "screened_step.h"
#include "full_step.h"
#include "delta_rule_wide.h"
#include "delta_rule.h"
#include "diagonal.h"
#include "grid_fold.h"
#include "window_convolution.h"
#include "lstm_chunk.h"
#include "gru_chunk.h"
#include "minigrid.h"

// How many tensors share the storage of this one (1: only this one).
int64_t storage_use_count(const Tensor& tensor) {
  return static_cast<int64_t>(tensor.storage().use_count());
}

}  // namespace

TORCH_LIBRARY(rlmem_loops, m) {
  m.def("tarnn_forward", &tarnn_forward);
  m.def("tarnn_backward", &tarnn_backward);
  m.def("screened_forward", &screened_forward);
  m.def("screened_backward", &screened_backward);
  m.def("full_forward", &full_forward);
  m.def("full_backward", &full_backward);
  m.def("full_traces", &full_traces);
  m.def("full_step", &full_step);
  m.def("screened_step", &screened_step);
  m.def("delta_forward", &delta_forward);
  m.def("delta_backward", &delta_backward);
  m.def("diagonal_forward", &diagonal_forward);
  m.def("diagonal_backward", &diagonal_backward);
  m.def("grid_fold_forward", &grid_fold_forward);
  m.def("grid_fold_backward", &grid_fold_backward);
  m.def("window_convolution_forward", &window_convolution_forward);
  m.def("window_convolution_backward", &window_convolution_backward);
  m.def("lstm_chunk_forward", &lstm_chunk_forward);
  m.def("lstm_chunk_backward", &lstm_chunk_backward);
  m.def("gru_chunk_forward", &gru_chunk_forward);
  m.def("gru_chunk_backward", &gru_chunk_backward);
  m.def("minigrid_transition", &minigrid_transition);
  m.def("minigrid_view", &minigrid_view);
  m.def("storage_use_count", &storage_use_count);
  m.def("onednn_product_count", &onednn_product_count);
  m.def("product", &product);
  m.def("blocked_product_available", &blocked_product_available);
  m.def("wide_exp_found", &wide_exp_found);
}
