"""The grid embedding's CPU lookup (:func:`rlmem.agents.minigrid_encoders.embedding_lookup`):
the same values and the same gradients, bit for bit, as ``nn.functional.embedding``."""

from __future__ import annotations

import torch

from rlmem.agents.minigrid_encoders import embedding_lookup


def test_the_lookup_and_its_gradient_are_torchs_bit_for_bit() -> None:
    torch.manual_seed(0)
    indices = torch.randint(0, 20, (64, 7, 7, 3))
    weight = torch.randn(20, 8, requires_grad=True)
    upstream = torch.randn(64, 7, 7, 3, 8)
    ours = embedding_lookup(indices, weight)
    (grad_ours,) = torch.autograd.grad(ours, weight, upstream)
    theirs = torch.nn.functional.embedding(indices, weight)
    (grad_theirs,) = torch.autograd.grad(theirs, weight, upstream)
    assert torch.equal(ours, theirs)
    assert torch.equal(grad_ours, grad_theirs)
    with torch.no_grad():  # no graph: torch's own lookup
        assert torch.equal(embedding_lookup(indices, weight), theirs)
