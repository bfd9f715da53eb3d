"""A cell behind the interface RecurrentPPO expects of its ``nn.LSTM``.

RecurrentPPO reads ``num_layers`` and ``hidden_size`` off the policy's ``lstm_actor`` to size
its state arrays, and the policy calls it on flat, batch-major sequences with an
``episode_starts`` mask. :class:`PackedMemory` translates: it unpacks the ``(h, c)`` pair into
the cell's state (:class:`~rlmem.agents.sb3.packing.StatePacker`), runs the cell time-major
with ``episode_starts`` as the cell's ``resets``, and packs the final state back.
"""

from __future__ import annotations

from torch import Tensor, nn

from rlmem.agents.sb3.packing import StatePacker
from rlmem.cells import Aux, Cell


class PackedMemory(nn.Module):
    """Runs a :class:`~rlmem.cells.Cell` on RecurrentPPO's flat sequences and packed states.

    Args:
        cell: the memory cell; its ``input_size`` is the features' size.

    Attributes:
        num_layers: always 1 (what RecurrentPPO sizes its buffers with), also for a stack of
            cells (``n_lstm_layers``): a stack's state is one flat NamedTuple, packed whole.
        hidden_size: width of each of the packed ``h`` and ``c``, *not* the cell's hidden size;
            together they hold the whole cell state (see :class:`StatePacker`).
        input_size: the cell's input size.
        output_size: the cell's output size (the latent fed to the MLP heads).
    """

    def __init__(self, cell: Cell) -> None:
        super().__init__()
        self.cell = cell
        self.packer = StatePacker.for_cell(cell)
        self.num_layers = self.packer.num_layers
        self.hidden_size = self.packer.hidden_size
        self.input_size = cell.input_size
        self.output_size = cell.output_size

    def forward(self, features: Tensor, packed_state: tuple[Tensor, Tensor],
                episode_starts: Tensor) -> tuple[Tensor, tuple[Tensor, Tensor], Aux]:
        """Run the cell over ``n_seq`` sequences laid out one after the other.

        ``episode_starts[i]`` marks that step ``i`` begins a new episode; it is passed to the
        cell as ``resets``, so the cell re-initialises that sequence's state before consuming
        the step. RecurrentPPO pads training sequences at their *end* with zero observations
        and no episode starts; the cell is causal, so padding never changes a real step's
        output (the PPO loss masks the padded steps out).

        Shapes:
            - features: ``(n_seq * T, input_size)``, sequence-major (RecurrentPPO's layout;
              ``T`` is 1 while collecting rollouts)
            - packed_state: ``(1, n_seq, hidden_size)`` each, the state before the first step
            - episode_starts: ``(n_seq * T,)``, float or bool
            - returns the output ``(n_seq * T, output_size)``, the packed state after the last
              step, and the cell's :class:`~rlmem.cells.Aux`
        """
        n_seq = packed_state[0].shape[1]
        x = features.reshape(n_seq, -1, self.input_size).transpose(0, 1)
        resets = episode_starts.reshape(n_seq, -1).transpose(0, 1).bool()
        result = self.cell.forward_aux(x, self.packer.unpack(packed_state), resets)
        output = result.output.transpose(0, 1).reshape(-1, self.output_size)
        return output, self.packer.pack(result.state), result.aux

    def extra_repr(self) -> str:
        return f"num_layers={self.num_layers}, packed hidden_size={self.hidden_size}"
