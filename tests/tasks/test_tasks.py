"""The task generators against hand-checked examples, their metrics and their baselines."""

from __future__ import annotations

import math

import pytest
import torch

from rlmem.cells.relstm import ReLSTMState
from rlmem.schema.memory import CONF_DIR
from rlmem.schema.supervised import TASK_SCHEMAS
from rlmem.tasks import TASKS, SequenceModel, make_task, make_task_from_config, predict
from rlmem.tasks.figures import attention_matrix
from rlmem.tasks.held_out import evaluate, held_out_batch, run_in_chunks
from rlmem.tasks.metrics import held_share, recall_accuracy, sequence_cross_entropy
from rlmem.tasks.recall import RecallTask


def generator(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# --- copy ---------------------------------------------------------------------------------------

def test_copy_layout_small_example() -> None:
    task = make_task("copy", alphabet=8, recall=3)
    batch = task.sample(2, 5, generator())
    # T + 2·recall = 11 steps: 3 symbols, T-1 = 4 blanks, the delimiter, 3 blanks.
    assert batch.inputs.shape == batch.targets.shape == (11, 2)
    symbols = batch.inputs[:3]
    assert ((symbols >= 0) & (symbols < 8)).all()
    assert (batch.inputs[3:7] == 8).all()
    assert (batch.inputs[7] == 9).all()
    assert (batch.inputs[8:] == 8).all()
    assert (batch.targets[:8] == 8).all()
    assert torch.equal(batch.targets[8:], symbols)


def test_copy_paper_geometry() -> None:
    """Arjovsky et al.: T + 20 steps, delimiter at T+9, output in the last 10 steps."""
    task = make_task("copy")
    assert isinstance(task, RecallTask)
    T = 100
    batch = task.sample(16, T, generator())
    assert batch.length == T + 20 == task.total_length(T)
    assert task.delimiter_step(T) == T + 9
    assert (batch.inputs[T + 9] == 9).all()
    assert ((batch.inputs == 9).sum(dim=0) == 1).all()
    assert ((batch.inputs[10:T + 9] == 8).all())
    assert torch.equal(batch.targets[T + 10:], batch.inputs[:10])
    assert (batch.targets[:T + 10] == 8).all()


def test_copy_baseline_formula_and_memoryless_predictor() -> None:
    task = make_task("copy")
    for T in (1, 100, 2000):
        assert task.baseline(T).value == pytest.approx(10 * math.log(8) / (T + 20))
        assert task.baseline(T).metric == "ce"
    # The memoryless strategy itself scores the formula: blanks exactly, then uniform over 8.
    T = 30
    batch = task.sample(64, T, generator())
    logits = torch.full((T + 20, 64, 10), -1e9)
    logits[:T + 10, :, 8] = 0.0
    logits[T + 10:, :, :8] = 0.0
    ce = sequence_cross_entropy(logits, batch.targets)
    assert float(ce) == pytest.approx(task.baseline(T).value, rel=1e-5)
    assert float(recall_accuracy(logits, batch.targets, 10)) < 0.3  # argmax picks symbol 0


def test_recall_accuracy_counts_only_the_recalled_symbols() -> None:
    targets = torch.tensor([[8], [8], [1], [2], [3], [4]])
    logits = torch.nn.functional.one_hot(torch.tensor([[0], [0], [1], [2], [5], [5]]), 10)
    # The wrong blanks do not count; 2 of the 4 recalled symbols are right.
    assert float(recall_accuracy(logits.float(), targets, 4)) == pytest.approx(0.5)


# --- denoise ------------------------------------------------------------------------------------

def test_denoise_layout() -> None:
    task = make_task("denoise")
    T = 50
    batch = task.sample(64, T, generator(1))
    inputs, targets = batch.inputs, batch.targets
    assert inputs.shape == (T + 20, 64)
    assert (inputs[T + 9] == 9).all() and ((inputs == 9).sum(0) == 1).all()
    assert (inputs[T + 10:] == 8).all()
    assert (targets[:T + 10] == 8).all()
    for b in range(64):
        before = inputs[:T + 9, b]
        data = before[before != 8]
        assert len(data) == 10  # distinct positions: none overwritten
        assert torch.equal(data, targets[T + 10:, b])  # reproduced in input order
    # The symbols are scattered, not at the start as in copy.
    assert (inputs[:10] == 8).any()


def test_denoise_at_smallest_delay_is_copy() -> None:
    """With T = 1 the 10 symbols fill the only 10 steps before the delimiter: copy's layout."""
    batch = make_task("denoise").sample(8, 1, generator(2))
    assert ((batch.inputs[:10] >= 0) & (batch.inputs[:10] < 8)).all()
    assert (batch.inputs[10] == 9).all()


def test_denoise_positions_cover_the_delay_uniformly() -> None:
    task = make_task("denoise")
    assert isinstance(task, RecallTask)
    T = 20
    positions = task.data_positions(4000, T, generator(3))
    assert (positions.diff(dim=0) > 0).all()
    counts = torch.bincount(positions.flatten(), minlength=T + 9).float()
    assert counts.shape[0] == T + 9
    expected = 4000 * 10 / (T + 9)
    assert ((counts - expected).abs() < 0.1 * expected).all()


def test_denoise_baseline_is_copys() -> None:
    for T in (10, 100):
        assert make_task("denoise").baseline(T).value == pytest.approx(
            10 * math.log(8) / (T + 20))


# --- adding -------------------------------------------------------------------------------------

def test_adding_markers_and_label_sum() -> None:
    task = make_task("adding")
    T = 9
    batch = task.sample(256, T, generator(4))
    assert batch.inputs.shape == (T, 256, 2) and batch.targets.shape == (256,)
    values, indicator = batch.inputs[..., 0], batch.inputs[..., 1]
    assert ((values >= 0) & (values <= 1)).all()
    assert (indicator.sum(0) == 2).all()
    assert (indicator[:T // 2].sum(0) == 1).all()  # one marker in steps 0..3
    assert (indicator[T // 2:].sum(0) == 1).all()  # one in steps 4..8
    assert torch.allclose((values * indicator).sum(0), batch.targets)
    assert set(indicator.unique().tolist()) == {0.0, 1.0}


def test_adding_hand_example() -> None:
    batch = make_task("adding").sample(1, 2, generator(5))
    # T = 2: the markers must be at steps 0 and 1, so the label is the sum of both values.
    assert torch.equal(batch.inputs[:, 0, 1], torch.ones(2))
    assert float(batch.targets[0]) == pytest.approx(float(batch.inputs[:, 0, 0].sum()))


def test_adding_baseline() -> None:
    task = make_task("adding")
    assert task.baseline(100).value == pytest.approx(1 / 6)
    assert round(task.baseline(100).value, 3) == 0.167
    batch = task.sample(100_000, 10, generator(6))
    outputs = torch.ones(10, 100_000, 1)  # predict 1 at the last step
    assert float(task.metrics(outputs, batch)["mse"]) == pytest.approx(1 / 6, rel=0.02)


# --- common -------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(TASKS))
def test_seeded_and_on_the_generators_device(name: str) -> None:
    task = make_task(name)
    first = task.sample(4, 12, generator(7))
    second = task.sample(4, 12, generator(7))
    other = task.sample(4, 12, generator(8))
    assert torch.equal(first.inputs, second.inputs) and torch.equal(first.targets,
                                                                    second.targets)
    assert not torch.equal(first.inputs, other.inputs)
    assert first.inputs.device == torch.device("cpu")


DEVICES = ["cpu", *(["cuda"] if torch.cuda.is_available() else [])]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(TASKS))
def test_a_runs_held_out_batch_is_the_same_on_every_device(name: str, device: str) -> None:
    """The batch a run is scored on depends on its seed and T, not on where it trained: a CUDA
    run re-scored on the CPU (the experiments' scripts) sees the same sequences."""
    task = make_task(name)
    here = held_out_batch(task, 4, 3, 12, torch.device(device))
    cpu = held_out_batch(task, 4, 3, 12, torch.device("cpu"))
    assert here.inputs.device.type == device
    assert torch.equal(here.inputs.cpu(), cpu.inputs) and torch.equal(here.targets.cpu(),
                                                                      cpu.targets)
    assert not torch.equal(cpu.inputs, held_out_batch(task, 4, 4, 12, cpu.inputs.device).inputs)


@pytest.mark.parametrize("name", sorted(TASKS))
def test_bad_input_is_rejected(name: str) -> None:
    task = make_task(name)
    with pytest.raises(ValueError, match="seq_len"):
        task.sample(4, 0, generator())
    with pytest.raises(ValueError, match="batch_size"):
        task.sample(0, 10, generator())


def test_registry_errors_list_the_valid_choices() -> None:
    with pytest.raises(KeyError, match="adding, copy, denoise"):
        make_task("cpy")
    with pytest.raises(TypeError):
        make_task("copy", alphabett=8)
    with pytest.raises(ValueError, match="alphabet"):
        make_task("copy", alphabet=1)


@pytest.mark.parametrize("name", sorted(TASKS))
def test_tasks_build_from_their_schema(name: str) -> None:
    task = make_task_from_config(TASK_SCHEMAS[name]())
    assert task.name == name


def test_every_task_has_a_schema_and_a_config() -> None:
    assert set(TASKS) == set(TASK_SCHEMAS)
    configs = {path.stem for path in (CONF_DIR / "task").glob("*.yaml")}
    assert set(TASKS) <= configs
    assert configs - set(TASKS) == {"transfer_copy"}


# --- the model and evaluation -------------------------------------------------------------------

@pytest.mark.parametrize("cell", ["relstm", "memlstm", "lstm"])
def test_chunked_prediction_equals_one_pass(cell: str) -> None:
    from rlmem.cells import make_cell

    torch.manual_seed(0)
    task = make_task("copy", recall=3)
    model = SequenceModel(make_cell(cell, input_size=task.input_size, hidden_size=8),
                          task.output_size, task.categorical)
    batch = task.sample(3, 12, generator())
    with torch.no_grad():
        whole, _ = model(batch.inputs)
    assert torch.allclose(predict(model, batch, chunk=5), whole, atol=1e-6)


@pytest.mark.parametrize(("chunk", "traced"), [(5, 3), (4, 3), (64, 3), (5, 0), (7, 40)])
def test_chunked_run_keeps_the_last_steps_traces(chunk: int, traced: int) -> None:
    from rlmem.cells import make_cell

    torch.manual_seed(0)
    task = make_task("copy", recall=3)
    model = SequenceModel(make_cell("relstm", input_size=task.input_size, hidden_size=8),
                          task.output_size, task.categorical)
    batch = task.sample(3, 12, generator())  # 18 steps
    with torch.no_grad():
        whole, result = model(batch.inputs)
    run = run_in_chunks(model, batch.inputs, chunk=chunk, traced=traced)
    assert torch.allclose(run.outputs, whole, atol=1e-6)
    assert isinstance(run.state, ReLSTMState)
    assert torch.allclose(run.state.s, result.state.s, atol=1e-6)
    kept = min(traced, batch.length)
    if not kept:
        assert run.traces == {}
    for key, trace in result.aux.traces.items():
        if kept:
            assert torch.allclose(run.traces[key].float(), trace[-kept:].float(), atol=1e-6)


def test_attention_on_data_reads_the_recall_steps_attention() -> None:
    """Copy's data symbols are its first ``recall`` steps: the metric is the attention the
    last ``recall`` steps put on the slots made at those steps, by hand."""
    from rlmem.cells import make_cell

    torch.manual_seed(0)
    task = make_task("copy", recall=3)
    batch = task.sample(4, 12, generator())
    for cell in ("relstm", "memlstm"):
        model = SequenceModel(make_cell(cell, input_size=task.input_size, hidden_size=8),
                              task.output_size, task.categorical)
        with torch.no_grad():
            _, result = model(batch.inputs)
        attention = result.aux.traces["attention"][-3:]
        slot_time = result.aux.traces["slot_time"][-3:]
        by_hand = torch.where((slot_time >= 0) & (slot_time < 3), attention, 0.0).sum() / (3 * 4)
        metrics = task.trace_metrics(result.aux.traces, batch)
        assert float(metrics["attention_on_data"]) == pytest.approx(float(by_hand), rel=1e-6)
        assert 0 < float(by_hand) < 1
        held = [len({int(t) for t in slot_time[0, b] if 0 <= t < 3}) / 3 for b in range(4)]
        assert float(metrics["data_in_memory"]) == pytest.approx(sum(held) / 4, rel=1e-6)
        scores = evaluate(model, task, [12, 20], 4, seed=0, device=torch.device("cpu"))
        assert {"attention_on_data@T12", "attention_on_data@T20"} <= set(scores)
    lstm = SequenceModel(make_cell("lstm", input_size=task.input_size, hidden_size=8),
                         task.output_size, task.categorical)
    assert task.trace_metrics({}, batch) == {}
    assert "attention_on_data@T12" not in evaluate(lstm, task, [12], 4, seed=0,
                                                   device=torch.device("cpu"))


def test_attention_matrix_places_weights_at_slot_times() -> None:
    attention = torch.tensor([[1.0, 0.0, 0.0], [0.25, 0.75, 0.0], [0.5, 0.2, 0.3]])
    slot_time = torch.tensor([[0, -1, -1], [0, 1, -1], [2, 0, 1]])
    matrix = attention_matrix(attention, slot_time)
    expected = [[1.0, 0.0, 0.0], [0.25, 0.75, 0.0], [0.2, 0.3, 0.5]]
    assert torch.allclose(torch.from_numpy(matrix), torch.tensor(expected))


def test_held_share_counts_the_marked_states_some_slot_holds() -> None:
    marked = torch.zeros(8, 2, dtype=torch.bool)
    marked[:3] = True  # steps 0, 1, 2 in both sequences
    times = torch.tensor([[0, 5, -1], [2, 1, 7]])  # one of three held, then two of three
    assert float(held_share(times, marked)) == pytest.approx(0.5)
