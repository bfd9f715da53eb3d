"""The cells' engines: faster ways to compute what a cell's ``scan(step)`` computes.

A cell's file holds its math (state, ``step``, equations); ``scan(step)``
(:func:`rlmem.cells.time_loop.scan`) is its specification. An engine computes the same over a
whole chunk with fewer, larger operations: a fused kernel, a loop without autograd and a
hand-written backward, a compiled loop. An engine is a function of tensors, the model being
torch's ``_VF.lstm(input, hx, flat_weights, ...)``: inputs, weights (a NamedTuple of the
engine's module), state, resets and hyperparameters; it takes no cell and imports no cell
module. A cell opts in by overriding :meth:`rlmem.cells.base.Cell.fast_scan`, the one place
where it hands its tensors over; the engine returns ``None`` for what it does not cover, and
the cell then runs ``scan(step)``. ``tests/cells/test_engines.py`` lists every (cell, options)
and the engine that runs it, each proven equal to the cell's ``scan(step)`` in float64, with
resets, outputs, states, traces and gradients; ``tests/cells/test_engine_boundary.py`` checks
that no engine imports a cell.

The engines, one module each:

- :mod:`.fused_rnn`: LSTM and GRU through torch's fused ``nn.LSTM`` / ``nn.GRU``, one call per
  reset-free segment.
- :mod:`.screened`: relevancy screening (ReLSTM, ReLRNN): the chunk engine with its backward,
  and the compiled rollout step.
- :mod:`.full_attention`: MemLSTM's full attention: the chunk engine with its backward, and the
  compiled rollout step.
- :mod:`.tarnn`, :mod:`.sarnn`: the loops of TARNN and SA-RNN with their backward.
- :mod:`.irnn`, :mod:`.ernn`: the loops of iRNN and ERNN, rearranged to share products.
- :mod:`.associative_scan`: FFM and LRU, an elementwise linear recurrence as an associative
  scan with resets.
- :mod:`.delta_rule`: DeltaNet's chunkwise (WY) form of the delta rule, with resets.
- :mod:`.windowed_attention`: GTrXL's attention over a sliding window, a chunk at once.

On CUDA, :mod:`.gpu` holds the engines' Triton kernels, and says when they run instead of
the Python loops.

What they share: :mod:`.compiled` (the C++ loops of ``csrc/``, built at first use),
:mod:`.base_recurrence` (the attentive cells' LSTM and tanh-RNN bases, forward and backward),
:mod:`.attentive_paths` (when an attentive cell's chunk takes its engine),
:mod:`.workspace` (scratch memory recycled across calls), :mod:`.weight_cache` (derived
weights kept between calls without autograd), :mod:`.fast_forms` (φ for the hand-written
backwards). Every engine applies a reset through the one rule of :mod:`rlmem.cells.resets`
(``csrc/reset.h`` in C++).

Private: nothing outside :mod:`rlmem.cells` imports from here, except the benchmarks and tests
that time or check the engines.
"""
