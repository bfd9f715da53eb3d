"""The copy task (Arjovsky et al., 2016; Hochreiter & Schmidhuber, 1997), and transfer-copy.

With delay ``T``, alphabet 8 and ``recall = 10`` (TARNN and iRNN papers, appendix "Copying
Task"), a sequence has ``T + 20`` steps:

========================  ===================================  ============================
steps                     input                                target
========================  ===================================  ============================
``0 … 9``                 10 symbols drawn uniformly from 0–7  blank (8)
``10 … T+8``              ``T - 1`` blanks (8)                 blank
``T+9``                   the delimiter (9)                    blank
``T+10 … T+19``           blanks                               the 10 symbols, in order
========================  ===================================  ============================

Transfer-copy (ReLSTM paper, Table 1) trains on this task at one ``T`` and evaluates the same
model at larger ``T``: the generator is the same, only ``seq_len`` changes (``eval_seq_lens``).
"""

from __future__ import annotations

import torch
from torch import Tensor

from rlmem.tasks.recall import RecallTask
from rlmem.tasks.registry import register_task


@register_task("copy")
class CopyTask(RecallTask):
    """Remember ``recall`` symbols shown at the start and reproduce them after the delimiter.

    Args:
        alphabet: number of data symbols (8).
        recall: number of symbols to copy (10).
    """

    def data_positions(self, batch_size: int, seq_len: int,
                       generator: torch.Generator) -> Tensor:
        steps = torch.arange(self.recall, device=generator.device)
        return steps.unsqueeze(1).expand(self.recall, batch_size)
