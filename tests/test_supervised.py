"""The supervised CLI: every task with every cell, resume, bad input, non-finite losses."""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from cli_runner import run_cli
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import DictConfig, OmegaConf

from rlmem.cells import CELLS, CellOutput, make_cell
from rlmem.cells.memlstm import MemoryOverflowWarning
from rlmem.evaluate import evaluate_run
from rlmem.runs import CheckpointMismatchError, load_checkpoint, resolved_config
from rlmem.runs.checkpoint import check_compatible, save_checkpoint
from rlmem.schema.evaluate import EvaluateConfig
from rlmem.schema.memory import CONF_DIR
from rlmem.schema.supervised import check_supervised_config
from rlmem.supervised import RESUME_SECTIONS, run
from rlmem.tasks import TASKS, NonFiniteLossError, SequenceModel
from rlmem.tasks import trainer as trainer_module
from rlmem.tasks.held_out import Confirmation, confirmation_score, confirmation_seed, evaluate
from rlmem.tasks.recall import RecallTask

TINY = ["seq_len=4", "batch_size=2", "iterations=2", "memory.hidden_size=8", "eval_every=1",
        "log_every=1", "checkpoint_every=1", "eval_batch_size=2", "progress_bar=false"]

TRACE_FIGURES = {"relstm": "attention.png", "relrnn": "attention.png",
                 "memlstm": "attention.png", "sarnn": "update_pattern.png", "tarnn": "beta.png"}


def config(*overrides: str) -> DictConfig:
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="supervised", overrides=list(overrides))


def rows(run_dir: Path) -> list[dict[str, str]]:
    with (run_dir / "progress.csv").open(newline="") as file:
        return list(csv.DictReader(file))


@pytest.mark.parametrize("cell", sorted(CELLS))
@pytest.mark.parametrize("task", sorted(TASKS))
def test_every_task_with_every_cell(task: str, cell: str, tmp_path: Path) -> None:
    figures = task == "copy"  # the figures do not depend on the task; draw them once per cell
    cfg = config(f"task={task}", f"memory={cell}", *TINY, "eval_seq_lens=[6]",
                 f"figures={figures}")
    result = run(cfg, tmp_path)
    assert result.iteration == 2
    metric = "mse" if task == "adding" else "accuracy"
    assert {f"eval/{metric}@T4", f"eval/{metric}@T6"} <= set(result.final)
    assert all(math.isfinite(value) for value in result.final.values())
    logged = rows(tmp_path)
    assert [int(float(row["iteration"])) for row in logged] == [1, 2]
    assert "baseline/mse" in logged[0] if task == "adding" else "baseline/ce" in logged[0]
    assert any((tmp_path / "tb").iterdir())
    assert (tmp_path / "checkpoint.pt").exists() and (tmp_path / "config.yaml").exists()
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["iterations"] == 2 and results["memory"] == cell
    if figures:
        assert (tmp_path / "learning_curve.png").exists()
        if cell in TRACE_FIGURES:
            assert (tmp_path / TRACE_FIGURES[cell]).exists()
        written = {path.name for path in tmp_path.glob("*.png")}
        assert written <= {"learning_curve.png", TRACE_FIGURES.get(cell, "")}


def test_aux_losses_reach_the_loss(tmp_path: Path) -> None:
    """SA-RNN's update budget is logged as an aux loss and is part of train/loss."""
    cfg = config("memory=sarnn", "memory.lam=0.5", *TINY, "figures=false")
    run(cfg, tmp_path)
    row = rows(tmp_path)[-1]
    aux = [key for key in row if key.startswith("aux/")]
    assert aux and float(row[aux[0]]) > 0
    assert float(row["train/loss"]) == pytest.approx(
        float(row["train/ce"]) + sum(float(row[key]) for key in aux), rel=1e-4)
    assert any(key.startswith("memory/") for key in row)


def test_transfer_copy_config() -> None:
    cfg = config("task=transfer_copy")
    assert cfg.task.name == "copy"
    assert list(cfg.eval_seq_lens) == [200, 400, 2000, 5000]  # the paper's Table 1
    assert list(config("task=transfer_copy", "eval_seq_lens=[300]").eval_seq_lens) == [300]


def test_resume_continues_exactly(tmp_path: Path) -> None:
    """A run stopped at iteration 2 and resumed to 4 equals a straight run to 4."""
    common = ["memory=relstm", *TINY, "figures=false"]
    run(config(*common, "iterations=2"), tmp_path / "resumed")
    run(config(*common, "iterations=4"), tmp_path / "resumed")
    run(config(*common, "iterations=4"), tmp_path / "straight")
    resumed = load_checkpoint(tmp_path / "resumed" / "checkpoint.pt")
    straight = load_checkpoint(tmp_path / "straight" / "checkpoint.pt")
    assert resumed.count("iteration") == straight.count("iteration") == 4
    for key, value in straight.states["model"].items():
        assert torch.equal(value, resumed.states["model"][key]), key
    assert [int(float(row["iteration"])) for row in rows(tmp_path / "resumed")] == [1, 2, 3, 4]
    assert [row["train/loss"] for row in rows(tmp_path / "resumed")] == \
        [row["train/loss"] for row in rows(tmp_path / "straight")]


def test_a_run_that_drew_its_data_on_a_gpu_says_so_when_resumed_on_the_cpu(
        tmp_path: Path) -> None:
    """A CUDA generator's state (Philox's seed and offset: 16 bytes) cannot go on in a CPU
    generator: the error names the devices, not a corrupt file, and nothing is written."""
    run(config(*TINY, "figures=false", "device=cpu"), tmp_path)
    path = tmp_path / "checkpoint.pt"
    checkpoint = load_checkpoint(path)
    save_checkpoint(path, dataclasses.replace(
        checkpoint, config={**checkpoint.config, "device": "cuda"},
        rng={**checkpoint.rng, "data": torch.zeros(16, dtype=torch.uint8)}))
    files = [path, tmp_path / "progress.csv", tmp_path / "config.yaml"]
    before = [file.read_bytes() for file in files]
    with pytest.raises(CheckpointMismatchError, match=r"another kind of device than this "
                       r"run's cpu \(its config says device=cuda;"):
        run(config(*TINY, "iterations=4", "figures=false", "device=cpu"), tmp_path)
    assert [file.read_bytes() for file in files] == before


def test_rerunning_a_finished_run_reports_it_without_training(tmp_path: Path) -> None:
    first = run(config(*TINY, "figures=false"), tmp_path)
    again = run(config(*TINY, "figures=false"), tmp_path)
    assert again.iteration == 2 and again.final == first.final
    assert len(rows(tmp_path)) == 2


@pytest.mark.parametrize("task", ["copy", "adding"])
def test_bf16_autocast(task: str, tmp_path: Path) -> None:
    result = run(config(f"task={task}", "memory=relstm", *TINY, "amp=true", "figures=false"),
                 tmp_path)
    assert all(math.isfinite(value) for value in result.final.values())


def test_resume_refuses_a_different_cell_config(tmp_path: Path) -> None:
    run(config(*TINY, "figures=false"), tmp_path)
    with pytest.raises(CheckpointMismatchError, match=r"memory\.hidden_size"):
        run(config(*TINY, "memory.hidden_size=16", "figures=false"), tmp_path)
    run(config(*TINY, "memory.hidden_size=16", "figures=false", "resume=false"), tmp_path)


def test_non_finite_loss_stops_and_keeps_the_last_good_checkpoint(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    forward = SequenceModel.forward
    calls = {"n": 0}

    def poisoned(self: SequenceModel, inputs: torch.Tensor,
                 state: object | None = None) -> tuple[torch.Tensor, CellOutput]:
        outputs, result = forward(self, inputs, state)
        if torch.is_grad_enabled():
            calls["n"] += 1
            if calls["n"] == 3:
                outputs = outputs * float("nan")
        return outputs, result

    monkeypatch.setattr(SequenceModel, "forward", poisoned)
    with pytest.raises(NonFiniteLossError, match="iteration 3"):
        # device=cpu: on CUDA the replayed graph makes no Python forward call to poison
        run(config(*TINY, "iterations=5", "figures=false", "device=cpu"), tmp_path)
    checkpoint = load_checkpoint(tmp_path / "checkpoint.pt")
    assert checkpoint.count("iteration") == 2
    assert all(torch.isfinite(value).all() for value in checkpoint.states["model"].values())
    # The divergence is the run's result: the same config and seed would diverge again.
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["iterations"] == 2 and results["eval"] == {} and results["cpu_s"] > 0
    assert "non-finite loss at iteration 3" in results["diverged"]


@pytest.mark.parametrize(("override", "message"), [
    ("seq_len=0", "seq_len"),
    ("eval_seq_lens=[0]", "eval_seq_lens"),
    ("batch_size=0", "batch_size"),
    ("lr=0", "lr"),
    ("grad_clip=-1", "grad_clip"),
    ("seq_len_min=5", r"seq_len_min must be null or in \[1, seq_len=4\]"),
    ("seq_len_min=0", "seq_len_min"),
    ("confirm_batches=101", r"confirm_batches must be in \[0, 100\]"),
    ("device=cuda:7", "device"),
])
def test_bad_values_fail_before_training(override: str, message: str, tmp_path: Path) -> None:
    if override.startswith("device") and torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    with pytest.raises(ValueError, match=message):
        run(config(*TINY, override), tmp_path)
    assert not (tmp_path / "progress.csv").exists()


def test_eval_memory_must_keep_the_weights(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="weights"):
        run(config(*TINY, "memory=memlstm", "+eval_memory.hidden_size=9"), tmp_path)


def test_eval_memory_extends_memlstm_for_transfer(tmp_path: Path) -> None:
    cfg = config(*TINY, "memory=memlstm", "memory.capacity=24", "eval_seq_lens=[40]",
                 "+eval_memory.capacity=60", "figures=false")
    result = run(cfg, tmp_path)
    assert math.isfinite(result.final["eval/ce@T40"])


def test_memlstm_attends_over_the_longest_evaluated_sequence(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Without an eval_memory, MemLSTM's capacity is raised to the longest eval_seq_lens
    sequence (copy: T + 20 steps) for those evaluations: said, recorded in the config, and
    no sliding window; a capacity given by hand is kept."""
    cfg = config(*TINY, "memory=memlstm", "memory.capacity=24", "eval_seq_lens=[40,30]",
                 "figures=false")
    with warnings.catch_warnings():
        warnings.simplefilter("error", MemoryOverflowWarning)
        result = run(cfg, tmp_path / "full")
    assert math.isfinite(result.final["eval/ce@T40"])
    recorded = OmegaConf.load(tmp_path / "full" / "config.yaml")
    assert recorded.eval_memory == {"capacity": 60}
    assert ("a sequence at T = 40 lasts 60 steps, so memlstm (trained with capacity=24) is "
            "evaluated with capacity=60" in capsys.readouterr().out)
    cfg = config(*TINY, "memory=memlstm", "memory.capacity=24", "eval_seq_lens=[40]",
                 "+eval_memory.capacity=24", "figures=false")
    with pytest.warns(MemoryOverflowWarning):
        run(cfg, tmp_path / "window")
    assert OmegaConf.load(tmp_path / "window" / "config.yaml").eval_memory == {"capacity": 24}


@pytest.mark.parametrize("override", ["task.recal=5", "seqlen=3", "seq_len=abc",
                                      "optimizer=adamw", "memory.capacityy=3", "task=cpy"])
def test_typos_fail_when_composing(override: str) -> None:
    with pytest.raises(ConfigCompositionException):
        config(override)


def test_cli_runs_and_reports(tmp_path: Path) -> None:
    args = ["task=adding", "memory=tarnn", *TINY, "figures=false"]
    done = run_cli("rlmem.supervised", *args, f"run_dir={tmp_path / 'ok'}", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "naive baseline mse" in done.stdout and "0.167" in done.stdout
    assert "finished 2 iterations" in done.stdout
    bad = run_cli("rlmem.supervised", *args, "seq_len=1", f"run_dir={tmp_path / 'bad'}",
                  cwd=tmp_path)
    assert bad.returncode == 1 and "error: seq_len=1" in bad.stderr


@pytest.mark.slow
def test_lstm_gets_well_below_the_copy_baseline_at_small_delay(tmp_path: Path) -> None:
    """Copy with 3 symbols to recall at T=10: baseline 3·log 8 / 16 = 0.39."""
    cfg = config("task=copy", "task.recall=3", "memory=lstm", "seq_len=10", "batch_size=64",
                 "iterations=1500", "lr=1e-2", "eval_every=500", "progress_bar=false",
                 "figures=false")
    result = run(cfg, tmp_path)
    baseline = 3 * math.log(8) / 16
    assert result.final["eval/ce@T10"] < 0.5 * baseline
    assert result.final["eval/accuracy@T10"] > 0.6


@pytest.mark.slow
def test_memlstm_solves_copy_at_small_delay(tmp_path: Path) -> None:
    """The papers' copy (10 symbols) at T=10: baseline 10·log 8 / 30 = 0.69.

    8000 iterations: at 1500 (this test's first budget) seed 0 stood at ce 0.44 and still
    falling, where an older commit happened to have reached 0.07 (seeds 1 and 2: 0.45 and 0.43
    today, 0.23 and 0.56 then); at 4000 it reached 0.061 and 94.5% on 2026-11-26, but 0.175 and
    79.5% on another machine on 2026-11-27, with the same code (the commit that wrote the
    0.061 gives 0.175 there too), so one seed's curve differs between machines (the CPU's
    float kernels are the likeliest cause; not established). There
    it falls steadily, 0.112 at 5000, 0.054 at 6000, 0.013 and 98.8% at 8000 (190 s of CPU).
    """
    cfg = config("task=copy", "memory=memlstm", "memory.capacity=30", "seq_len=10",
                 "batch_size=64", "iterations=8000", "lr=3e-3", "eval_every=1000",
                 "progress_bar=false", "figures=false")
    result = run(cfg, tmp_path)
    baseline = 10 * math.log(8) / 30
    assert result.final["eval/ce@T10"] < 0.2 * baseline
    assert result.final["eval/accuracy@T10"] > 0.9


def test_rlmem_evaluate_refuses_a_supervised_run(tmp_path: Path) -> None:
    run(config(*TINY, "figures=false"), tmp_path)
    with pytest.raises(ValueError, match=r"is a supervised run \(task=copy\), not an RL agent"):
        evaluate_run(EvaluateConfig(run=str(tmp_path)))


SUITE_CONF = Path(__file__).resolve().parents[1] / "experiments" / "supervised" / "conf"
"""The supervised suite's own presets (its ablations and curricula, ``preset/``), which
``+preset=`` finds once this config root is on Hydra's search path."""
PRESETS = {**{path.stem: [] for path in (CONF_DIR / "preset").glob("*.yaml")},
           **{path.stem: [f"hydra.searchpath=[file://{SUITE_CONF}]"]
              for path in (SUITE_CONF / "preset").glob("*.yaml")}}
"""Every preset, and what finds it: the library's, then the suite's own."""


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_paper_preset_composes_and_checks(preset: str) -> None:
    cfg = config(*PRESETS[preset], f"+preset={preset}")
    check_supervised_config(cfg)
    first_stage = "_curriculum_T" in preset  # trained for a fixed budget, then continued
    # The papers' 128, or the authors' copy script's batch of 10 for the ``_script`` rows.
    assert cfg.memory.hidden_size == 128
    assert cfg.batch_size == (10 if "_script" in preset else 128)
    assert (cfg.target is None) == first_stage
    assert cfg.task.name in preset and cfg.memory.name in preset  # named after what it runs
    if "_T" in preset:
        assert cfg.seq_len == int(preset.rsplit("_T", 1)[1])
    if "transfer_copy" in preset and cfg.memory.name != "memlstm" and not first_stage:
        assert list(cfg.eval_seq_lens) == [200, 400, 2000, 5000]


def test_a_command_line_override_beats_the_preset() -> None:
    cfg = config("+preset=kerg2020_table1_transfer_copy_relstm", "memory.hidden_size=32",
                 "seed=2")
    assert cfg.memory.hidden_size == 32 and cfg.memory.short_term == 10 and cfg.seed == 2


def test_a_target_stops_training_at_the_first_evaluation_that_meets_it(tmp_path: Path) -> None:
    """Adding with a target MSE every model meets stops after the first evaluation; the run
    records when, and a rerun trains no further."""
    overrides = ["task=adding", *TINY, "iterations=50", "eval_every=3", "checkpoint_every=50",
                 "target=10.0", "figures=false"]
    result = run(config(*overrides), tmp_path)
    assert result.converged_at == 3 and result.iteration == 3
    assert json.loads((tmp_path / "results.json").read_text())["converged_at"] == 3
    assert load_checkpoint(tmp_path / "checkpoint.pt").count("iteration") == 3
    again = run(config(*overrides), tmp_path)
    assert again.iteration == 3 and again.converged_at == 3


def test_a_confirmed_target_stops_only_when_fresh_batches_meet_it_too(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``confirm_batches`` the target must hold on the pooled confirmation batches as
    well: met there, the run stops at once and records their score; missed there, it trains on
    through evaluations its batch alone would have stopped at."""
    overrides = ["task=adding", *TINY, "iterations=6", "eval_every=3", "checkpoint_every=50",
                 "target=10.0", "confirm_batches=2", "figures=false"]
    confirmed = run(config(*overrides), tmp_path / "confirmed")
    assert confirmed.converged_at == 3
    results = json.loads((tmp_path / "confirmed" / "results.json").read_text())
    assert 0 <= results["eval"]["confirmed_mse@T4"] <= 10.0
    drawn: list[int] = []

    def missed(*args: object, **kwargs: object) -> Confirmation:
        drawn.append(1)
        return Confirmation([11.0, 12.0])  # pooled 11.5: above the target MSE of 10

    monkeypatch.setattr(trainer_module, "confirmation_score", missed)
    unconfirmed = run(config(*overrides), tmp_path / "unconfirmed")
    assert unconfirmed.converged_at is None and unconfirmed.iteration == 6
    assert len(drawn) == 2  # asked at both evaluations, 3 and 6
    # A run that stopped without confirmation, run again under it, re-checks its stop and
    # trains on (the suite skips a run that has a results.json; run() resumes it).
    unconfirmed_overrides = [o for o in overrides if not o.startswith("confirm_batches")]
    monkeypatch.undo()
    assert run(config(*unconfirmed_overrides), tmp_path / "reopened").converged_at == 3
    # Run again under confirmation that holds, it stays stopped and records the confirmation.
    again = run(config(*overrides), tmp_path / "reopened")
    assert again.converged_at == 3 and again.iteration == 3
    assert "eval/confirmed_mse@T4" in again.final
    monkeypatch.setattr(trainer_module, "confirmation_score", missed)
    reopened = run(config(*overrides), tmp_path / "reopened")
    assert reopened.converged_at is None and reopened.iteration == 6


def test_confirmation_batches_are_new_batches_and_each_run_has_its_own() -> None:
    """Batch k of seed s is no evaluation batch of any seed below 1000, differs from the run's
    own, and ``first`` skips the batches a stop rule already drew."""
    task = TASKS["adding"]()
    model = SequenceModel(make_cell("lstm", input_size=task.input_size, hidden_size=4),
                          task.output_size, task.categorical)
    device = torch.device("cpu")
    own = evaluate(model, task, [10], 8, 0, device)["mse@T10"]
    scores = confirmation_score(model, task, 10, 3, 8, 0, device).scores
    assert len({own, *scores}) == 4
    assert confirmation_score(model, task, 10, 2, 8, 0, device, first=1).scores == scores[1:]
    assert confirmation_seed(0, 99) < confirmation_seed(1, 0)
    with pytest.raises(ValueError, match="out of range"):
        confirmation_seed(0, 100)


@pytest.mark.parametrize("transfer_every", [None, 2])
def test_transfer_lengths_are_evaluated_on_their_own_schedule(
        transfer_every: int | None, tmp_path: Path) -> None:
    """seq_len is evaluated every eval_every; the costly transfer lengths every transfer_every
    and always at the end, so the final results carry them."""
    every = "null" if transfer_every is None else str(transfer_every)
    cfg = config("task=copy", "memory=lstm", *TINY, "iterations=5", "eval_seq_lens=[6]",
                 f"transfer_every={every}", "figures=false")
    result = run(cfg, tmp_path)
    evaluated_at = {int(float(row["iteration"])): row for row in rows(tmp_path)}
    assert all(row["eval/accuracy@T4"] for row in evaluated_at.values())
    transferred = sorted(step for step, row in evaluated_at.items() if row["eval/accuracy@T6"])
    assert transferred == ([5] if transfer_every is None else [2, 4, 5])
    assert "eval/accuracy@T6" in result.final


def test_transfer_every_must_be_a_multiple_of_eval_every() -> None:
    with pytest.raises(ValueError, match="transfer_every must be a positive multiple"):
        check_supervised_config(config("eval_every=3", "transfer_every=4"))


def test_warm_start_takes_the_weights_and_nothing_else(tmp_path: Path) -> None:
    """A curriculum: weights trained at T=4 start a run at T=6, whose optimizer, data stream and
    iteration count start afresh; its own checkpoint, once written, wins over the warm start."""
    common = ["memory=relstm", *TINY, "figures=false"]
    run(config(*common), tmp_path / "short")
    source = load_checkpoint(tmp_path / "short" / "checkpoint.pt").states["model"]
    warm = config(*common, "seq_len=6", "iterations=1", f"warm_start={tmp_path / 'short'}")
    model_at_start: dict[str, torch.Tensor] = {}
    load_state_dict = SequenceModel.load_state_dict

    def record(self: SequenceModel, state: Any, *args: Any, **kwargs: Any) -> Any:
        model_at_start.update({key: value.clone() for key, value in state.items()})
        return load_state_dict(self, state, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(SequenceModel, "load_state_dict", record)
        result = run(warm, tmp_path / "long")
    assert result.iteration == 1
    for key, value in source.items():
        assert torch.equal(model_at_start[key], value), key
    assert [int(float(row["iteration"])) for row in rows(tmp_path / "long")] == [1]
    # resuming the warm-started run continues its own checkpoint, even with the source gone
    (tmp_path / "short" / "checkpoint.pt").unlink()
    resumed = run(config(*common, "seq_len=6", "iterations=2",
                         f"warm_start={tmp_path / 'short'}"), tmp_path / "long")
    assert resumed.iteration == 2
    assert [int(float(row["iteration"])) for row in rows(tmp_path / "long")] == [1, 2]


def test_warm_start_refuses_another_model_or_no_checkpoint(tmp_path: Path) -> None:
    run(config("memory=relstm", *TINY, "figures=false"), tmp_path / "short")
    with pytest.raises(ValueError, match=r"memory\.short_term: 5 there, 3 here"):
        run(config("memory=relstm", "memory.short_term=3", *TINY,
                   f"warm_start={tmp_path / 'short'}"), tmp_path / "other")
    with pytest.raises(ValueError, match="no checkpoint there"):
        run(config("memory=relstm", *TINY, f"warm_start={tmp_path / 'nothing'}"),
            tmp_path / "other")
    assert not (tmp_path / "other").exists()  # refused before any work


def training_delays(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record the delay of every training batch (batch size 3; evaluation batches have 2)."""
    sample = RecallTask.sample
    delays: list[int] = []

    def recording(self: RecallTask, batch_size: int, seq_len: int,
                  generator: torch.Generator) -> Any:
        if batch_size == 3:
            delays.append(seq_len)
        return sample(self, batch_size, seq_len, generator)

    monkeypatch.setattr(RecallTask, "sample", recording)
    return delays


def test_varied_training_delays_are_drawn_from_the_range_and_resume_exactly(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    delays = training_delays(monkeypatch)
    common = [*TINY, "seq_len=6", "seq_len_min=2", "batch_size=3", "figures=false"]
    run(config(*common, "iterations=12"), tmp_path / "resumed")
    run(config(*common, "iterations=24"), tmp_path / "resumed")
    resumed, delays[:] = list(delays), []
    result = run(config(*common, "iterations=24"), tmp_path / "straight")
    assert resumed == delays and len(delays) == 24
    assert set(delays) <= set(range(2, 7)) and len(set(delays)) >= 3
    assert [row["train/loss"] for row in rows(tmp_path / "resumed")] == \
        [row["train/loss"] for row in rows(tmp_path / "straight")]
    assert set(result.final) == {"eval/ce@T6", "eval/accuracy@T6"}  # evaluated at seq_len


def test_a_fixed_delay_draws_nothing_from_the_training_stream(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``seq_len_min=seq_len`` is the same run as no ``seq_len_min``: same batches, same
    losses, so runs made before the option keep their data stream."""
    delays = training_delays(monkeypatch)
    common = [*TINY, "batch_size=3", "iterations=4", "figures=false"]
    run(config(*common), tmp_path / "fixed")
    run(config(*common, "seq_len_min=4"), tmp_path / "range_of_one")
    assert delays == [4] * 8
    assert [row["train/loss"] for row in rows(tmp_path / "fixed")] == \
        [row["train/loss"] for row in rows(tmp_path / "range_of_one")]


def test_a_run_at_a_fixed_delay_resumes_with_fixed_delays_only(tmp_path: Path) -> None:
    """A run trained at a fixed delay (``seq_len_min`` unset: every batch at seq_len) is
    compatible with its own config, and refused with varied delays, naming the key."""
    common = [*TINY, "figures=false", f"run_dir={tmp_path}"]
    run(config(*common), tmp_path)
    saved = load_checkpoint(tmp_path / "checkpoint.pt").config
    assert saved["seq_len_min"] is None
    check_compatible(saved, resolved_config(config(*common)), RESUME_SECTIONS)
    with pytest.raises(CheckpointMismatchError, match=r"seq_len_min: checkpoint has None"):
        check_compatible(saved, resolved_config(config(*common, "seq_len_min=2")),
                         RESUME_SECTIONS)
