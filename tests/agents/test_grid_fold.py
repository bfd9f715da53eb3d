"""The folded grid encoder (:mod:`rlmem.agents.grid_fold`): the embedding, the first
convolution, its ReLU and the max-pool as one table lookup compute the modules' function,
outputs and every gradient, equal in float64; where the compiled loops cannot run, the modules
run instead, bit for bit."""

from __future__ import annotations

import functools
from typing import Any

import pytest
import torch
from reference.equivalence import use_loops
from torch import Tensor

from rlmem.agents.grid_fold import folded_first_block, last_convolution, window_convolution
from rlmem.agents.minigrid_encoders import GRID_VOCABULARY, ImageEncoder
from rlmem.agents.ppo.config import PPOConfig, decided_folded_grid
from rlmem.cells._engines import compiled


def grids(batch: int, view: int, generator: torch.Generator) -> Tensor:
    """``(batch, view, view, 3)`` MiniGrid indices, every value of each channel possible."""
    return torch.stack([torch.randint(0, values, (batch, view, view), generator=generator)
                        for values in GRID_VOCABULARY], dim=-1)


def pair(dtype: torch.dtype, view: int = 7) -> tuple[ImageEncoder, ImageEncoder]:
    """A module encoder and a folded one with the same weights."""
    torch.manual_seed(0)
    module = ImageEncoder((view, view, 3)).to(dtype)
    folded = ImageEncoder((view, view, 3), folded=True).to(dtype)
    folded.load_state_dict(module.state_dict())
    return module, folded


def outputs_and_gradients(encoder: ImageEncoder, image: Tensor, upstream: Tensor
                          ) -> list[Tensor]:
    out = encoder(image)
    return [out, *torch.autograd.grad(out, list(encoder.parameters()), upstream)]


def compared(folded: ImageEncoder, module: ImageEncoder, batch: int, seed: int
             ) -> list[tuple[Tensor, Tensor]]:
    """(folded, module) pairs of the output and of each weight's gradient, at ``batch``
    random grids of the encoders' view and a random gradient of the output."""
    generator = torch.Generator().manual_seed(seed)
    image = grids(batch, module.image_shape[0], generator)
    dtype = module.convolution(0).weight.dtype
    upstream = torch.randn(batch, module.output_size, dtype=dtype, generator=generator)
    return list(zip(outputs_and_gradients(folded, image, upstream),
                    outputs_and_gradients(module, image, upstream), strict=True))


@pytest.mark.parametrize("view", [7, 5, 3])
@pytest.mark.parametrize("batch", [1, 37])
def test_the_fold_is_the_module_in_float64(view: int, batch: int,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    use_loops("compiled", monkeypatch)
    module, folded = pair(torch.float64, view)
    pairs = compared(folded, module, batch, seed=view * 100 + batch)
    names = ["output", *(name for name, _ in module.named_parameters())]
    assert len(pairs) == len(names) == 8  # output; embedding; three convolutions' w and b
    for name, (ours, theirs) in zip(names, pairs, strict=True):
        torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12, msg=name)


def test_the_first_block_alone_is_the_modules_channels_last(
        monkeypatch: pytest.MonkeyPatch) -> None:
    use_loops("compiled", monkeypatch)

    module, _ = pair(torch.float64)
    image = grids(5, 7, torch.Generator().manual_seed(1))
    assert module.embedding is not None
    first = folded_first_block(module.table_rows(image), module.embedding,
                               module.convolution(0), module.channel_of_row)
    assert first is not None
    assert first.shape == (5, 3, 3, 16)
    torch.testing.assert_close(first.permute(0, 3, 1, 2),
                               module.net[:3](module.grid_features(image)),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(("channel", "value"), [(1, 6), (2, 3), (2, 200)])
def test_a_value_beyond_the_table_is_refused(channel: int, value: int,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A colour index of 6 reads the next channel's first row, as the modules' embedding does
    (both take the one table); a state index of 3 or more is beyond the whole table and is
    refused with what went wrong, never read (the modules raise an IndexError there)."""
    use_loops("compiled", monkeypatch)
    module, _ = pair(torch.float64)
    image = grids(2, 7, torch.Generator().manual_seed(1))
    image[1, 2, 3, channel] = value
    assert module.embedding is not None
    fold = functools.partial(folded_first_block, module.table_rows(image), module.embedding,
                             module.convolution(0), module.channel_of_row)
    if sum(GRID_VOCABULARY[:channel]) + value < sum(GRID_VOCABULARY):
        assert fold() is not None
        return
    with pytest.raises(RuntimeError, match="outside its channel's vocabulary"):
        fold()


def test_the_last_convolution_as_one_product_is_the_convolution() -> None:
    torch.manual_seed(6)
    convolution = torch.nn.Conv2d(32, 64, (2, 3)).double()
    x = torch.randn(4, 2, 3, 32, dtype=torch.float64)
    torch.testing.assert_close(last_convolution(x, convolution),
                               convolution(x.permute(0, 3, 1, 2)).flatten(1),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape", [(37, 3, 3, 16, 32, 2, 2), (5, 6, 4, 3, 7, 3, 2)])
def test_the_window_convolution_is_the_convolution_and_its_relu(
        shape: tuple[int, ...], monkeypatch: pytest.MonkeyPatch) -> None:
    """The encoder's second convolution (3 × 3 × 16 → 2 × 2 × 32 in MiniGrid's) and another
    shape: outputs and the gradients of the input, the weight and the bias, in float64."""
    use_loops("compiled", monkeypatch)
    items, height, width, channels, features, kernel_height, kernel_width = shape
    torch.manual_seed(7)
    convolution = torch.nn.Conv2d(channels, features, (kernel_height, kernel_width)).double()
    x = torch.randn(items, height, width, channels, dtype=torch.float64, requires_grad=True)
    y = window_convolution(x, convolution)
    assert y is not None
    want = torch.relu(convolution(x.permute(0, 3, 1, 2))).permute(0, 2, 3, 1)
    torch.testing.assert_close(y, want, rtol=1e-12, atol=1e-12)
    assert (want == 0).any() and (want > 0).any()  # the ReLU's both sides are taken
    upstream = torch.randn_like(want)
    assert convolution.bias is not None
    inputs = [x, convolution.weight, convolution.bias]
    for got, expected in zip(torch.autograd.grad(y, inputs, upstream),
                             torch.autograd.grad(want, inputs, upstream), strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)


def test_equal_maxima_take_the_first_as_torchs_max_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the embedding at zero every position of a window holds the bias: the maximum is
    taken from the first (row order) by both, or from none where the bias is below 0."""
    use_loops("compiled", monkeypatch)
    module, folded = pair(torch.float64)
    with torch.no_grad():
        for encoder in (module, folded):
            assert encoder.embedding is not None
            encoder.embedding.weight.zero_()
            bias = encoder.convolution(0).bias
            assert bias is not None
            bias.copy_(torch.linspace(-1, 1, 16, dtype=torch.float64))
    for ours, theirs in compared(folded, module, batch=4, seed=5):
        torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)


def test_float32_agrees_to_rounding(monkeypatch: pytest.MonkeyPatch) -> None:
    use_loops("compiled", monkeypatch)
    module, folded = pair(torch.float32)
    for ours, theirs in compared(folded, module, batch=256, seed=2):
        torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-5)


def test_without_the_compiled_loops_the_modules_run_bit_for_bit(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(compiled.DISABLE_VARIABLE, "1")
    module, folded = pair(torch.float32)
    for ours, theirs in compared(folded, module, batch=16, seed=3):
        assert torch.equal(ours, theirs)


def test_acting_without_a_graph(monkeypatch: pytest.MonkeyPatch) -> None:
    use_loops("compiled", monkeypatch)
    module, folded = pair(torch.float64)
    image = grids(3, 7, torch.Generator().manual_seed(4))
    with torch.inference_mode():
        torch.testing.assert_close(folded(image), module(image), rtol=1e-12, atol=1e-12)


def test_the_weights_are_the_modules() -> None:
    module, folded = pair(torch.float32)
    assert list(folded.state_dict()) == list(module.state_dict())
    assert "folded" in repr(folded) and "folded" not in repr(module)


@pytest.mark.parametrize("encoding", ["onehot", "raw"])
def test_folding_needs_the_embedding(encoding: str) -> None:
    with pytest.raises(ValueError, match="folded grid encoder needs the 'embedding' encoding"):
        ImageEncoder((7, 7, 3), encoding, folded=True)


@pytest.mark.parametrize(("agent", "config", "recorded", "folded"), [
    ({"folded_grid": True}, {}, None, True),                     # given: kept
    ({"folded_grid": False}, {}, None, False),
    ({}, {}, {"folded_grid": True}, True),                       # resumed: its own
    ({}, {}, {"preset": "fast"}, False),                         # from before the key
    ({}, {"vectorization": "sync"}, None, False),                # the exact reference
    ({}, {"grid_encoding": "onehot"}, None, False),              # nothing to fold
    ({}, {"grid_encoding": "raw"}, {"folded_grid": True}, False),  # ... whatever it resumes
    ({}, {"device": "cuda"}, None, False),                       # the modules run there
    ({}, {}, None, True),                                        # left null: FOLDED_GRID.md
])
def test_folded_grid_is_decided_by_the_run(agent: dict[str, Any], config: dict[str, Any],
                                           recorded: dict[str, Any] | None,
                                           folded: bool) -> None:
    assert decided_folded_grid(agent, config, recorded) is folded


def test_a_run_records_whether_it_folds() -> None:
    default = PPOConfig.decided({"name": "ppo"}, {"env": "DoorKey-5x5"})
    exact = PPOConfig.decided({"name": "ppo"}, {"env": "DoorKey-5x5", "vectorization": "sync"})
    declined = PPOConfig.decided({"name": "ppo", "folded_grid": False}, {"env": "DoorKey-5x5"})
    assert (default["folded_grid"], exact["folded_grid"], declined["folded_grid"]) == (
        True, False, False)


def test_acting_keeps_the_table_until_a_weight_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without autograd the folded table is kept between calls (``owner``); a write to the
    embedding or the convolution, or an optimizer's step, makes a new one: the output stays
    the modules' (float64)."""
    use_loops("compiled", monkeypatch)
    module, folded = pair(torch.float64)
    image = grids(9, 7, torch.Generator().manual_seed(5))
    optimizer = torch.optim.SGD(folded.parameters(), lr=0.1)
    for change in range(3):
        with torch.no_grad():
            assert torch.allclose(folded(image), module(image), rtol=0, atol=1e-12), change
            assert torch.equal(folded(image), folded(image))
        if change == 0:  # an in-place write, as load_state_dict makes
            with torch.no_grad():
                for encoder in (folded, module):
                    assert encoder.embedding is not None
                    encoder.embedding.weight.mul_(1.5)
        else:  # an optimizer's step (its writes counted by the step hook)
            folded(image).square().sum().backward()
            optimizer.step()
            module.load_state_dict(folded.state_dict())
            optimizer.zero_grad()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_vector_loops_add_as_the_generic_ones(dtype: torch.dtype) -> None:
    """MiniGrid's 16 features take loops that hold a position's sums in vector registers
    (``grid_fold.h``); any other count takes the generic loops. Given 17 features whose first
    16 are another table's, the two must agree on those 16 bit for bit: the same additions in
    the same order, the same maxima, the same gradients."""
    native = compiled.ops(torch.zeros(1))
    if native is None:
        pytest.skip("the compiled loops are not built here")
    generator = torch.Generator().manual_seed(2)
    rows = torch.randint(0, 20, (37, 7, 7, 3), generator=generator)
    wide = torch.randn(4, 20, 17, dtype=dtype, generator=generator)
    bias = torch.randn(17, dtype=dtype, generator=generator)
    narrow = wide[..., :16].contiguous()
    z16, where16 = native.grid_fold_forward(rows, narrow, bias[:16].contiguous(), 2)
    z17, where17 = native.grid_fold_forward(rows, wide, bias, 2)
    assert torch.equal(z16, z17[..., :16]) and torch.equal(where16, where17[..., :16])
    grad = torch.randn(z17.shape, dtype=dtype, generator=generator)
    table16, bias16 = native.grid_fold_backward(grad[..., :16].contiguous(), rows, where16, 20,
                                                2, 2)
    table17, bias17 = native.grid_fold_backward(grad, rows, where17, 20, 2, 2)
    assert torch.equal(table16, table17[..., :16]) and torch.equal(bias16, bias17[:16])
