"""What each research cell is for, checked against its paper's claims."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import torch
from torch import nn

from rlmem.cells import make_cell
from rlmem.cells.irnn import IncrementalRNN
from rlmem.cells.relstm import ReLSTM
from rlmem.cells.sarnn import SARNN
from rlmem.cells.screening import screen
from rlmem.cells.tarnn import TARNN


def test_sarnn_mask_is_binary_and_slope_anneals() -> None:
    torch.manual_seed(0)
    cell = make_cell("sarnn", input_size=4, hidden_size=16)
    assert isinstance(cell, SARNN)
    out = cell.forward_aux(torch.randn(20, 8, 4))
    update = out.aux.traces["update"]
    assert set(update.unique().tolist()) <= {0.0, 1.0}
    skip = out.aux.diagnostics["skip_percent"]
    torch.testing.assert_close(skip, 100 * (1 - update.mean()))
    cell.anneal(0.0)
    assert float(cell.slope) == 1.0
    cell.anneal(0.5)
    assert float(cell.slope) == pytest.approx(3.0)  # 1 + 0.04 · 50 epochs
    cell.anneal(1.0)
    assert float(cell.slope) == 5.0  # min(5, 1 + 0.04 · 100)


def _train_sarnn(lam: float, steps: int = 60) -> float:
    torch.manual_seed(0)
    cell = make_cell("sarnn", input_size=4, hidden_size=16, lam=lam)
    assert isinstance(cell, SARNN)
    readout = nn.Linear(16, 1)
    optimizer = torch.optim.Adam([*cell.parameters(), *readout.parameters()], lr=1e-2)
    generator = torch.Generator().manual_seed(1)
    for _ in range(steps):
        x = torch.randn(20, 16, 4, generator=generator)
        target = x[..., :1].cumsum(0) / 5
        out = cell.forward_aux(x)
        loss = (readout(out.output) - target).pow(2).mean() + out.aux.total_loss()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        return float(cell.forward_aux(torch.randn(20, 16, 4, generator=generator))
                     .aux.diagnostics["skip_percent"])


def test_sarnn_larger_budget_weight_lowers_the_update_rate() -> None:
    free, budgeted = _train_sarnn(0.0), _train_sarnn(1e-2)
    assert budgeted > free + 10, (free, budgeted)


def test_relstm_state_does_not_grow_with_sequence_length() -> None:
    cell = make_cell("relstm", input_size=3, hidden_size=8, short_term=4, relevant=3)
    _, short = cell(torch.randn(10, 2, 3))
    _, long = cell(torch.randn(300, 2, 3))
    assert [v.shape for v in short] == [v.shape for v in long]
    assert long.relevant_valid.all() and long.short_valid.all()


def test_screen_fills_free_slots_then_replaces_the_lowest() -> None:
    relevant = torch.zeros(1, 2, 1)
    score = torch.zeros(1, 2)
    valid = torch.zeros(1, 2, dtype=torch.bool)
    time = torch.zeros(1, 2, dtype=torch.long)
    one = torch.ones(1, dtype=torch.bool)
    for t, s in enumerate((0.5, 0.2)):  # two free slots: both enter, whatever their score
        relevant, score, valid, time = screen(relevant, score, valid, time,
                                              torch.full((1, 1), float(t)), torch.tensor([s]),
                                              one, torch.tensor([t]))
    assert valid.all() and time.tolist() == [[0, 1]]
    # Full: a lower score is screened out, a higher one replaces the lowest (0.2, slot 1).
    relevant, score, valid, time = screen(relevant, score, valid, time, torch.full((1, 1), 9.0),
                                          torch.tensor([0.1]), one, torch.tensor([2]))
    assert time.tolist() == [[0, 1]]
    relevant, score, valid, time = screen(relevant, score, valid, time, torch.full((1, 1), 9.0),
                                          torch.tensor([0.9]), one, torch.tensor([3]))
    assert time.tolist() == [[0, 3]]
    torch.testing.assert_close(score, torch.tensor([[0.5, 0.9]]))
    assert relevant[0, 1, 0] == 9.0
    # An empty buffer slot (not yet a state) never enters.
    _, _, valid_after, _ = screen(torch.zeros(1, 2, 1), torch.zeros(1, 2),
                                  torch.zeros(1, 2, dtype=torch.bool),
                                  torch.zeros(1, 2, dtype=torch.long), torch.ones(1, 1),
                                  torch.tensor([5.0]), ~one, torch.tensor([0]))
    assert not valid_after.any()


def test_relstm_heavily_attended_state_enters_the_relevant_set() -> None:
    """A marker state that draws almost all attention while in S is kept in R for good."""
    hidden, marker = 2, 3
    cell = make_cell("relstm", input_size=1, hidden_size=hidden, short_term=3, relevant=1)
    assert isinstance(cell, ReLSTM)
    with torch.no_grad():
        for p in cell.parameters():
            p.zero_()
        lstm = cell.base.cell
        # Gates i, f, g, o: i and o open, f shut, g[0] follows the sign of x, s is ignored.
        lstm.bias_ih[0:hidden] = 20.0
        lstm.bias_ih[hidden:2 * hidden] = -20.0
        lstm.weight_ih[2 * hidden, 0] = 20.0
        lstm.bias_ih[3 * hidden:] = 20.0
        # Attention logit 50·tanh(10·m[0]): states with positive h[0] draw all the weight.
        cell.attention.key.weight.copy_(10 * torch.eye(hidden))
        cell.attention.score.weight[0, 0] = 50.0
    x = -torch.ones(12, 1, 1)
    x[marker] = 1.0
    out = cell.forward_aux(x)
    _, state = cell(x)
    assert state.relevant_valid.all()
    assert state.relevant_time.tolist() == [[marker]]
    assert float(state.relevant_score[0, 0]) > 2.9  # ≈ ν: it drew all attention for ν steps
    attention = out.aux.traces["attention"][:, 0]
    assert attention[-1, -1] > 0.99  # still read from R long after it left S


def test_tarnn_with_beta_near_zero_leaves_the_state_unchanged() -> None:
    torch.manual_seed(0)
    cell = make_cell("tarnn", input_size=3, hidden_size=6)
    assert isinstance(cell, TARNN)
    _, state = cell(torch.randn(5, 2, 3))
    with torch.no_grad():
        cell.W_x.bias.fill_(-50.0)  # β = σ(·) ≈ 0
    y, end = cell(torch.randn(7, 2, 3), state)
    torch.testing.assert_close(y, state.s.expand(7, -1, -1), atol=1e-12, rtol=0)
    torch.testing.assert_close(end.s, state.s, atol=1e-12, rtol=0)


def test_tarnn_initialisation_and_omega() -> None:
    cell = make_cell("tarnn", input_size=3, hidden_size=6, A="coupled", gamma1=1.0,
                     gamma2=0.5)
    assert isinstance(cell, TARNN)
    assert torch.all(cell.W_x.bias == -3.0)
    assert cell.A[0, 0] == -1 and cell.A[0, 3] == 1 and cell.A[3, 0] == 0
    omega = cell.forward_aux(torch.randn(2, 1, 3)).aux.losses["omega"]
    B2, W2 = cell.B.weight[:, 3:], cell.W.weight[:, 3:]
    expected = (cell.A + B2).pow(2).sum() + 0.5 * (cell.U.weight + W2).pow(2).sum()
    torch.testing.assert_close(omega, expected)
    with pytest.raises(ValueError, match="even hidden_size"):
        make_cell("tarnn", input_size=3, hidden_size=5, A="coupled")
    with pytest.raises(ValueError, match="valid: identity, coupled"):
        make_cell("tarnn", input_size=3, hidden_size=6, A="skew")


def _residuals(name: str, ks: list[int], **kwargs: Any) -> list[float]:
    torch.manual_seed(0)
    x = torch.randn(6, 4, 3)
    residuals = []
    for K in ks:
        torch.manual_seed(1)
        cell = make_cell(name, input_size=3, hidden_size=8, K=K, eta=0.5, **kwargs)
        with torch.no_grad():
            for key, p in cell.named_parameters():
                if p.dim() == 2 and key != "W.weight":
                    p.mul_(0.3)  # keep the fixed-point map a contraction
        residuals.append(float(cell.forward_aux(x).aux.diagnostics["residual"]))
    return residuals


@pytest.mark.parametrize("name", ["irnn", "ernn"])
def test_fixed_point_residual_shrinks_as_k_grows(name: str) -> None:
    residuals = _residuals(name, [1, 2, 4, 8, 16], nonlinearity="tanh")
    assert all(a > b for a, b in itertools.pairwise(residuals)), residuals
    assert residuals[-1] < 1e-2 * residuals[0], residuals


def test_irnn_low_rank_u_is_identity_plus_vh() -> None:
    cell = make_cell("irnn", input_size=3, hidden_size=6, rank=2)
    assert isinstance(cell, IncrementalRNN)
    z = torch.randn(4, 6)
    torch.testing.assert_close(cell.recurrent(z), z @ (torch.eye(6) + cell.V @ cell.H).T)
    assert not hasattr(cell, "U")


@pytest.mark.parametrize("name", ["irnn", "ernn", "tarnn"])
def test_step_sizes_are_learned_per_step_and_reported(name: str) -> None:
    cell = make_cell(name, input_size=3, hidden_size=4, K=3)
    assert cell.eta.shape == (3,) and cell.eta.requires_grad
    diagnostics = cell.forward_aux(torch.randn(4, 2, 3)).aux.diagnostics
    assert {"eta_0", "eta_1", "eta_2"} <= set(diagnostics)
