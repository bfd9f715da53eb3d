"""The cells compute their papers' equations as written (issue 11, "Fidelity fixes").

Each test writes the paper's formula by hand, in float64, and compares the cell with it.
"""

from __future__ import annotations

import csv
import itertools
import json
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from cli_runner import TINY_PPO, run_cli
from torch import Tensor

from rlmem.cells import Cell, make_cell
from rlmem.cells.irnn import IncrementalRNN, IRNNUpdate
from rlmem.cells.memlstm import MemoryOverflowWarning
from rlmem.cells.modrelu import ModReLU
from rlmem.cells.relrnn import BaseNonlinearity, ReLRNN
from rlmem.cells.relstm import ReLSTM
from rlmem.cells.screening import UNIFORM_SHARE, Readout, Screening, screen

IN, H = 3, 6
OVERFLOW = "past capacity="
"""What MemLSTM's overflow warning says."""


def train_tiny_ppo(run_dir: Path, *overrides: str) -> str:
    """``python -m rlmem.train``: two tiny PPO updates on DoorKey-5x5 (episodes of up to 250
    steps) into ``run_dir``; returns the run's stderr."""
    result = run_cli("rlmem.train", *TINY_PPO, "env=DoorKey-5x5", f"run_dir={run_dir}",
                     *overrides, cwd=run_dir)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stderr


def evaluate_tiny(run_dir: Path, *overrides: str) -> str:
    """``python -m rlmem.evaluate`` of one episode on DoorKey-5x5; returns its stderr."""
    result = run_cli("rlmem.evaluate", f"run={run_dir}", "env=DoorKey-5x5", "episodes=1",
                     "num_envs=1", *overrides, cwd=run_dir)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stderr


# --- iRNN: Eq. 8 (Kag, Zhang & Saligrama, 2020) -----------------------------------------------

def irnn(update_rule: IRNNUpdate, rank: int | None, K: int, nonlinearity: str = "tanh",
         **kwargs: Any) -> IncrementalRNN:
    """An iRNN in float64 with every parameter random (H starts at 0: U would be I)."""
    torch.manual_seed(0)
    cell = make_cell("irnn", input_size=IN, hidden_size=H, K=K, rank=rank, eta=0.3,
                     nonlinearity=nonlinearity, update_rule=update_rule, **kwargs).double()
    assert isinstance(cell, IncrementalRNN)
    with torch.no_grad():
        for parameter in cell.parameters():
            if parameter.dim() == 2:
                parameter.copy_(0.4 * torch.randn_like(parameter))
        cell.eta.copy_(torch.tensor([0.3, 0.5, 0.2, 0.4][:K], dtype=torch.float64))
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
    cell = make_cell("irnn", input_size=IN, hidden_size=H, update_rule="eq5")
    assert isinstance(cell, IncrementalRNN) and cell.update_rule is IRNNUpdate.eq5
    with pytest.raises(ValueError, match=r"unknown update_rule='eq9'; valid: eq5, eq8"):
        make_cell("irnn", input_size=IN, hidden_size=H, update_rule="eq9")


def test_irnn_weights_keep_their_update_rule() -> None:
    """Weights record the rule they were trained with: Eq. 5's load into Eq. 5 and are refused
    by Eq. 8, whose map they were not trained for. Weights that record no rule (saved before
    the option) are rlmem.migrate's to complete, never guessed here."""
    eq5 = make_cell("irnn", input_size=IN, hidden_size=H, update_rule=IRNNUpdate.eq5,
                    learn_alpha=True)
    saved = eq5.state_dict()
    make_cell("irnn", input_size=IN, hidden_size=H, update_rule=IRNNUpdate.eq5,
              learn_alpha=True).load_state_dict(saved)
    with pytest.raises(ValueError, match=r"trained with update_rule=eq5.*update_rule=eq8"):
        make_cell("irnn", input_size=IN, hidden_size=H).load_state_dict(saved)
    unrecorded = {key: value for key, value in saved.items() if not key.endswith("_extra_state")}
    with pytest.raises(RuntimeError, match="_extra_state"):
        make_cell("irnn", input_size=IN, hidden_size=H, update_rule=IRNNUpdate.eq5,
                  learn_alpha=True).load_state_dict(unrecorded)
    eq8 = make_cell("irnn", input_size=IN, hidden_size=H)
    make_cell("irnn", input_size=IN, hidden_size=H).load_state_dict(eq8.state_dict())



@pytest.mark.slow  # a long CLI check: run with -m slow
def test_an_rl_run_records_the_update_rule_by_name(tmp_path: Path) -> None:
    """The checkpoint's config holds ``eq5`` (a string: checkpoints load with weights_only),
    and the evaluation rebuilds the cell with it."""
    train_tiny_ppo(tmp_path, "memory=irnn", "memory.update_rule=eq5")
    assert "update_rule: eq5" in (tmp_path / "config.yaml").read_text()
    evaluate_tiny(tmp_path)
    assert (tmp_path / "eval" / "DoorKey-5x5_sampled_1ep_seed0.json").exists()


# --- MemLSTM: a capacity shorter than an episode is a sliding window ---------------------------

def overflow_warnings(record: list[warnings.WarningMessage]) -> list[warnings.WarningMessage]:
    return [w for w in record if issubclass(w.category, MemoryOverflowWarning)]


@pytest.mark.parametrize("grad", [False, True], ids=["rollout", "training"])
def test_memlstm_warns_once_when_an_episode_outgrows_its_capacity(grad: bool) -> None:
    """Chunks of 1 and 3 steps without autograd take the step path, with autograd the engine."""
    torch.manual_seed(0)
    cell = make_cell("memlstm", input_size=IN, hidden_size=H, capacity=4)
    x = torch.randn(12, 2, IN)
    resets = torch.zeros(12, 2, dtype=torch.bool)
    resets[[0, 4, 8]] = True  # episodes of exactly 4 steps: full attention throughout
    with warnings.catch_warnings(record=True) as record, torch.set_grad_enabled(grad):
        warnings.simplefilter("always")
        state = None
        for begin in range(0, 12, 3):
            _, state = cell(x[begin:begin + 3], state, resets[begin:begin + 3])
        assert not overflow_warnings(record) and not cell.overflow_warned
        for t in range(12):  # one episode of 16 steps: the 5th outgrows the capacity
            _, state = cell(x[t:t + 1], state, torch.zeros(1, 2, dtype=torch.bool))
        cell(x, state)  # a chunk longer than the capacity
    (warning,) = overflow_warnings(record)
    assert "an episode reached 5 steps, past capacity=4" in str(warning.message)
    assert cell.overflow_warned


def test_memlstm_reports_the_steps_that_attend_a_window() -> None:
    torch.manual_seed(0)
    cell = make_cell("memlstm", input_size=IN, hidden_size=H, capacity=4)
    resets = torch.zeros(10, 2, dtype=torch.bool)
    resets[5, 1] = True  # item 1: episodes of 5 steps, item 0: one of 10
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MemoryOverflowWarning)
        diagnostics = cell.forward_aux(torch.randn(10, 2, IN), None, resets).aux.diagnostics
    # Item 0 attends a window at steps 4..9 (6 of them), item 1 at steps 4 and 9 (episode step 4).
    assert float(diagnostics["memory_overflow"]) == pytest.approx(8 / 20)
    roomy = make_cell("memlstm", input_size=IN, hidden_size=H, capacity=10)
    assert float(roomy.forward_aux(torch.randn(10, 2, IN)).aux.diagnostics[
        "memory_overflow"]) == 0.0


@pytest.mark.slow  # a long CLI check: run with -m slow
def test_memlstm_overflow_reaches_progress_csv_and_evaluation_sets_the_capacity(
        tmp_path: Path) -> None:
    """Training with capacity 4 on DoorKey-5x5 warns once and logs ``memory/memory_overflow``;
    the evaluation raises the capacity to DoorKey-5x5's 250 steps (full attention, no
    warning), as the transfer suites do (:func:`experiments.common.sweep.full_attention`), and
    ``+eval_memory.capacity=4`` keeps the training window."""
    stderr = train_tiny_ppo(tmp_path, "memory=memlstm", "memory.capacity=4")
    assert stderr.count(OVERFLOW) == 1, stderr[-3000:]
    with (tmp_path / "progress.csv").open(newline="") as file:
        rows = list(csv.DictReader(file))
    assert rows and all(float(row["memory/memory_overflow"]) > 0 for row in rows)
    assert OVERFLOW not in evaluate_tiny(tmp_path)
    report = json.loads((tmp_path / "eval" / "DoorKey-5x5_sampled_1ep_seed0,capacity=250.json")
                        .read_text())
    assert report["eval_memory"] == {"capacity": 250}
    assert evaluate_tiny(tmp_path, "+eval_memory.capacity=4").count(OVERFLOW) == 1


# --- ReLRNN: modReLU (Arjovsky et al., 2016; Kerg et al., 2020, Tables 6 and 8) -------------

def test_modrelu_is_the_papers_formula() -> None:
    torch.manual_seed(0)
    modrelu = ModReLU(5).double()
    with torch.no_grad():
        modrelu.bias.copy_(torch.tensor([-0.5, -0.1, 0.0, 0.2, 1.0], dtype=torch.float64))
    z = torch.randn(7, 5, dtype=torch.float64)
    expected = torch.relu(z.abs() + modrelu.bias) * z / z.abs()
    torch.testing.assert_close(modrelu(z), expected, atol=1e-15, rtol=0)
    assert modrelu(torch.zeros(1, 5, dtype=torch.float64)).abs().sum() == 0


def relrnn_by_hand(cell: ReLRNN, x: Tensor) -> Tensor:
    r"""Eq. 1 with modReLU, and attention over every state so far (no state has left S yet):
    :math:`h_t = \mathrm{modReLU}(V s_{t-1} + U x_t + b)`,
    :math:`s_t = h_t + \sum_i \mathrm{softmax}_i(v_a^\top \tanh(W_a s_{t-1} + b_a + U_a h_i))
    h_i`."""
    attention = cell.attention
    s = torch.zeros(x.shape[1], cell.hidden_size, dtype=torch.float64)
    states, outputs = [], []
    for x_t in x:
        z = s @ cell.recurrent_map.weight.T + x_t @ cell.input_map.weight.T + cell.input_map.bias
        h = torch.relu(z.abs() + cell.modrelu.bias) * torch.sign(z)
        states.append(h)
        memory = torch.stack(states, dim=1)  # (B, t, H)
        query = s @ attention.query.weight.T + attention.query.bias
        logits = (torch.tanh(query[:, None] + memory @ attention.key.weight.T)
                  @ attention.score.weight.T).squeeze(-1)
        s = h + (torch.softmax(logits, dim=1)[..., None] * memory).sum(1)
        outputs.append(s)
    return torch.stack(outputs)


def test_relrnn_modrelu_computes_eq1_and_trains_its_bias() -> None:
    torch.manual_seed(0)
    cell = make_cell("relrnn", input_size=IN, hidden_size=H, short_term=6, relevant=2,
                     nonlinearity=BaseNonlinearity.modrelu).double()
    assert isinstance(cell, ReLRNN) and not cell.runs_engine()
    with torch.no_grad():
        cell.modrelu.bias.copy_(0.3 * torch.randn(H, dtype=torch.float64))
    x = torch.randn(5, 3, IN, dtype=torch.float64)
    y, _ = cell(x)
    torch.testing.assert_close(y, relrnn_by_hand(cell, x), atol=1e-12, rtol=0)
    y.pow(2).sum().backward()
    assert cell.modrelu.bias.grad is not None and cell.modrelu.bias.grad.abs().min() > 0
    tanh = make_cell("relrnn", input_size=IN, hidden_size=H, nonlinearity="tanh")
    assert isinstance(tanh, ReLRNN) and tanh.runs_engine() and not hasattr(tanh, "modrelu")


# --- ReLSTM: R starts with the first ρ states (Algorithm 1) unless screened by share ---------

MARKED = (5, 8)
"""Steps whose input marks them; attention on the example below singles out their states."""


def marked_example(name: str, screening: Screening) -> Cell:
    r"""A cell, hidden size 2, whose state :math:`h_t` depends on :math:`x_t` alone, ±c in its
    first unit for an input of ±1, and whose attention logit is about ±10 on a state of ±c:
    attention all but ignores unmarked states next to marked ones, and splits exactly evenly
    among unmarked ones."""
    cell = make_cell(name, input_size=1, hidden_size=2, short_term=2, relevant=2,
                     screening=screening).double()
    with torch.no_grad():
        for parameter in cell.parameters():
            parameter.zero_()
        if isinstance(cell, ReLRNN):
            cell.input_map.weight[0, 0] = 10.0  # h = tanh(10 x) ≈ ±1
            key_gain = 3.0
        else:  # LSTM: g = tanh(10 x), a closed forget gate, i = o = 1/2: h = tanh(g / 2) / 2
            assert isinstance(cell, ReLSTM)
            lstm = cell.base.cell
            lstm.weight_ih[2 * 2, 0] = 10.0  # block g, unit 0
            lstm.bias_ih[2:4] = -1000.0  # block f: σ = 0 exactly, so c_t = i g
            key_gain = 20.0
        cell.attention.key.weight[0, 0] = key_gain
        cell.attention.score.weight[0, 0] = 10.0
    return cell


@pytest.mark.parametrize("name", ["relstm", "relrnn"])
def test_normalised_screening_starts_r_empty_of_the_first_states(name: str) -> None:
    x = -torch.ones(12, 1, 1, dtype=torch.float64)
    x[list(MARKED)] = 1.0
    admitted = {}
    for screening in Screening:
        out = marked_example(name, screening).forward_aux(x)
        state = out.state
        admitted[screening] = set(state.relevant_time[state.relevant_valid].tolist())
        if screening is Screening.normalised:  # R stays empty until the first marked state
            first_entry = MARKED[0] + 2  # leaves S (ν = 2) and enters R at this step
            assert not out.aux.traces["relevant_valid"][:first_entry].any()
    # Algorithm 1: the first state keeps the score its few competitors inflated; the second
    # is replaced by the first marked state, whose score beats it.
    assert admitted[Screening.algorithm1] == {0, MARKED[0]}
    assert admitted[Screening.normalised] == set(MARKED)


def test_screen_admits_to_a_free_slot_only_above_the_floor() -> None:
    relevant, score = torch.zeros(1, 2, 1), torch.zeros(1, 2)
    valid, time = torch.zeros(1, 2, dtype=torch.bool), torch.zeros(1, 2, dtype=torch.long)
    args = (torch.ones(1, 1), torch.tensor([0.9]), torch.tensor([True]), torch.tensor([3]))
    assert screen(relevant, score, valid, time, *args)[2].any()  # Algorithm 1: any state
    assert not screen(relevant, score, valid, time, *args, floor=UNIFORM_SHARE)[2].any()


@pytest.mark.parametrize(("name", "options"), [
    ("irnn", {"K": 2, "rank": 3}),
    ("relrnn", {"nonlinearity": BaseNonlinearity.modrelu}),
    ("relrnn", {"screening": Screening.normalised}),
    ("relstm", {"screening": Screening.normalised, "short_term": 2, "relevant": 2}),
    ("relstm", {"readout": Readout.authors_code, "short_term": 2, "relevant": 2}),
    ("relrnn", {"readout": Readout.authors_code}),
])
def test_new_options_reset_exactly_and_carry_state_across_chunks(name: str,
                                                                 options: dict[str, Any]
                                                                 ) -> None:
    """After a reset a batch item computes what a fresh run of its episode computes; a chunked
    run computes what one call computes."""
    torch.manual_seed(0)
    cell = make_cell(name, input_size=IN, hidden_size=H, **options).double()
    x = torch.randn(14, 2, IN, dtype=torch.float64)
    resets = torch.zeros(14, 2, dtype=torch.bool)
    resets[6, 0] = True
    y = cell(x, None, resets)[0]
    torch.testing.assert_close(y[6:, :1], cell(x[6:, :1])[0], atol=1e-12, rtol=0)
    y_chunks, state = [], None
    for begin, end in itertools.pairwise((0, 1, 5, 9, 14)):
        out, state = cell(x[begin:end], state, resets[begin:end])
        y_chunks.append(out)
    torch.testing.assert_close(torch.cat(y_chunks), y, atol=1e-12, rtol=0)


@pytest.mark.parametrize("name", ["relstm", "relrnn"])
def test_authors_code_readout_against_a_hand_written_loop(name: str) -> None:
    """``readout=authors_code`` emits :math:`h_t` and feeds the recurrence
    :math:`s_t = \\tfrac12 (h_t + \\text{read}_t)`, written here step by step in float64 from
    the cell's own modules. With ν larger than the sequence, R stays empty and S holds every
    state so far."""
    torch.manual_seed(0)
    steps, batch = 5, 2
    cell = make_cell(name, input_size=IN, hidden_size=H, short_term=steps, relevant=2,
                     readout=Readout.authors_code).double()
    x = torch.randn(steps, batch, IN, dtype=torch.float64)
    s, c = torch.zeros(batch, H, dtype=torch.float64), torch.zeros(batch, H, dtype=torch.float64)
    memory, expected = [], []
    for t in range(steps):
        if isinstance(cell, ReLSTM):
            h, c = cell.base.cell(x[t], (s, c))
        else:
            assert isinstance(cell, ReLRNN)
            h = torch.tanh(cell.recurrent_map(s) + cell.input_map(x[t]))
        memory.append(h)
        slots = torch.stack(memory, dim=1)
        _, read = cell.attention(s, slots, torch.ones(batch, t + 1, dtype=torch.bool))
        s = 0.5 * (h + read)
        expected.append(h)
    out, state = cell(x)
    torch.testing.assert_close(out, torch.stack(expected), atol=1e-12, rtol=0)
    torch.testing.assert_close(state.s, s, atol=1e-12, rtol=0)
    assert "readout=authors_code" in repr(cell)
