"""Would folding the grid embedding into the first convolution make the MiniGrid encoder
cheaper to train on the CPU? One PPO minibatch's encoder, forward and backward, as the module
computes it and folded.

    OMP_NUM_THREADS=1 python benchmarks/encoder_fold.py [--batch 256] [--rounds 3]

:class:`~rlmem.agents.minigrid_encoders.ImageEncoder` embeds each cell's object, colour and
state (8 features each, 24 channels), then convolves 2×2 to 16 channels: 96 multiply-adds per
output feature. Both are linear in the embedding, so the first convolution's output at
``(i, j)`` is its bias plus, over the four offsets ``p`` of the kernel, a row of a table
``U[p, cell]`` indexed by the cell at ``(i, j) + p`` (its 11 × 6 × 3 = 198 possible index
triples), ``U[p, (o, c, s)] = Σ_a W_p,a E_a[index_a]``: four looked-up rows summed where the
convolution multiplies 96 numbers per feature. The table is rebuilt from the weights at every
call, so the gradient reaches the embedding and the convolution through it; the rest of the
net is the module's own. The script checks the two equal in float64 (outputs and every
weight's gradient) on random grids, then times them in turn, one thread, and prints the load
average before and after. Not kept in the library: see ``benchmarks/results/fast_trainer.md``.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import torch
from torch import Tensor, nn
from torch.nn import functional

from rlmem.agents.minigrid_encoders import (
    EMBEDDING_SIZE,
    FULL_VIEW,
    GRID_VOCABULARY,
    ImageEncoder,
    embedding_lookup,
)

TRIPLES = GRID_VOCABULARY[0] * GRID_VOCABULARY[1] * GRID_VOCABULARY[2]
"""The (object, colour, state) index triples a cell can hold."""


def folded(encoder: ImageEncoder, image: Tensor) -> Tensor:
    """``encoder(image)`` with the embedding folded into the first convolution (see the
    docstring), for the default 7×7 view and ``embedding`` encoding.

    Shapes:
        - image: ``(N, 7, 7, 3)``; returns ``(N, 64)``
    """
    assert encoder.embedding is not None and encoder.padding is None
    convolution = encoder.net[0]
    assert isinstance(convolution, nn.Conv2d)
    out_channels = convolution.out_channels
    channels = len(GRID_VOCABULARY)
    # (offset p, channel a, feature c, out o): W_p,a as one matrix per offset and channel.
    weight = convolution.weight.permute(2, 3, 1, 0).reshape(4, channels, EMBEDDING_SIZE,
                                                              out_channels)
    channel_of_row = torch.repeat_interleave(torch.arange(channels),
                                             torch.tensor(GRID_VOCABULARY))
    # T[p, r] = W_p,a(r) E[r] for every row r of the one table.
    table = torch.einsum("rc,prco->pro", encoder.embedding.weight, weight[:, channel_of_row])
    objects, colours, states = (torch.arange(size) for size in GRID_VOCABULARY)
    first_colour, first_state = GRID_VOCABULARY[0], GRID_VOCABULARY[0] + GRID_VOCABULARY[1]
    triples = (table[:, objects.view(-1, 1, 1)] + table[:, first_colour + colours.view(1, -1, 1)]
               + table[:, first_state + states.view(1, 1, -1)])
    objects_at, colours_at, states_at = image.long().unbind(-1)
    triple = (objects_at * GRID_VOCABULARY[1] + colours_at) * GRID_VOCABULARY[2] + states_at
    side = FULL_VIEW - 1
    rows = torch.stack([triple[:, di:di + side, dj:dj + side] + (2 * di + dj) * TRIPLES
                        for di in (0, 1) for dj in (0, 1)], -1)
    assert convolution.bias is not None
    first = embedding_lookup(rows, triples.reshape(4 * TRIPLES, out_channels)).sum(-2)
    hidden = functional.max_pool2d(functional.relu((first + convolution.bias).permute(0, 3, 1, 2)),
                                   2)
    for layer in list(encoder.net)[3:]:
        hidden = layer(hidden)
    return hidden


def grids(batch: int) -> Tensor:
    """Random grids of valid indices, ``(batch, 7, 7, 3)`` uint8."""
    return torch.stack([torch.randint(0, size, (batch, FULL_VIEW, FULL_VIEW))
                        for size in GRID_VOCABULARY], -1).to(torch.uint8)


def largest_differences(encoder: ImageEncoder, image: Tensor) -> tuple[float, float]:
    """The largest absolute difference between the module's and the folded form's outputs,
    and between their gradients of every weight, in float64."""
    wide = ImageEncoder((FULL_VIEW, FULL_VIEW, 3)).double()
    wide.load_state_dict(encoder.state_dict())
    module_out, folded_out = wide(image), folded(wide, image)
    probe = torch.randn_like(module_out)
    weights = list(wide.parameters())
    module_grads = torch.autograd.grad((module_out * probe).sum(), weights)
    folded_grads = torch.autograd.grad((folded_out * probe).sum(), weights)
    return ((module_out - folded_out).abs().max().item(),
            max((a - b).abs().max().item() for a, b in zip(module_grads, folded_grads,
                                                           strict=True)))


def milliseconds(work: Callable[[], Tensor], repeats: int) -> float:
    """The mean wall time of ``work()`` and the backward of its sum."""
    start = time.perf_counter()
    for _ in range(repeats):
        work().sum().backward()
    return (time.perf_counter() - start) / repeats * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=256, help="views per minibatch")
    parser.add_argument("--rounds", type=int, default=3, help="alternations of the two")
    parser.add_argument("--repeats", type=int, default=200, help="steps timed per round")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    encoder = ImageEncoder((FULL_VIEW, FULL_VIEW, 3))
    image = grids(args.batch)
    output, gradient = largest_differences(encoder, image)
    print(f"float64: outputs differ by at most {output:.1e}, gradients by {gradient:.1e}")
    forms = {"module": lambda: encoder(image), "folded": lambda: folded(encoder, image)}
    for work in forms.values():
        milliseconds(work, 10)  # warm-up
    before = os.getloadavg()[0]
    times: dict[str, list[float]] = {name: [] for name in forms}
    for _ in range(args.rounds):
        for name, work in forms.items():
            times[name].append(milliseconds(work, args.repeats))
    print(f"encoder forward + backward, {args.batch} views, ms per step over {args.repeats} "
          f"steps, {args.rounds} rounds in turn (load average {before:.2f} before, "
          f"{os.getloadavg()[0]:.2f} after):")
    for name, values in times.items():
        print(f"  {name:<7} {', '.join(f'{value:.2f}' for value in values)}")
    print(f"  folded / module: {sum(times['folded']) / sum(times['module']):.2f}")


if __name__ == "__main__":
    main()
