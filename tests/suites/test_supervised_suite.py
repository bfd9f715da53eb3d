"""experiments.supervised: the suite's commands and the aggregate's RESULTS.md.

The aggregate is fed tiny real runs (2 iterations, hidden 8) laid out as the suite lays them out,
so every number it prints comes from a ``results.json`` a run wrote.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import ModuleType

import pytest
import torch
from hydra import compose, initialize_config_dir

from experiments.supervised import (
    aggregate,
    attention_onset,
    fresh_eval,
    recall_timing,
    rows,
    status,
    suite,
)
from rlmem.runs.lock import RunLock
from rlmem.schema.memory import CONF_DIR
from rlmem.supervised import run
from rlmem.tasks.held_out import confirmation_score
from rlmem.tasks.saved import load_saved_model

TINY = ["iterations=2", "memory.hidden_size=8", "eval_batch_size=4", "eval_every=1",
        "log_every=1", "checkpoint_every=1", "progress_bar=false"]
RELSTM = "kerg2020_table1_transfer_copy_relstm"
LSTM = "kerg2020_table1_transfer_copy_lstm"
ADDING = "kag2020_adding_irnn_T200"
CURRICULUM = "kerg2020_table1_transfer_copy_relstm_curriculum"


@pytest.fixture(scope="module")
def scripts() -> dict[str, ModuleType]:
    """The modules of experiments.supervised the tests call, by name."""
    return {module.__name__.rsplit(".", 1)[-1]: module for module in (
        rows, status, suite, aggregate, recall_timing, attention_onset, fresh_eval)}


def commands(output: str) -> list[str]:
    """The command lines of a dry run, whether it would run them or skip them."""
    return [line.removeprefix("# ") for line in output.splitlines()
            if line.removeprefix("# ").startswith("python -m rlmem.supervised")]


def test_the_dry_run_lists_every_run_in_priority_order(
        scripts: dict[str, ModuleType], capsys: pytest.CaptureFixture[str],
        tmp_path: Path) -> None:
    """Each row's command, its own presets (ablations, curricula) found through the suite's
    config root on Hydra's search path; the suite's runs are shown from the repository root,
    where the commands run."""
    assert scripts["suite"].main(["--dry-run", "--runs", str(tmp_path)]) == 0
    listed = commands(capsys.readouterr().out)
    own = "hydra.searchpath=[file://experiments/supervised/conf]"
    expected = [f"python -m rlmem.supervised +preset={row.preset} seed={seed} "
                f"progress_bar=false run_dir={tmp_path / row.preset / f'seed{seed}'}"
                + (f" warm_start={tmp_path / row.after / f'seed{seed}'}" if row.after else "")
                + (f" {own}" if row.own_preset else "")
                for row in scripts["rows"].ROWS for seed in range(row.seeds)]
    assert listed == expected
    assert [line.split()[3:5] for line in listed[:7]] == [
        [f"+preset={RELSTM}", "seed=0"], [f"+preset={RELSTM}", "seed=1"],
        [f"+preset={RELSTM}", "seed=2"], [f"+preset={LSTM}", "seed=0"],
        [f"+preset={LSTM}", "seed=1"], [f"+preset={LSTM}", "seed=2"],
        [f"+preset={CURRICULUM}_T20", "seed=0"]]
    assert scripts["suite"].shown(scripts["rows"].RUNS / RELSTM / "seed0") == \
        f"experiments/supervised/runs/{RELSTM}/seed0"
    # Every preset is a row, and every row's preset is in one place: the library's or the
    # suite's own, which holds the ablations and curricula.
    library = {path.stem for path in (CONF_DIR / "preset").glob("*.yaml")}
    suites = {path.stem for path in (scripts["rows"].CONF / "preset").glob("*.yaml")}
    assert not library & suites
    assert {row.preset for row in scripts["rows"].ROWS} == library | suites
    assert {row.preset for row in scripts["rows"].ROWS if row.own_preset} == suites
    assert {CURRICULUM, f"{CURRICULUM}_T20", f"{LSTM}_chrono_script"} <= suites
    assert {RELSTM, LSTM, f"{RELSTM}_script", ADDING} <= library


def test_the_filters_narrow_the_runs_and_overrides_follow(
        scripts: dict[str, ModuleType], capsys: pytest.CaptureFixture[str],
        tmp_path: Path) -> None:
    scripts["suite"].main(["--dry-run", "--only", "headline", "--seeds", "1", "--runs",
                           str(tmp_path), "--", "device=cpu"])
    curricula = [((f"{stage2}_T20", ""),
                  (stage2, f" warm_start={tmp_path / f'{stage2}_T20' / 'seed1'}"))
                 for stage2 in (CURRICULUM, CURRICULUM.replace("relstm", "lstm"))]
    own = " hydra.searchpath=[file://experiments/supervised/conf]"
    assert commands(capsys.readouterr().out) == [
        f"python -m rlmem.supervised +preset={preset} seed=1 progress_bar=false "
        f"run_dir={tmp_path / preset / 'seed1'}{warm}"
        f"{own if scripts['rows'].by_preset(preset).own_preset else ''} device=cpu"
        for preset, warm in ((RELSTM, ""), (LSTM, ""),
                             *(stage for pair in curricula for stage in pair),
                             (f"{RELSTM}_script", ""), (f"{LSTM}_script", ""),
                             (f"{LSTM}_chrono_script", ""))]
    scripts["suite"].main(["--dry-run", "--only", "adding", "--presets", ADDING, RELSTM])
    assert [line.split()[3] for line in commands(capsys.readouterr().out)] == [
        f"+preset={ADDING}"]


@pytest.mark.slow  # a long CLI check: run with -m slow
def test_a_curriculum_runs_its_first_stage_first_and_starts_from_its_weights(
        scripts: dict[str, ModuleType], capsys: pytest.CaptureFixture[str],
        tmp_path: Path) -> None:
    """Selecting the second stage brings the first; with two jobs at once the second still
    waits for the first, then warm-starts from its run directory. A second stage whose first
    stage has not finished is skipped, not started from scratch."""
    tiny = ["--", *TINY, "seq_len=4", "eval_seq_lens=[]", "transfer_every=null",
            "figures=false"]
    code = scripts["suite"].main(["--presets", CURRICULUM, "--seeds", "0", "--jobs", "2",
                                  "--runs", str(tmp_path), *tiny])
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"{CURRICULUM}_T20 seed 0: finished: 2 iterations (a fixed budget, no target)" in out
    first, second = tmp_path / f"{CURRICULUM}_T20" / "seed0", tmp_path / CURRICULUM / "seed0"
    assert json.loads((first / "results.json").read_text())["iterations"] == 2
    assert json.loads((second / "results.json").read_text())["iterations"] == 2
    assert f"warm start: the model's weights from {first}" in (second / "train.log").read_text()
    suite = scripts["suite"]
    job = next(job for job in suite.plan(scripts["rows"].select(presets=[CURRICULUM]), [1],
                                         tmp_path, tiny[1:]) if job.row.preset == CURRICULUM)
    suite.Runner([job], tiny[1:])(job)
    assert "has not finished; skipped" in capsys.readouterr().out
    assert not (tmp_path / CURRICULUM / "seed1").exists()


def tiny_run(runs: Path, preset: str, seed: int = 0) -> Path:
    """A real run of ``preset`` at 2 iterations and hidden 8, where the suite puts it."""
    run_dir = runs / preset / f"seed{seed}"
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="supervised",
                      overrides=[f"+preset={preset}", f"seed={seed}", *TINY,
                                 f"run_dir={run_dir}"])
    run(cfg, run_dir)
    return run_dir


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """relstm seed 0 and the adding row finished; lstm seed 0 stopped before its results (a
    killed run: checkpoint and progress, no results.json)."""
    root = tmp_path_factory.mktemp("runs")
    tiny_run(root, RELSTM)
    tiny_run(root, ADDING)
    (tiny_run(root, LSTM) / "results.json").unlink()
    return root


def test_the_dry_run_skips_finished_and_running_runs(
        scripts: dict[str, ModuleType], runs: Path,
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    copy = tmp_path / "runs"
    shutil.copytree(runs, copy)
    overrides = ["--", *TINY]
    with RunLock(copy / RELSTM / "seed1"):  # another process runs seed 1
        scripts["suite"].main(["--dry-run", "--only", "headline", "--seeds", "0", "1",
                               "--runs", str(copy), *overrides])
    lines = capsys.readouterr().out.splitlines()
    by_run = dict(zip(lines[::2], lines[1::2], strict=True))
    assert by_run[f"# {RELSTM} seed 0: finished: 2 iterations, target not met"].startswith("# ")
    running = next(line for line in by_run if line.startswith(f"# {RELSTM} seed 1"))
    assert "running now (PID" in running and by_run[running].startswith("# ")
    assert not by_run[f"# {LSTM} seed 0: in progress at iteration 2"].startswith("#")
    assert not by_run[f"# {LSTM} seed 1: not started"].startswith("#")
    # A budget raised on the command line turns a finished run back into one to resume.
    scripts["suite"].main(["--dry-run", "--presets", ADDING, "--runs", str(copy), "--",
                           *TINY, "iterations=3"])
    assert capsys.readouterr().out.splitlines()[0] == f"# {ADDING} seed 0: in progress at " \
        "iteration 2"


def test_the_aggregate_renders_results_from_the_runs(
        scripts: dict[str, ModuleType], runs: Path, tmp_path: Path) -> None:
    out = tmp_path / "RESULTS.md"
    scripts["aggregate"].main(["--runs", str(runs), "--out", str(out),
                               "--fresh", str(tmp_path / "none.json")])
    text = out.read_text()
    relstm = json.loads((runs / RELSTM / "seed0" / "results.json").read_text())["eval"]
    adding = json.loads((runs / ADDING / "seed0" / "results.json").read_text())["eval"]
    summary = next(line for line in text.splitlines() if f"[{RELSTM}]" in line)
    assert "| 1/3 |" in summary and f"{100 * relstm['accuracy@T100']:.1f}%" in summary
    assert "| 100% |" in summary  # the paper's, beside ours
    assert "12.5% (CE 0.1733)" in summary  # the memoryless baseline
    assert f"{adding['mse@T200']:.4f}" in text and "MSE 0.167" in text
    transfer = next(line for line in text.splitlines() if line.startswith("| relstm | 1/3"))
    assert f"{100 * relstm['accuracy@T5000']:.1f}% (99%)" in transfer
    assert f"- `{LSTM}` seed 0: in progress at iteration 2" in text
    assert f"- `{RELSTM}` seed 1: not started" in text
    lstm_summary = next(line for line in text.splitlines() if f"[{LSTM}]" in line)
    assert "| 0/3 | — |" in lstm_summary  # an unfinished run is not a result
    heatmap = runs / RELSTM / "seed0" / "attention_T5000.png"
    assert heatmap.exists() and (runs / RELSTM / "seed0" / "attention.png").exists()
    target = text.split("[attention at T=5000](", 1)[1].split(")", 1)[0]
    assert (out.parent / target).resolve() == heatmap.resolve()
    assert (tmp_path / "curves.png").exists()
    assert "{{" not in text and "kerg2020_table2_denoise_memlstm" in text  # every row listed


def test_a_diverged_run_is_a_finished_row_that_says_so(
        scripts: dict[str, ModuleType], runs: Path, tmp_path: Path) -> None:
    """A ``results.json`` with ``diverged`` (as ``rlmem.supervised`` writes it when the loss
    stops being finite) is a finished run with no evaluation, shown as diverged."""
    copy = tmp_path / "runs"
    shutil.copytree(runs, copy)
    path = copy / ADDING / "seed0" / "results.json"
    results = json.loads(path.read_text())
    message = "non-finite loss at iteration 3 (loss inf, gradient norm inf)"
    path.write_text(json.dumps({**results, "iterations": 2, "eval": {}, "diverged": message}))
    status = scripts["status"].run_status(copy / ADDING / "seed0", budget=20_000)
    assert status.state is scripts["status"].State.finished
    assert status.describe() == "finished: diverged after 2 iterations"
    out = tmp_path / "RESULTS.md"
    scripts["aggregate"].main(["--runs", str(copy), "--out", str(out),
                               "--fresh", str(tmp_path / "none.json")])
    summary = next(line for line in out.read_text().splitlines() if f"[{ADDING}]" in line)
    assert "| 1/1 | — | diverged |" in summary
    assert f"diverged: {message}" in out.read_text()


def test_the_suite_reports_a_run_that_diverged_as_finished_not_failed(
        scripts: dict[str, ModuleType], capsys: pytest.CaptureFixture[str],
        tmp_path: Path) -> None:
    """A run whose loss stops being finite exits with an error after recording the divergence
    in its ``results.json``: the suite says so, and does not count it as a failed run."""
    preset = "kag2021_table4_adding_tarnn_T200"
    code = scripts["suite"].main(["--presets", preset, "--runs", str(tmp_path), "--",
                                  *TINY, "iterations=50", "lr=1000", "seq_len=20"])
    out = capsys.readouterr().out
    results = json.loads((tmp_path / preset / "seed0" / "results.json").read_text())
    assert results["diverged"], out
    assert code == 0 and "FAILED" not in out, out
    assert f"{preset} seed 0: finished: diverged after" in out


def test_fresh_eval_rescores_a_run_that_met_its_target_on_batches_it_never_saw(
        scripts: dict[str, ModuleType], tmp_path: Path) -> None:
    """A run stopped by its target is re-evaluated on new batches at its training T; their
    scores differ from the reported one (other sequences), and the verdict is the task's. A
    run stopped without confirmation, then confirmed when run again (its checkpoint's config
    has no confirmation, its config.yaml has the preset's batches), is re-evaluated on
    batches after those."""
    run_dir = tmp_path / ADDING / "seed0"
    for confirm in (["confirm_batches=0"], []):
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose(config_name="supervised",
                          overrides=[f"+preset={ADDING}", *TINY, "seq_len=20", "target=1.0",
                                     *confirm, f"run_dir={run_dir}", "device=cpu"])
        run(cfg, run_dir)
    results = json.loads((run_dir / "results.json").read_text())
    assert results["converged_at"] == 1
    check = scripts["fresh_eval"].check(run_dir, batches=3)
    assert check.metric == "mse" and check.seq_len == 20 and len(check.scores) == 3
    assert check.reported == results["eval"]["mse@T20"]
    assert len({check.reported, *check.scores}) == 4  # four different batches
    # The second run confirmed the stop on the preset's batches: fresh_eval draws after them.
    saved = load_saved_model(run_dir)
    confirmation = confirmation_score(saved.model, saved.task, 20, cfg.confirm_batches,
                                      cfg.eval_batch_size, 0, torch.device("cpu"))
    assert results["eval"]["confirmed_mse@T20"] == confirmation.pooled
    assert not set(confirmation.scores) & set(check.scores)
    assert check.meets == (check.pooled <= 1.0)
    out, data = tmp_path / "FRESH_EVAL.md", tmp_path / "fresh_eval.json"
    scripts["fresh_eval"].main(["--runs", str(run_dir), "--batches", "2", "--out", str(out),
                                "--data", str(data)])
    assert f"| `{run_dir.as_posix()}` | mse ≤ 1.0000 at T=20 | 1 |" in out.read_text()
    # The data file keeps the unrounded scores, which the aggregate reads.
    recorded = scripts["fresh_eval"].read_checks(data)[run_dir.as_posix()]
    assert len(recorded.scores) == 2 and recorded.iterations == results["iterations"]


def test_recall_timing_reads_the_saved_model_on_the_runs_own_held_out_batch(
        scripts: dict[str, ModuleType], runs: Path, tmp_path: Path) -> None:
    """Its recall accuracy at the training T is the run's final evaluation (same weights, same
    batch); its timing columns are shares and steps within the sequence."""
    run_dir, out = runs / RELSTM / "seed0", tmp_path / "RECALL_TIMING.md"
    scripts["recall_timing"].main(["--runs", str(run_dir), "--lengths", "100", "200",
                                   "--out", str(out)])
    final = json.loads((run_dir / "results.json").read_text())["eval"]
    at_100 = scripts["recall_timing"].timing(run_dir, 100)
    assert at_100.accuracy == pytest.approx(final["accuracy@T100"])
    # The run logged the recall's attention on the symbols at every evaluation: the same.
    assert at_100.attention_on_symbols == pytest.approx(final["attention_on_data@T100"],
                                                        abs=1e-6)
    assert 0 <= at_100.blank_at_recall <= 1 and 0 <= at_100.early_symbols <= 1
    timings, along = out.read_text().split("## When the memory lets the symbols go")
    rows = [line for line in timings.splitlines() if line.startswith(f"| {run_dir}")]
    assert [row.split(" | ")[2] for row in rows] == ["100", "200"]
    assert rows[0].split(" | ")[7] == "110" and rows[1].split(" | ")[7] == "210"
    assert "| step 20 | step 110 (recall at T=100) | step 210 (recall at T=200) |" in along
    held = next(line for line in along.splitlines() if line.startswith(f"| {run_dir}"))
    assert len(held.split(" | ")) == 4  # the run, then steps 20, 110 and 210


def test_recall_timing_counts_the_symbols_memory_holds_as_the_cells_own_trace_shows(
        scripts: dict[str, ModuleType], runs: Path) -> None:
    """The share of data symbols in memory at the first recall step, from the chunked run the
    script makes, is the one the cell's ``slot_time`` trace shows at that step of a single
    whole-sequence run."""
    import torch

    from rlmem.tasks.held_out import held_out_batch
    from rlmem.tasks.recall import RecallTask
    from rlmem.tasks.saved import load_saved_model

    run_dir, seq_len = runs / RELSTM / "seed0", 30
    timing = scripts["recall_timing"].timing(run_dir, seq_len)
    saved = load_saved_model(run_dir, seq_len)
    task = saved.task
    assert isinstance(task, RecallTask)
    batch = held_out_batch(task, int(saved.config["eval_batch_size"]), saved.seed, seq_len,
                           torch.device("cpu"))
    delimiter = task.delimiter_step(seq_len)
    with torch.no_grad():
        _, result = saved.model(batch.inputs)
    times = result.aux.traces["slot_time"][delimiter + 1]  # (B, ν+ρ), -1 when empty
    data = batch.inputs[:delimiter] < task.alphabet  # (steps, B)
    held = sum(int(data[time, column]) for column, row in enumerate(times.tolist())
               for time in row if 0 <= time < delimiter)
    assert 0 < timing.data_in_memory <= 1
    assert timing.data_in_memory == pytest.approx(held / int(data.sum()))
    # The recall steps' attention on symbol slots, from the same whole-sequence run.
    weights, slots = (result.aux.traces[key][delimiter + 1:] for key in ("attention",
                                                                         "slot_time"))
    on_symbols = [sum(weight for weight, time in zip(step_weights, step_times, strict=True)
                      if 0 <= time < delimiter and data[time, column])
                  for step in range(weights.shape[0]) for column in range(weights.shape[1])
                  for step_weights, step_times in [(weights[step, column].tolist(),
                                                    slots[step, column].tolist())]]
    assert 0 < timing.attention_on_symbols <= 1
    assert timing.attention_on_symbols == pytest.approx(sum(on_symbols) / len(on_symbols),
                                                        abs=1e-5)


def test_recall_timing_follows_the_symbols_memory_holds_along_the_sequence(
        scripts: dict[str, ModuleType], runs: Path) -> None:
    """At step T + 10 of T's own batch the share is the recall's ``data_in_memory``; at step
    20 it is what the cell's ``slot_time`` trace shows there in one whole-sequence run."""
    import torch

    from rlmem.tasks.held_out import held_out_batch
    from rlmem.tasks.recall import RecallTask
    from rlmem.tasks.saved import load_saved_model

    recall_timing = scripts["recall_timing"]
    run_dir, seq_len = runs / RELSTM / "seed0", 30
    held = recall_timing.held_along(run_dir, [recall_timing.SCREENED_BY, seq_len + 10], seq_len)
    assert held[1] == pytest.approx(recall_timing.timing(run_dir, seq_len).data_in_memory)
    saved = load_saved_model(run_dir, seq_len)
    task = saved.task
    assert isinstance(task, RecallTask)
    batch = held_out_batch(task, int(saved.config["eval_batch_size"]), saved.seed, seq_len,
                           torch.device("cpu"))
    with torch.no_grad():
        _, result = saved.model(batch.inputs)
    times = result.aux.traces["slot_time"][recall_timing.SCREENED_BY]  # (B, ν+ρ)
    data = batch.inputs < task.alphabet
    kept = [len({time for time in row if time >= 0 and data[time, column]})
            for column, row in enumerate(times.tolist())]
    assert 0 < held[0] <= 1
    assert held[0] == pytest.approx(sum(kept) / (task.recall * len(kept)))


def test_recall_timing_splits_the_recall_by_whether_memory_holds_the_symbol(
        scripts: dict[str, ModuleType], runs: Path) -> None:
    """By hand: two sequences, the memory holding the first symbol of one and both of the
    other; and on a real run, the two sides average back to the run's recall accuracy."""
    import math

    import torch

    from rlmem.tasks import make_task

    task = make_task("denoise", recall=2)
    before = torch.tensor([[0, 8], [8, 3], [5, 8], [8, 6]])  # (steps, B): symbols at 0, 2 / 1, 3
    slot_time = torch.tensor([[[0, 9, -1], [3, 1, 7]]])  # at the first recall step
    predicted = torch.tensor([[0, 3], [1, 6]])  # (recall, B)
    targets = torch.tensor([[0, 3], [5, 6]])  # the second symbol of sequence 0 is wrong
    held, lost = scripts["recall_timing"].recall_by_memory(
        task, before, {"slot_time": slot_time}, predicted, targets)
    assert (held, lost) == (1.0, 0.0)  # held: 3 right of 3; lost: sequence 0's second
    assert all(math.isnan(value) for value in scripts["recall_timing"].recall_by_memory(
        task, before, {}, predicted, targets))
    timing = scripts["recall_timing"].timing(runs / RELSTM / "seed0", 100)
    if math.isnan(timing.recall_of_missing):
        assert timing.recall_of_held == pytest.approx(timing.accuracy)
    else:
        assert timing.data_in_memory * timing.recall_of_held + (
            1 - timing.data_in_memory) * timing.recall_of_missing == pytest.approx(
                timing.accuracy)


def test_attention_onset_runs_its_command_and_reports_the_runs_evaluations(
        scripts: dict[str, ModuleType], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    onset = scripts["attention_onset"]
    monkeypatch.setattr(onset, "ONSET_RUNS", tmp_path)
    probe, missing = onset.OnsetRun("relstm", 1e-3, 0), onset.OnsetRun("memlstm", 2e-4, 0)
    command = probe.command(2)
    assert command[:4] == ["python", "-m", "rlmem.supervised", f"+preset={RELSTM}"]
    overrides = [arg for arg in command[3:]
                 if not arg.startswith(("run_dir=", "transfer_every=", "iterations="))]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        cfg = compose("supervised", overrides=[*overrides, *TINY, "transfer_every=1"])
    assert (cfg.seq_len, cfg.lr, cfg.target, list(cfg.eval_seq_lens)) == (20, 1e-3, None,
                                                                           [100, 200])
    run(cfg, probe.run_dir)
    evals = onset.evaluations(probe.run_dir)
    assert sorted(evals) == [1, 2]
    final = json.loads((probe.run_dir / "results.json").read_text())["eval"]
    assert evals[2]["attention_on_data@T200"] == pytest.approx(final["attention_on_data@T200"])
    text = onset.report({probe: 2, missing: 6000})
    assert onset.budget(probe, 6000) == 2 and onset.budget(missing, 6000) == 6000
    assert onset.finished(probe, 2) and not onset.finished(probe, 3)
    transfer_rows = [line for line in text.splitlines()
                     if line.startswith("| relstm, lr 0.001 | 2 |")]
    assert transfer_rows == [
        "| relstm, lr 0.001 | 2 | " + " | ".join(
            f"{evals[2][f'attention_on_data@T{t}']:.0%} / {evals[2][f'accuracy@T{t}']:.0%}"
            for t in (100, 200)) + " |"]
    assert "| memlstm, lr 0.0002 | — | — | — |" in text


def test_a_long_sequence_heatmap_pools_blocks_and_keeps_each_rows_attention() -> None:
    """At T=5000 the heatmap is drawn in blocks of steps: a block row is the attention its steps
    paid, averaged over them, so rows still sum to what was paid and the block of an attended
    state is where the weight lands."""
    import torch

    from rlmem.tasks.figures import attention_matrix

    generator = torch.Generator().manual_seed(0)
    steps, slots, block = 50, 4, 7
    attention = torch.rand(steps, slots, generator=generator).softmax(dim=-1)
    slot_time = torch.randint(0, steps, (steps, slots), generator=generator)
    slot_time[:, 0] = -1  # an empty slot receives nothing
    full = attention_matrix(attention, slot_time)
    pooled = attention_matrix(attention, slot_time, block)
    assert pooled.shape == (8, 8)
    for i in range(pooled.shape[0]):
        rows = full[i * block:(i + 1) * block]
        for j in range(pooled.shape[1]):
            expected = rows[:, j * block:(j + 1) * block].sum() / len(rows)
            assert pooled[i, j] == pytest.approx(expected, rel=1e-5, abs=1e-7)
    paid = attention[:, 1:].sum(dim=1)
    assert pooled.sum(axis=1)[:-1] == pytest.approx(
        [float(paid[i * block:(i + 1) * block].mean()) for i in range(7)], rel=1e-5)


def test_a_headline_run_started_before_the_screening_option_resumes_once_migrated(
        runs: Path, tmp_path: Path) -> None:
    """The suite resumes runs already under way: a relstm checkpoint written before
    ``memory.screening`` existed (format 2, Algorithm 1 the only screening) is refused until
    ``python -m rlmem.migrate`` has written the key, then resumes as ``screening=algorithm1``."""
    import torch

    from rlmem.migrate import migrate_run
    from rlmem.runs.checkpoint import OlderCheckpointError

    run_dir = tmp_path / RELSTM / "seed0"
    shutil.copytree(runs / RELSTM / "seed0", run_dir)
    payload = torch.load(run_dir / "checkpoint.pt", weights_only=True)
    del payload["config"]["memory"]["screening"]
    payload["format"] = 2
    torch.save(payload, run_dir / "checkpoint.pt")
    with pytest.raises(OlderCheckpointError, match="format 2"):
        load_saved_model(run_dir)
    assert "from format 2 to" in migrate_run(run_dir)
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="supervised",
                      overrides=[f"+preset={RELSTM}", "seed=0", *TINY, "iterations=3",
                                 "figures=false", f"run_dir={run_dir}"])
    assert cfg.memory.screening.name == "algorithm1"
    assert run(cfg, run_dir).iteration == 3


def test_a_run_trained_on_a_gpu_has_its_minutes_marked(runs: Path, tmp_path: Path) -> None:
    """Its process time follows the GPU, so the tables must not pass it off as one core's."""
    copy = tmp_path / "run"
    shutil.copytree(runs / ADDING / "seed0", copy)
    cpu = status.run_status(copy)
    assert not cpu.on_gpu and "GPU" not in aggregate.run_minutes(cpu)
    config = copy / "config.yaml"
    config.write_text(config.read_text().replace("device: auto", "device: cuda"))
    gpu = status.run_status(copy)
    assert gpu.on_gpu and aggregate.run_minutes(gpu) == aggregate.minutes(gpu.cpu_s) + " (GPU)"
