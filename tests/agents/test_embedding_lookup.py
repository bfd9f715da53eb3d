"""The grid embedding's CPU lookup (:func:`rlmem.agents.minigrid_encoders.embedding_lookup`):
the same values and the same gradients, bit for bit, as ``nn.functional.embedding`` on one
thread (the test suite's workers each compute on one; torch's own backward splits the indices
among its threads where it has several)."""

from __future__ import annotations

import torch

from rlmem.agents.minigrid_encoders import embedding_lookup


def test_the_lookup_and_its_gradient_are_torchs_bit_for_bit() -> None:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        compare_on_one_thread()
    finally:
        torch.set_num_threads(threads)


def compare_on_one_thread() -> None:
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
