"""Tabulate the supervised suite into ``RESULTS.md``, next to the papers' numbers.

    python -m experiments.supervised.aggregate
    python -m experiments.supervised.aggregate --runs /elsewhere/runs --out /tmp/RESULTS.md

Reads ``runs/<preset>/seed<k>/`` as ``suite.py`` leaves them: ``results.json`` (a finished run:
its final evaluation at every T, ``converged_at``, ``cpu_s``), ``config.yaml`` and
``progress.csv`` (how far an unfinished run got), and ``fresh_eval.json`` (each finished run
re-scored at its training T on eight fresh batches, by ``fresh_eval.py``): every score at a
row's training T is quoted on those fresh batches, never on the batch that decided the stop.
Only finished runs count as results; the others are listed with the iteration they reached,
and a declared seed without a run as "not run". Each row gives every seed's value, their IQM
with its 95% stratified bootstrap interval and "k of n seeds" (:mod:`experiments.common.report`).
Writes ``RESULTS.md`` from
``RESULTS.template.md``, ``curves.png`` (the headline rows' held-out recall at T = 100 against
the memoryless baseline) and, for each finished headline ReLSTM run that still has its
checkpoint, the attention heatmap at T = 5000 (``attention_T5000.png`` in its run directory).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from omegaconf import OmegaConf

from experiments.common import report
from experiments.common.report import DASH, Show, iqm_ci
from experiments.supervised.fresh_eval import DATA, Check, read_checks
from experiments.supervised.rows import HERE, REPO, ROWS, RUNS, Row, Task
from experiments.supervised.status import RunStatus, State, run_status
from rlmem.runs import CHECKPOINT_NAME
from rlmem.runs.checkpoint import OlderCheckpointError
from rlmem.runs.progress import read_progress
from rlmem.tasks import SequenceTask, make_task
from rlmem.tasks.figures import attention_from_checkpoint
from rlmem.tasks.recall import RecallTask

HEATMAP_T = 5000
"""The transfer length of the ReLSTM attention heatmap drawn from a finished run's weights."""
TEMPLATE = HERE / "RESULTS.template.md"
TASK_CONF = REPO / "rlmem" / "conf" / "task"


@dataclass(frozen=True)
class Paper:
    """A paper's number(s) for one row, and where they stand in the paper."""

    source: str
    scores: dict[int, str]
    """By delay T: as the paper prints it (recall accuracy), or what its text and figure say."""


KERG = "Kerg et al. (2020)"
TARNN_FIG2 = "Kag & Saligrama (2021), Fig. 2 and §4 (A)"
IRNN_FIG4 = "Kag, Zhang & Saligrama (2020), Fig. 4 and §4.3.1"
TRANSFER_TS = (100, 200, 400, 2000, 5000)

def table1(model: str, *scores: str) -> Paper:
    """A row of the ReLSTM paper's Table 1: recall at T = 100, 200, 400, 2000, 5000."""
    return Paper(f"{KERG}, Table 1, {model}", dict(zip(TRANSFER_TS, scores, strict=True)))


PAPER: dict[str, Paper] = {
    # The ReLSTM paper (papers/relstm-relevancy-screening.txt), recall accuracy after training
    # at T = 100: Table 1 (transfer copy) and Table 2 (denoise, its T = 100 column). Its
    # MemRNN and ReLRNN have an RNN base (our memlstm has an LSTM base).
    "kerg2020_table1_transfer_copy_relstm": table1("ReLLSTM", "100%", "99%", "99%", "99%", "99%"),
    "kerg2020_table1_transfer_copy_lstm": table1(
        "LSTM (its Table 4: 100% at T = 100)", "99%", "64%", "48%", "19%", "14%"),
    "kerg2020_table1_transfer_copy_relstm_script": table1(
        "ReLLSTM (at the authors' script's settings, not Table 5's)",
        "100%", "99%", "99%", "99%", "99%"),
    "kerg2020_table1_transfer_copy_lstm_script": table1(
        "LSTM (at the authors' script's settings, not Table 5's)",
        "99%", "64%", "48%", "19%", "14%"),
    "kerg2020_table1_transfer_copy_lstm_chrono_script": table1(
        "LSTM (its init is torch's; this row's chrono init is not in the paper)",
        "99%", "64%", "48%", "19%", "14%"),
    "kerg2020_table1_transfer_copy_relstm_script_rho10": Paper(
        "an ablation, not in the paper's tables: compare with the relstm script row", {}),
    "kerg2020_table1_transfer_copy_relstm_script_rho10_bias0": Paper(
        "an ablation, not in the paper's tables: compare with the relstm script row", {}),
    "kerg2020_table1_transfer_copy_relrnn": table1("ReLRNN", "100%", "99%", "99%", "99%", "99%"),
    "kerg2020_table1_transfer_copy_memlstm": table1("MemRNN", "99%", "99%", "99%", "92%", "OOM"),
    "kerg2020_table1_transfer_copy_relstm_normalised_screening": Paper(
        "an ablation, not in the paper: compare with the relstm row", {}),
    "kerg2020_table1_transfer_copy_relstm_normalised_screening_curriculum_T20": Paper(
        "the first stage of a curriculum, not in the paper", {}),
    "kerg2020_table1_transfer_copy_relstm_normalised_screening_curriculum": Paper(
        "an ablation, not in the paper: compare with the relstm curriculum row", {}),
    "kerg2020_table1_transfer_copy_relstm_lr1e-3": Paper(
        "an ablation, not in the paper's tables: compare with the relstm row", {}),
    "kerg2020_table1_transfer_copy_relstm_curriculum_T20": Paper(
        "the first stage of a curriculum, not in the paper", {}),
    "kerg2020_table1_transfer_copy_relstm_curriculum": Paper(
        "an ablation, not in the paper: compare with the relstm row", {}),
    "kerg2020_table1_transfer_copy_lstm_curriculum_T20": Paper(
        "the first stage of a curriculum, not in the paper", {}),
    "kerg2020_table1_transfer_copy_lstm_curriculum": Paper(
        "the control of the relstm curriculum, not in the paper: compare with the lstm row", {}),
    "kerg2020_table1_transfer_copy_relstm_rho15_curriculum_T20": Paper(
        "the first stage of a curriculum, not in the paper", {}),
    "kerg2020_table1_transfer_copy_relstm_rho15_curriculum": Paper(
        "an ablation, not in the paper's tables (ρ = 15: the authors' script's default): "
        "compare with the relstm curriculum row", {}),
    "kerg2020_table1_transfer_copy_relstm_forget_bias1": Paper(
        "an ablation, not in the paper: compare with the relstm row", {}),
    "kerg2020_table2_denoise_relstm": Paper(f"{KERG}, Table 2, ReLLSTM", {100: "100%"}),
    "kerg2020_table2_denoise_relstm_curriculum_T20": Paper(
        "the first stage of a curriculum, not in the paper", {}),
    "kerg2020_table2_denoise_relstm_curriculum": Paper(
        "an ablation, not in the paper: compare with the relstm denoise row", {}),
    "kerg2020_table2_denoise_lstm": Paper(f"{KERG}, Table 2, LSTM", {100: "82%"}),
    "kerg2020_table2_denoise_relrnn": Paper(f"{KERG}, Table 2, ReLRNN", {100: "100%"}),
    "kerg2020_table2_denoise_memlstm": Paper(f"{KERG}, Table 2, MemRNN", {100: "99%"}),
    # The TARNN paper (papers/tarnn-time-adaptive-rnn.txt) gives curves, not numbers: its text
    # says what they reach. Copy at T = 200 is its Fig. 2a (baseline CE 0.09).
    "kag2021_table4_copy_tarnn": Paper(
        f"{TARNN_FIG2}a", {200: "CE → 0 (\"zero average cross entropy\")"}),
    "kag2021_grid_lr1e-3_copy_tarnn": Paper(
        f"{TARNN_FIG2}a, at lr 1e-3 (its §A.5 grid)",
        {200: "CE → 0 (\"zero average cross entropy\")"}),
    "kag2021_table4_adding_tarnn_T200": Paper(
        f"{TARNN_FIG2}c", {200: "MSE → 0 (\"solves the addition task\", in 1K steps)"}),
    "kag2021_grid_lr1e-3_adding_tarnn_T200": Paper(
        f"{TARNN_FIG2}c, at lr 1e-3 (its §A.5 grid)",
        {200: "MSE → 0 (\"solves the addition task\", in 1K steps)"}),
    "kag2021_table4_adding_tarnn_T750": Paper(
        f"{TARNN_FIG2}d", {750: "MSE → 0 (\"solves the addition task\", in 1K steps)"}),
    "kag2021_grid_lr1e-3_adding_tarnn_T750": Paper(
        f"{TARNN_FIG2}d, at lr 1e-3 (its §A.5 grid)",
        {750: "MSE → 0 (\"solves the addition task\", in 1K steps)"}),
    "kag2021_adding_lstm_T200": Paper(f"{TARNN_FIG2}c", {200: "a curve; no number in the text"}),
    "kag2021_adding_lstm_T750": Paper(f"{TARNN_FIG2}d", {750: "a curve; no number in the text"}),
    # The iRNN paper (papers/irnn-incremental-rnn.txt): Fig. 4c (T = 200) and 4d (T = 750).
    "kag2020_adding_irnn_T200": Paper(
        f"{IRNN_FIG4}c", {200: "MSE → 0 (\"solves the addition task\", in 2K iterations)"}),
    "kag2020_grid_lr1e-3_adding_irnn_T200": Paper(
        f"{IRNN_FIG4}c, at lr 1e-3 (the paper tunes its initial 1e-2 by grid search)",
        {200: "MSE → 0 (\"solves the addition task\", in 2K iterations)"}),
    "kag2020_adding_irnn_T750": Paper(
        f"{IRNN_FIG4}d", {750: "MSE → 0 (\"solves the addition task\", in 2K iterations)"}),
    # The ERNN paper (papers/ernn-equilibrated-rnn.txt) has no addition experiment.
    "zhang2019_adding_ernn_T200": Paper("Zhang et al. (2019): no addition experiment", {}),
    "zhang2019_adding_ernn_T750": Paper("Zhang et al. (2019): no addition experiment", {}),
    "zhang2019_grid_lr1e-3_adding_ernn_T200": Paper(
        "Zhang et al. (2019): no addition experiment", {}),
    "zhang2019_grid_lr1e-3_adding_ernn_T750": Paper(
        "Zhang et al. (2019): no addition experiment", {}),
}
"""The papers' numbers by preset. The papers are stored as text (``/work/shared/papers``,
without page numbers), so each is cited by table or figure."""

TASK_NAMES = {Task.transfer_copy: "copy", Task.denoise: "denoise", Task.copy: "copy",
              Task.adding: "adding"}
"""The registered task each row's task trains on."""


@dataclass(frozen=True)
class Preset:
    """A preset file as a reader needs it: where it comes from, and what it sets."""

    comment: str
    """Its header comment: the paper, table and row, and what the paper does not give."""
    settings: list[str]
    """Its keys as command-line overrides (``memory.hidden_size=128``, ...)."""
    seq_len: int
    target: float | None
    """None: a fixed budget, no early stop (a curriculum's first stage)."""
    eval_seq_lens: list[int]


def as_overrides(raw: dict[str, Any]) -> list[str]:
    """A preset's keys as the command-line overrides that would set them."""
    overrides = [f"{key.removeprefix('override /')}={value}"
                 for entry in raw.get("defaults", []) if isinstance(entry, dict)
                 for key, value in entry.items()]
    for key, value in raw.items():
        if key == "defaults":
            continue
        if isinstance(value, dict):
            overrides += [f"{key}.{name}={item}" for name, item in value.items()]
        elif isinstance(value, list):
            overrides.append(f"{key}=[{','.join(map(str, value))}]")
        else:
            overrides.append(f"{key}={value}")
    return overrides


def read_preset(row: Row) -> Preset:
    """The preset file of ``row``, read as YAML (not composed, so a preset whose option a cell
    lacks still renders)."""
    text = row.preset_file.read_text()
    comment = " ".join(line.lstrip("# ").strip() for line in text.splitlines()
                       if line.startswith("#") and "@package" not in line
                       and "python -m" not in line)
    container = OmegaConf.to_container(OmegaConf.create(text))
    assert isinstance(container, dict)
    raw = {str(key): value for key, value in container.items()}
    transfer = raw.get("eval_seq_lens")
    if transfer is None and row.task is Task.transfer_copy:  # the task's own lengths
        transfer = OmegaConf.load(TASK_CONF / "transfer_copy.yaml").eval_seq_lens
    target = raw["target"]
    return Preset(comment, as_overrides(raw), int(raw["seq_len"]),
                  None if target is None else float(target), [int(T) for T in transfer or []])


@dataclass
class RowResult:
    """A row with its presets and the status of each of its seeds."""

    row: Row
    preset: Preset
    runs: list[RunStatus]
    """Each declared seed's run, in seed order (:attr:`Row.seeds`)."""
    checks: dict[int, Check]
    """The fresh-batch check of each seed that has a current one (``fresh_eval.json``)."""

    @property
    def finished(self) -> list[RunStatus]:
        return [run for run in self.runs if run.state is State.finished]

    @property
    def finished_seeds(self) -> list[int]:
        return [seed for seed, run in enumerate(self.runs) if run.state is State.finished]

    def fresh(self, seed: int) -> float | None:
        """The seed's score at the training T on fresh batches (None: diverged, or no current
        check: run ``fresh_eval.py``)."""
        check = self.checks.get(seed)
        return None if check is None else check.pooled

    def unchecked(self) -> list[int]:
        """Finished seeds, not diverged, without a current fresh-batch check."""
        return [seed for seed in self.finished_seeds
                if not self.runs[seed].diverged and seed not in self.checks]

    def at(self, metric: str, T: int, seed: int) -> float | None:
        """The seed's ``metric`` at delay ``T``: on fresh batches at the training T (the score
        every table quotes there), else its final evaluation's batch at ``T``."""
        if self.preset.seq_len == T and metric == self.score:
            return self.fresh(seed)
        results = self.runs[seed].results
        value = None if results is None else results["eval"].get(f"{metric}@T{T}")
        return None if value is None else float(value)

    @property
    def score(self) -> str:
        """The metric the row is judged on (``accuracy`` or ``mse``)."""
        return "mse" if self.row.task is Task.adding else "accuracy"

    def values(self, metric: str, T: int) -> list[float]:
        """``metric`` at delay ``T`` (:meth:`at`) of each finished seed that has it."""
        found = (self.at(metric, T, seed) for seed in self.finished_seeds)
        return [value for value in found if value is not None]

    def scored_iqm(self, metric: str, T: int) -> str:
        """:func:`~experiments.common.report.iqm_ci` of :meth:`values`, saying over how many
        of the finished seeds where some have no score (diverged, or unchecked): an IQM over
        the seeds that trained through is not one over the seeds run."""
        values = self.values(metric, T)
        text = iqm_ci(values, formatter(metric))
        return text if len(values) in (0, len(self.finished)) else \
            f"{text}, over the {len(values)} of {len(self.finished)} with a score"


def current_checks(row: Row, statuses: list[RunStatus], checks: dict[str, Check]
                   ) -> dict[int, Check]:
    """The checks of ``row``'s finished seeds made on their final model (a check of an earlier
    end, before the run was trained on, is stale and left out)."""
    found = {}
    for seed, status in enumerate(statuses):
        check = checks.get(f"{row.preset}/seed{seed}")
        if (check is not None and status.results is not None
                and check.iterations == int(status.results["iterations"])):
            found[seed] = check
    return found


def collect(runs: Path, data: Path = DATA) -> list[RowResult]:
    checks = read_checks(data)
    results = []
    for row in ROWS:
        statuses = [run_status(row.run_dir(seed, runs)) for seed in range(row.seeds)]
        results.append(RowResult(row, read_preset(row), statuses,
                                 current_checks(row, statuses, checks)))
    return results


# --- formatting ------------------------------------------------------------------------------

def formatter(metric: str) -> Show:
    """How a score is printed: recall (and the attention diagnostics) in percent, an MSE or a
    cross-entropy at four decimals."""
    return report.mse if metric in ("mse", "ce") else report.percent


def per_seed(result: RowResult, metric: str, T: int) -> str:
    """Each finished seed's ``metric`` at ``T`` in seed order ("diverged", or "unchecked" for
    a training-T score without its fresh-batch check)."""
    show = formatter(metric)
    cells = []
    for seed in result.finished_seeds:
        value = result.at(metric, T, seed)
        cells.append("diverged" if result.runs[seed].diverged else
                     "unchecked" if value is None else show(value))
    return ", ".join(cells) or DASH


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f}" if seconds >= 600 else f"{seconds / 60:.1f}"


def run_minutes(run: RunStatus) -> str:
    """The run's CPU minutes, marked where it trained on a GPU (its process's CPU time then
    counts the GPU's pace, not one core's)."""
    return minutes(run.cpu_s) + (" (GPU)" if run.on_gpu else "")


def link(path: Path, out: Path, text: str) -> str:
    return f"[{text}]({Path(os.path.relpath(path, out.parent)).as_posix()})"


table = report.table


# --- the sections ----------------------------------------------------------------------------

def chance(task: SequenceTask) -> float:
    """The recall of a memoryless guess, in percent: one symbol of the alphabet."""
    assert isinstance(task, RecallTask)
    return 100 / task.alphabet


def baseline(result: RowResult) -> str:
    """The memoryless score at the row's T (recall tasks: its recall and cross-entropy)."""
    task = make_task(TASK_NAMES[result.row.task])
    naive = task.baseline(result.preset.seq_len)
    if result.row.task is Task.adding:
        return f"{naive.metric.upper()} {naive.value:.3f}"
    return f"{chance(task):.1f}% (CE {naive.value:.4f})"


def target_text(result: RowResult) -> str:
    if result.preset.target is None:
        return "none (a fixed budget)"
    if result.score == "mse":
        return f"MSE ≤ {result.preset.target:g}"
    return f"≥ {100 * result.preset.target:g}% recall"


def met_on_fresh(result: RowResult) -> str:
    """``k of n``: the finished seeds whose fresh-batch score meets the row's target (a
    diverged seed does not), with the seeds not yet checked named."""
    if result.preset.target is None or not result.finished:
        return DASH
    met = sum(bool(check.meets) for check in result.checks.values())
    unchecked = result.unchecked()
    return (f"{target_text(result)}: {report.count(met, len(result.finished))}"
            + (f" ({len(unchecked)} unchecked)" if unchecked else ""))


def summary(results: Sequence[RowResult], out: Path) -> list[str]:
    """Every row at its training delay: ours (fresh batches), the paper's, the baseline, the
    cost."""
    lines = []
    for result in results:
        row, T = result.row, result.preset.seq_len
        finished = result.finished
        met = [run.results["converged_at"] for run in finished if run.results]
        paper = PAPER.get(row.preset)
        cross_entropy = DASH if row.task is Task.adding else \
            iqm_ci(result.values("ce", T), report.mse)
        stop_batch = [run.results["eval"].get(f"{result.score}@T{T}") if run.results else None
                      for run in finished]
        confirmed = [run.results["eval"].get(f"confirmed_{result.score}@T{T}")
                     for run in finished if run.results and run.results["converged_at"]]
        lines.append([
            link(row.preset_file, out, row.preset), row.label, f"{row.task.value}, T={T}",
            f"{len(finished)}/{row.seeds}",
            result.scored_iqm(result.score, T),
            per_seed(result, result.score, T),
            report.seeds(stop_batch, formatter(result.score), "diverged")
            if finished else DASH,
            cross_entropy, (paper.scores.get(T, DASH) if paper else DASH), baseline(result),
            target_text(result) if result.preset.target is None else met_on_fresh(result),
            ", ".join(DASH if m is None else str(m) for m in met) or DASH,
            ", ".join("unconfirmed" if value is None else formatter(result.score)(value)
                      for value in confirmed) or DASH,
            ", ".join(run_minutes(run) for run in finished) or DASH])
    return table(["preset", "cell", "task", "seeds finished",
                  "ours, fresh batches: IQM [95% CI]", "per seed, fresh batches",
                  "per seed, the stop's batch",
                  "ours: CE on the stop's batch (IQM [95% CI])", "paper",
                  "naive baseline", "target met on fresh batches", "iterations to target",
                  "the stop's confirmation batches", "CPU min per run"], lines,
                 ["---"] * 3 + ["---:"] * 5 + ["---"] * 2 + ["---:"] * 4)


def transfer(results: Sequence[RowResult]) -> list[str]:
    """Transfer-copy at every delay: ours, IQM [95% CI] over the finished seeds (the
    paper's), and how many seeds meet 99% at every T."""
    lines = []
    for result in results:
        if result.row.task is not Task.transfer_copy:
            continue
        paper = PAPER.get(result.row.preset)
        cells = []
        for T in TRANSFER_TS:
            evaluated = T in (result.preset.seq_len, *result.preset.eval_seq_lens)
            ours = iqm_ci(result.values("accuracy", T), report.percent) if evaluated else \
                "not evaluated"
            cells.append(f"{ours} ({paper.scores.get(T, DASH) if paper else DASH})")
        traced = [iqm_ci(result.values(key, result.preset.seq_len), report.percent)
                  for key in ("data_in_memory", "attention_on_data")]
        lines.append([result.row.label, f"{len(result.finished)}/{result.row.seeds}", *cells,
                      every_T(result), *traced])
    return table(["cell", "seeds finished", *(f"T={T}" for T in TRANSFER_TS),
                  "≥ 99% at every T", "symbols in memory at recall",
                  "recall's attention on the symbols"], lines,
                 ["---"] + ["---:"] * (len(TRANSFER_TS) + 4))


TRANSFER_BAR = 0.99
"""The issue's line for transfer-copy: 99% recall at every T."""


def meets_every_T(result: RowResult, seed: int) -> bool | None:
    """Whether the finished ``seed`` recalls 99% at every T it was evaluated at, its training
    T on fresh batches (None: not checked yet)."""
    scores = [result.at("accuracy", T, seed)
              for T in (result.preset.seq_len, *result.preset.eval_seq_lens)]
    if result.runs[seed].diverged:
        return False
    if any(score is None for score in scores):
        return None
    return all(score is not None and score >= TRANSFER_BAR for score in scores)


def every_T_counts(result: RowResult) -> tuple[int, int, int]:
    """``(k, n, unchecked)``: of the ``n`` finished seeds, ``k`` recall 99% at every T and
    ``unchecked`` have no fresh-batch check yet."""
    verdicts = [meets_every_T(result, seed) for seed in result.finished_seeds]
    return (sum(bool(v) for v in verdicts), len(verdicts),
            sum(verdict is None for verdict in verdicts))


def every_T(result: RowResult, claim: str = "") -> str:
    """``k of n`` finished seeds at 99% at every T (``claim`` after it), and how many are
    not checked on fresh batches yet."""
    if not result.finished:
        return DASH
    k, n, unchecked = every_T_counts(result)
    return report.count(k, n) + claim + (
        f" ({unchecked} not checked on fresh batches yet)" if unchecked else "")


def seed_table(results: Sequence[RowResult]) -> list[str]:
    """Every run: where it stands and its final evaluation."""
    lines = []
    for result in results:
        for seed, run in enumerate(result.runs):
            if run.results is None:
                continue
            show = formatter(result.score)
            evaluated = ", ".join(f"T={key.split('@T')[1]}: {show(value)}"
                                  for key, value in run.results["eval"].items()
                                  if key.startswith(f"{result.score}@"))
            losses = ", ".join(f"T={key.split('@T')[1]}: {report.mse(value)}"
                               for key, value in run.results["eval"].items()
                               if key.startswith("ce@"))
            met = run.results.get("converged_at")
            fresh = result.fresh(seed)
            if run.diverged:
                evaluated = f"diverged: {run.diverged}"
            lines.append([result.row.preset, str(seed), str(run.iteration),
                          DASH if met is None else str(met), run_minutes(run),
                          minutes(run.results["elapsed_s"]), evaluated,
                          DASH if fresh is None else show(fresh), losses or DASH])
    return table(["preset", "seed", "iterations", "target met at", "CPU min", "wall min",
                  "accuracy / MSE (final evaluation's batches)",
                  "at the training T, fresh batches", "cross-entropy"], lines,
                 ["---", "---:", "---:", "---:", "---:", "---:", "---", "---:", "---"])


def in_progress(results: Sequence[RowResult]) -> list[str]:
    lines = [f"- `{result.row.preset}` seed {seed}: {run.describe()}"
             + (f" ({minutes(run.cpu_s)} CPU min so far)" if run.cpu_s else "")
             for result in results for seed, run in enumerate(result.runs)
             if run.state is not State.finished]
    return lines or ["None: every run of the table has finished."]


def heatmaps(results: Sequence[RowResult]) -> None:
    """Draw the T = 5000 attention heatmap of each finished headline ReLSTM run whose
    checkpoint is newer than its heatmap. A checkpoint of an older format keeps the figure it
    has and says how to migrate it: a figure is no reason to stop the tables."""
    for result in results:
        if not (result.row.headline and result.row.cell == "relstm"):
            continue
        for run in result.finished:
            checkpoint = run.run_dir / CHECKPOINT_NAME
            figure = run.run_dir / f"attention_T{HEATMAP_T}.png"
            if checkpoint.exists() and (not figure.exists()
                                        or figure.stat().st_mtime < checkpoint.stat().st_mtime):
                try:
                    print(f"drawing {attention_from_checkpoint(run.run_dir, HEATMAP_T, figure)}")
                except OlderCheckpointError as error:
                    print(f"not drawn: {figure}: {error}")


def figures(results: Sequence[RowResult], out: Path) -> list[str]:
    """Links to each headline run's figures that exist."""
    names = {"learning_curve.png": "learning curve vs the baseline",
             "attention.png": "attention at T=100",
             f"attention_T{HEATMAP_T}.png": f"attention at T={HEATMAP_T}"}
    lines = []
    for result in results:
        if not result.row.headline:
            continue
        for seed, run in enumerate(result.runs):
            shown = [link(run.run_dir / name, out, text) for name, text in names.items()
                     if (run.run_dir / name).exists()]
            lines.append(f"- `{result.row.preset}` seed {seed} ({run.state.value}): "
                         + (", ".join(shown) or "no figures yet"))
    return lines


def settings(results: Sequence[RowResult]) -> list[str]:
    """Each row's preset: its comment, the paper's numbers' source, and its keys."""
    lines = []
    for result in results:
        row, paper = result.row, PAPER.get(result.row.preset)
        lines.append(f"- **{row.preset}** ({row.seeds} seed{'s' if row.seeds > 1 else ''}): "
                     f"{result.preset.comment} *Paper's numbers:* "
                     f"{paper.source if paper else 'none'}.  \n"
                     f"  `{' '.join(result.preset.settings)}`")
    return lines


def progress_curve(run: RunStatus, key: str) -> tuple[list[float], list[float]]:
    """``key`` against the iteration, over the rows of ``progress.csv`` that evaluated it."""
    path = run.run_dir / "progress.csv"
    if not path.exists():
        return [], []
    points = [(row.number("iteration"), value) for row in read_progress(path)
              if (value := row.finite(key)) is not None]
    return [p[0] for p in points], [p[1] for p in points]


def plot(results: Sequence[RowResult], out: Path) -> Path:
    """The headline rows' held-out recall at T = 100 over training, every seed: one panel per
    cell, one colour per setting (the same in every panel), so that no two series share a
    name."""
    headline = [result for result in results if result.row.headline]
    cells = list(dict.fromkeys(result.row.cell for result in headline)) or [""]
    variants = list(dict.fromkeys(result.row.variant for result in headline))
    figure = Figure(figsize=(6 * len(cells), 4.5), layout="constrained")
    panels = figure.subplots(1, len(cells), sharey=True, squeeze=False)[0]
    for axes, cell in zip(panels, cells, strict=True):
        for result in (result for result in headline if result.row.cell == cell):
            label: str | None = result.row.variant or "the paper's settings"
            for run in result.runs:
                x, y = progress_curve(run, f"eval/accuracy@T{result.preset.seq_len}")
                if x:
                    axes.plot(x, [100 * v for v in y], "o-", ms=2, lw=1, alpha=0.85, label=label,
                              color=f"C{variants.index(result.row.variant)}")
                    label = None  # one legend entry per row
        if headline:
            guess = chance(make_task(TASK_NAMES[headline[0].row.task]))
            axes.axhline(guess, color="k", ls="--", lw=1, label=f"memoryless ({guess:.1f}%)")
            axes.axhline(99, color="grey", ls=":", lw=1, label="target (99%)")
        axes.set_title(cell, fontsize=10)
        axes.set_xlabel("iteration")
        axes.set_ylim(0, 101)
        axes.grid(alpha=0.3)
        axes.legend(fontsize=7, loc="lower right")
    panels[0].set_ylabel("recall at T=100, held-out batch (%)")
    figure.suptitle("transfer-copy, training at T=100: one line per seed")
    path = out.parent / "curves.png"
    figure.savefig(path, dpi=110)
    return path


def render(results: Sequence[RowResult], out: Path) -> str:
    """RESULTS.md: the template with every section printed from ``results``."""
    # The headline sections read this module's rows: imported here, where both are loaded.
    from experiments.supervised.claims import sections as headline
    sections = {"summary": summary(results, out), "transfer": transfer(results),
                "per_seed": seed_table(results), "in_progress": in_progress(results),
                "figures": figures(results, out), "settings": settings(results),
                **headline(results, out)}
    return report.fill(TEMPLATE.read_text(), sections)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=Path, default=RUNS, help="the suite's run directories")
    parser.add_argument("--out", type=Path, default=HERE / "RESULTS.md",
                        help="the Markdown file to write (curves.png goes next to it)")
    parser.add_argument("--fresh", type=Path, default=DATA,
                        help="the fresh-batch checks (fresh_eval.py's data file)")
    parser.add_argument("--no-heatmaps", action="store_true",
                        help=f"do not draw the T={HEATMAP_T} attention heatmaps")
    args = parser.parse_args(argv)
    results = collect(args.runs.resolve(), args.fresh)
    if not args.no_heatmaps:
        heatmaps(results)
    out = args.out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    plot(results, out)
    out.write_text(render(results, out))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
