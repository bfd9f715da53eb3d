"""The fast forms of φ used by the hand-written loops (``rlmem.cells._engines.fast_forms``)
are φ itself, value and gradient, for every nonlinearity a cell accepts."""

from __future__ import annotations

import pytest
import torch

from rlmem.cells import activations
from rlmem.cells._engines.fast_forms import FAST_FORMS


def test_every_nonlinearity_has_a_fast_form() -> None:
    assert FAST_FORMS.keys() == activations.NONLINEARITIES.keys()


@pytest.mark.parametrize("name", sorted(activations.NONLINEARITIES))
def test_fast_form_is_phi(name: str) -> None:
    form = FAST_FORMS[name]
    a = torch.linspace(-6.0, 6.0, 1001, dtype=torch.float64).requires_grad_()
    grad = torch.randn(a.shape, generator=torch.Generator().manual_seed(0),
                       dtype=torch.float64)
    phi = activations.nonlinearity(name, "test")(a)
    (expected,) = torch.autograd.grad(phi, a, grad)
    with torch.no_grad():
        h = form.inner(form.scale_in * a)
        torch.testing.assert_close(form.scale_out * h + form.shift, phi, atol=1e-15, rtol=0)
        out = torch.empty_like(h)
        returned = form.inner_derivative(h, out)
        assert returned.data_ptr() == out.data_ptr()
        torch.testing.assert_close(form.gain * out * grad, expected, atol=1e-14, rtol=0)


def test_unknown_nonlinearity_lists_the_valid_names() -> None:
    with pytest.raises(ValueError, match="valid: relu, sigmoid, tanh"):
        activations.nonlinearity("gelu", "TARNN")
    with pytest.raises(ValueError, match="valid: relu, sigmoid, tanh"):
        torch.manual_seed(0)
        from rlmem.cells import make_cell
        make_cell("tarnn", input_size=2, hidden_size=2, nonlinearity="gelu")
