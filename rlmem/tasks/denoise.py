"""The denoise task (Jing et al., 2019, "Gated orthogonal recurrent units: on learning to forget",
Neural Computation 31(4); ReLSTM paper §3.1 and Table 2).

It generalises copy: the symbols to reproduce are scattered at random among the ``T`` delay
steps, so the model must pick out which inputs matter. We lay it out exactly like
:mod:`rlmem.tasks.copy`, so both tasks share the alphabet, the output and the baseline. With
delay ``T``, alphabet 8 and ``recall = 10`` a sequence has ``T + 20`` steps:

========================  ================================================  ===================
steps                     input                                             target
========================  ================================================  ===================
``0 … T+8``               blanks (8), except 10 data symbols (uniform over  blank (8)
                          0–7) at 10 distinct positions drawn uniformly
                          without replacement among these ``T + 9`` steps
``T+9``                   the delimiter (9)                                 blank
``T+10 … T+19``           blanks                                            the 10 symbols, in
                                                                            the order they
                                                                            appeared
========================  ================================================  ===================

The papers describe the task only in words ("the symbols that need to be copied are randomly
distributed among the T time steps"), so two choices are ours, made so that copy and denoise are
comparable: the alphabet is copy's (8 data symbols, blank, delimiter; Jing et al.'s own
generator may encode symbols differently), and the positions are drawn without replacement, so
all 10 symbols are always present in the input. Copy is the special case where the positions are
``0 … 9``.

The naive baseline is copy's, ``10·log(8)/(T+20)``, for the same reason: a memoryless model sees
only the current input, which is a blank at every output step, so its best output there is the
uniform distribution over the 8 symbols (cost ``log 8`` per step), and every other target is a
blank, which it predicts exactly once it knows the time step.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rlmem.tasks.recall import RecallTask
from rlmem.tasks.registry import register_task


@register_task("denoise")
class DenoiseTask(RecallTask):
    """Reproduce, in order, ``recall`` symbols scattered among blanks before the delimiter.

    Args:
        alphabet: number of data symbols (8).
        recall: number of symbols to reproduce (10).
    """

    def data_positions(self, batch_size: int, seq_len: int,
                       generator: torch.Generator) -> Tensor:
        # A uniformly random subset of `recall` of the T + recall - 1 steps before the
        # delimiter: the indices of the smallest `recall` of i.i.d. uniform keys.
        keys = torch.rand(self.delimiter_step(seq_len), batch_size, generator=generator,
                          device=generator.device)
        chosen = keys.topk(self.recall, dim=0, largest=False).indices
        return chosen.sort(dim=0).values
