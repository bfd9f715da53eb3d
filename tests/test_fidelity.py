"""The cells compute their papers' equations as written (issue 11, "Fidelity fixes").

Each test writes the paper's formula by hand, in float64, and compares the cell with it.
"""

from __future__ import annotations

import pytest
import torch
from torch import Tensor

from rlmem.cells import make_cell
from rlmem.cells.irnn import IncrementalRNN, IRNNUpdate

IN, H = 3, 6


# --- iRNN: Eq. 8 (Kag, Zhang & Saligrama, 2020) -----------------------------------------------

def irnn(update_rule: IRNNUpdate, rank: int | None, K: int, nonlinearity: str = "tanh",
         **kwargs: object) -> IncrementalRNN:
    """An iRNN in float64 with every parameter random (H starts at 0: U would be I)."""
    torch.manual_seed(0)
    cell = make_cell("irnn", input_size=IN, hidden_size=H, K=K, rank=rank, eta=0.3,
                     nonlinearity=nonlinearity, update_rule=update_rule, **kwargs).double()
    with torch.no_grad():
        for parameter in cell.parameters():
            if parameter.dim() == 2:
                parameter.copy_(0.4 * torch.randn_like(parameter))
        cell.eta.copy_(torch.tensor([0.3, 0.5, 0.2, 0.4][:K], dtype=torch.float64))
    assert isinstance(cell, IncrementalRNN)
    return cell


def irnn_by_hand(cell: IncrementalRNN, x: Tensor, h: Tensor, resets: Tensor) -> Tensor:
    r"""The rounds of Eq. 5 / Eq. 8 written out: from :math:`g_0 = 0`,
    :math:`g_i = g_{i-1} + \eta_i(\phi(P[U(g_{i-1} + h) + W x + b]) - \alpha(g_{i-1} + h))`,
    with :math:`P = U` (Eq. 8) or :math:`P = I` (Eq. 5), :math:`h_k = g_K`."""
    eye = torch.eye(H, dtype=torch.float64)
    U = cell.U.weight if cell.rank is None else eye + cell.V @ cell.H
    P = U if cell.update_rule is IRNNUpdate.eq8 else eye
    W, b = cell.W.weight, cell.W.bias
    phi = {"tanh": torch.tanh, "relu": torch.relu}[cell.phi_name]
    outputs = []
    for t in range(x.shape[0]):
        h = torch.where(resets[t].unsqueeze(1), torch.zeros_like(h), h)
        g = torch.zeros_like(h)
        for i in range(cell.K):
            total = g + h
            g = g + cell.eta[i] * (phi((U @ total.T + (W @ x[t].T) + b[:, None]).T @ P.T)
                                   - cell.alpha * total)
        outputs.append(g)
        h = g
    return torch.stack(outputs)


@pytest.mark.parametrize("update_rule", list(IRNNUpdate))
@pytest.mark.parametrize("rank", [None, 2])
@pytest.mark.parametrize(("steps", "K"), [(1, 1), (1, 3), (9, 3), (9, 4)])
def test_irnn_computes_its_equation_as_written(update_rule: IRNNUpdate, rank: int | None,
                                               steps: int, K: int) -> None:
    cell = irnn(update_rule, rank, K)
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(steps, 4, IN, generator=generator, dtype=torch.float64)
    h0 = torch.randn(4, H, generator=generator, dtype=torch.float64)
    resets = torch.zeros(steps, 4, dtype=torch.bool)
    resets[steps // 2, 1] = True  # a reset mid-sequence (at t = 0 for a single step)
    y, state = cell(x, cell.state_type(h0), resets)
    expected = irnn_by_hand(cell, x, h0, resets)
    torch.testing.assert_close(y, expected, atol=1e-12, rtol=0)
    torch.testing.assert_close(state.h, expected[-1], atol=1e-12, rtol=0)


def test_irnn_eq8_differs_from_eq5() -> None:
    x = torch.randn(5, 2, IN, dtype=torch.float64)
    eq5, eq8 = irnn(IRNNUpdate.eq5, 2, 2), irnn(IRNNUpdate.eq8, 2, 2)
    assert not torch.allclose(eq5(x)[0], eq8(x)[0])


def test_irnn_defaults_are_the_papers() -> None:
    """Eq. 8 with a fixed α = 1 (a buffer, not a parameter); α is learned only on request."""
    cell = make_cell("irnn", input_size=IN, hidden_size=H)
    assert isinstance(cell, IncrementalRNN)
    assert cell.update_rule is IRNNUpdate.eq8 and float(cell.alpha) == 1.0
    assert "alpha" not in dict(cell.named_parameters()) and "alpha" in dict(cell.named_buffers())
    learned = irnn(IRNNUpdate.eq8, None, 2, learn_alpha=True)
    out = learned.forward_aux(torch.randn(4, 2, IN, dtype=torch.float64))
    out.output.pow(2).sum().backward()
    assert learned.alpha.grad is not None and learned.alpha.grad != 0
    assert "alpha" in out.aux.diagnostics


def test_irnn_gradients_reach_every_parameter_under_eq8() -> None:
    cell = irnn(IRNNUpdate.eq8, 2, 3)
    x = torch.randn(6, 2, IN, dtype=torch.float64, requires_grad=True)
    cell(x)[0].pow(2).sum().backward()
    for key, parameter in cell.named_parameters():
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0, key
    assert x.grad is not None and x.grad[0].abs().sum() > 0


def test_irnn_update_rule_by_name_and_a_clear_error() -> None:
    cell = make_cell("irnn", input_size=IN, hidden_size=H, update_rule="eq5")  # type: ignore[arg-type]
    assert isinstance(cell, IncrementalRNN) and cell.update_rule is IRNNUpdate.eq5
    with pytest.raises(ValueError, match=r"unknown update_rule='eq9'; valid: eq5, eq8"):
        make_cell("irnn", input_size=IN, hidden_size=H, update_rule="eq9")  # type: ignore[arg-type]


def test_irnn_weights_keep_their_update_rule() -> None:
    """Weights saved before the option (no recorded rule) are Eq. 5's: they load into Eq. 5 and
    are refused by Eq. 8, whose map they were not trained for."""
    eq5 = make_cell("irnn", input_size=IN, hidden_size=H, update_rule=IRNNUpdate.eq5,
                    learn_alpha=True)
    saved = eq5.state_dict()
    legacy = {key: value for key, value in saved.items() if not key.endswith("_extra_state")}
    make_cell("irnn", input_size=IN, hidden_size=H, update_rule=IRNNUpdate.eq5,
              learn_alpha=True).load_state_dict(legacy)
    for weights in (saved, legacy):
        with pytest.raises(ValueError, match=r"trained with update_rule=eq5.*update_rule=eq8"):
            make_cell("irnn", input_size=IN, hidden_size=H).load_state_dict(weights)
    eq8 = make_cell("irnn", input_size=IN, hidden_size=H)
    make_cell("irnn", input_size=IN, hidden_size=H).load_state_dict(eq8.state_dict())

