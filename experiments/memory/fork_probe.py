"""A linear probe for the cue in the memory of MemoryS7 agents, at the fork of MemoryS7 and of
MemoryS13 (issue 9): does the memory still hold the cue on MemoryS13 when the agent chooses?

    OMP_NUM_THREADS=1 nice -n 15 python -m experiments.memory.fork_probe \
        --runs /work/exp/experiments/memory/runs/MemoryS7/{relstm,lstm}/seed{0,1,2}

(from the repository's root: the script imports its sibling ``start_positions``). Each run is
played as ``start_positions.py`` plays it (``python -m rlmem.evaluate``'s loader, sampled
actions, env and action seeds), and at every step the memory cell's output (the vector the
actor and critic heads read, before MemoryEnv's constant mission features join it) and its
LSTM cell state ``c`` are recorded. Two steps of each episode are probed:

- *fork*: the observation at which the agent first stands in the fork's column
  (:attr:`EpisodeRecord.steps_to_fork`), the one on which it turns to an object;
- *after cue*: the observation right after the last one showing the cue
  (:attr:`EpisodeRecord.cue_last_seen` + 1), a control where the cue has just left the view.

A logistic regression (L2, features standardised on the training fold) predicts the cue (key
or ball) from the features: cross-validated within MemoryS7, trained on all of MemoryS7 and
tested on MemoryS13, and cross-validated within MemoryS13. The tables go to
``S13_FORK_PROBE.md`` beside this script; nothing is written into the run directories.
"""

from __future__ import annotations

import enum
import math
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from experiments.memory.start_positions import (
    EpisodeRecord,
    evaluation_seed,
    load_for,
    markdown_table,
    parse_play_arguments,
    play,
    play_arguments,
)
from rlmem.agents.policy_evaluation import episode_quotas
from rlmem.agents.ppo.actor import PPOActor
from rlmem.cells import Cell, CellOutput

HERE = Path(__file__).resolve().parent
OUTPUT = HERE / "S13_FORK_PROBE.md"
TRAIN_ENV, TEST_ENV = "MemoryS7", "MemoryS13"
FOLDS = 5
L2 = 1e-2
"""Weight decay of the probe (on standardised features): the mean log-loss plus
``L2 * |w|^2``."""


class Feature(enum.Enum):
    """Which vector of the memory is probed."""

    OUTPUT = "output"
    """The cell's output: what the policy heads read (MemoryEnv's mission is constant)."""
    CELL = "c"
    """The LSTM cell state ``c`` (every probed cell keeps one in its state)."""


class ProbeStep(enum.Enum):
    """Which step of an episode is probed."""

    FORK = "fork"
    """The first observation in the fork's column (every episode that reaches it)."""
    FORK_AFTER_CUE = "fork, cue seen before"
    """The same, in the episodes that saw the cue before reaching the fork: there is
    something to remember."""
    AFTER_CUE = "after cue"
    """The observation after the last one that showed the cue (the control)."""
    CHOICE = "choice"
    """The last observation, on which the agent steps to an object (episodes that saw the cue
    and ended at an object)."""

    def index(self, record: EpisodeRecord) -> int | None:
        """The observation index (0: the first) probed in ``record``; None if the episode has
        no such step among those the agent acted on."""
        step: int | None
        if self is ProbeStep.FORK:
            step = record.steps_to_fork
        elif self is ProbeStep.FORK_AFTER_CUE:
            step = record.steps_to_fork if record.cue_seen_before_fork else None
        elif self is ProbeStep.AFTER_CUE:
            step = None if record.cue_last_seen is None else record.cue_last_seen + 1
        else:
            step = record.length - 1 if record.delay is not None else None
        return step if step is not None and step < record.length else None


class CellTap:
    """Records, at every call of ``cell.forward_aux``, the output and the state's ``c`` of each
    env; the cell computes as before.

    Shapes:
        - :attr:`steps` ``[feature]``: ``(calls, B, features)``
    """

    def __init__(self, cell: Cell) -> None:
        self.calls: dict[Feature, list[Tensor]] = {feature: [] for feature in Feature}
        forward = cell.forward_aux

        def recorded(*args: Any, **kwargs: Any) -> CellOutput:
            out: CellOutput = forward(*args, **kwargs)
            self.calls[Feature.OUTPUT].append(out.output[-1].detach().clone())
            self.calls[Feature.CELL].append(out.state.c.detach().clone())
            return out

        # An instance attribute shadows the method: the model calls the recording one.
        object.__setattr__(cell, "forward_aux", recorded)

    def steps(self, feature: Feature) -> np.ndarray:
        return torch.stack(self.calls[feature]).flatten(2).numpy()


@dataclass(frozen=True)
class ProbeData:
    """One run on one env: every counted episode and its features at every step."""

    label: str
    env: str
    records: list[EpisodeRecord]
    features: dict[Feature, list[np.ndarray]]
    """``features[f][i]``: episode ``i``'s features, one row per observation acted on."""

    def at(self, step: ProbeStep, feature: Feature) -> tuple[np.ndarray, np.ndarray]:
        """The features at ``step`` of the episodes having it, and their cue (1: key).

        Shapes: ``(episodes, features)``, ``(episodes,)``."""
        rows, cues = [], []
        for record, episode in zip(self.records, self.features[feature], strict=True):
            index = step.index(record)
            if index is not None:
                rows.append(episode[index])
                cues.append(record.cue == "key")
        width = self.features[feature][0].shape[1]
        return (np.asarray(rows, dtype=np.float64).reshape(-1, width),
                np.asarray(cues, dtype=np.float64))


def split_episodes(steps: np.ndarray, records: Sequence[EpisodeRecord],
                   quotas: Sequence[int]) -> list[np.ndarray]:
    """Cut the per-step features of each env into its counted episodes, in the order
    :func:`start_positions.play` returns them (env by env, each env's first ``quota``).

    With ``SAME_STEP`` autoreset an env's episodes follow one another with no step between
    them, each acted on ``length`` times.

    Shapes:
        - steps: ``(calls, num_envs, features)``
    """
    episodes = []
    position = 0
    for env, quota in enumerate(quotas):
        offset = 0
        for record in records[position:position + quota]:
            episodes.append(steps[offset:offset + record.length, env])
            offset += record.length
        position += quota
    if position != len(records):
        raise ValueError(f"{len(records)} records for quotas summing to {position}")
    return episodes


def collect(run: Path, env: str, episodes: int, num_envs: int, seed: int) -> ProbeData:
    """Load ``run`` as ``python -m rlmem.evaluate`` does, play it on ``env`` and record its
    memory.

    Raises:
        TypeError: the run is not one of our PPO (no memory to tap).
    """
    loaded = load_for(run, env)
    actor = loaded.actor
    if not isinstance(actor, PPOActor):
        raise TypeError(f"{run} is not a run of our PPO; its memory cannot be tapped")
    tap = CellTap(actor.model.memory)
    records = play(actor, loaded.env, loaded.make_env, episodes, num_envs,
                   evaluation_seed(seed))
    quotas = episode_quotas(episodes, min(num_envs, episodes))
    features = {feature: split_episodes(tap.steps(feature), records, quotas)
                for feature in Feature}
    return ProbeData(f"{run.parent.name}/{run.name}", loaded.env, records, features)


# --- the probe ------------------------------------------------------------------------------


@dataclass(frozen=True)
class LinearProbe:
    """A logistic regression on standardised features: ``p(key) = σ(w·(x - μ)/s + b)``."""

    mean: Tensor
    scale: Tensor
    weight: Tensor
    bias: Tensor

    @staticmethod
    def fit(x: np.ndarray, y: np.ndarray, l2: float = L2) -> LinearProbe:
        """Minimise the mean log-loss plus ``l2 * |w|^2`` (L-BFGS).

        Shapes: x ``(N, F)``, y ``(N,)`` in {0, 1}.

        Raises:
            ValueError: fewer than two examples, or one class only.
        """
        if len(y) < 2 or len(np.unique(y)) < 2:
            raise ValueError(f"a probe needs both cues among its examples; got {len(y)} "
                             f"examples of {np.unique(y).tolist()}")
        inputs = torch.as_tensor(x, dtype=torch.float64)
        targets = torch.as_tensor(y, dtype=torch.float64)
        mean = inputs.mean(0)
        scale = inputs.std(0, unbiased=False).clamp_min(1e-6)
        standard = (inputs - mean) / scale
        weight = torch.zeros(inputs.shape[1], dtype=torch.float64, requires_grad=True)
        bias = torch.zeros((), dtype=torch.float64, requires_grad=True)
        optimiser = torch.optim.LBFGS([weight, bias], max_iter=200,
                                      line_search_fn="strong_wolfe")

        def loss() -> Tensor:
            optimiser.zero_grad()
            value = (torch.nn.functional.binary_cross_entropy_with_logits(
                standard @ weight + bias, targets) + l2 * weight.square().sum())
            value.backward()
            return value

        optimiser.step(loss)
        return LinearProbe(mean, scale, weight.detach(), bias.detach())

    def predict(self, x: np.ndarray) -> np.ndarray:
        """The predicted cue (1: key). Shapes: x ``(N, F)`` -> ``(N,)``."""
        logits = ((torch.as_tensor(x, dtype=torch.float64) - self.mean) / self.scale
                  @ self.weight + self.bias)
        return (logits > 0).numpy().astype(np.float64)


@dataclass(frozen=True)
class Score:
    """Correct predictions out of ``total``."""

    correct: int
    total: int

    def cell(self) -> str:
        """``accuracy ± binomial standard error (correct/total)``, or a dash."""
        if self.total == 0:
            return "—"
        p = self.correct / self.total
        return f"{p:.0%} ± {math.sqrt(p * (1 - p) / self.total):.0%} ({self.correct}/{self.total})"

    def __add__(self, other: Score) -> Score:
        return Score(self.correct + other.correct, self.total + other.total)


NO_SCORE = Score(0, 0)


def transfer_score(train: tuple[np.ndarray, np.ndarray],
                   test: tuple[np.ndarray, np.ndarray]) -> Score:
    """A probe fit on ``train``, scored on ``test``."""
    if len(test[1]) == 0:
        return NO_SCORE
    predicted = LinearProbe.fit(*train).predict(test[0])
    return Score(int((predicted == test[1]).sum()), len(test[1]))


def cross_validated(data: tuple[np.ndarray, np.ndarray], folds: int = FOLDS,
                    seed: int = 0) -> Score:
    """Each example predicted by a probe fit on the other folds (shuffled, ``folds`` folds);
    a dash when a fold would hold one cue only."""
    x, y = data
    if len(y) < folds or min(y.sum(), len(y) - y.sum()) < folds:
        return NO_SCORE
    order = np.random.default_rng(seed).permutation(len(y))
    total = NO_SCORE
    for fold in np.array_split(order, folds):
        train = np.setdiff1d(order, fold)
        total += transfer_score((x[train], y[train]), (x[fold], y[fold]))
    return total


@dataclass(frozen=True)
class ProbeScores:
    """The three probes of one run (or a pool), one feature, one step."""

    within_train: Score
    across: Score
    within_test: Score

    def __add__(self, other: ProbeScores) -> ProbeScores:
        return ProbeScores(self.within_train + other.within_train, self.across + other.across,
                           self.within_test + other.within_test)


def probe_scores(train: ProbeData, test: ProbeData, step: ProbeStep,
                 feature: Feature) -> ProbeScores:
    """Cross-validated on ``train``, ``train`` to ``test``, cross-validated on ``test``."""
    train_data, test_data = train.at(step, feature), test.at(step, feature)
    return ProbeScores(cross_validated(train_data), transfer_score(train_data, test_data),
                       cross_validated(test_data))


# --- report ---------------------------------------------------------------------------------

Row = tuple[str, ProbeStep, Feature, ProbeScores]


def score_rows(pairs: Sequence[tuple[ProbeData, ProbeData]]) -> list[Row]:
    """Every run's scores for every step and feature."""
    return [(train.label, step, feature, probe_scores(train, test, step, feature))
            for train, test in pairs for step in ProbeStep for feature in Feature]


def pooled(rows: Sequence[Row]) -> list[Row]:
    """The scores of each cell's seeds summed (counts pooled; each seed has its own probe)."""
    sums: dict[tuple[str, ProbeStep, Feature], ProbeScores] = {}
    for label, step, feature, scores in rows:
        key = (label.split("/")[0], step, feature)
        sums[key] = sums[key] + scores if key in sums else scores
    return [(cell, step, feature, scores) for (cell, step, feature), scores in sums.items()]


def table(rows: Sequence[Row]) -> list[str]:
    return markdown_table(
        ["run", "step", "feature", f"{TRAIN_ENV} CV", f"{TRAIN_ENV} → {TEST_ENV}",
         f"{TEST_ENV} CV"],
        [[label, step.value, feature.value, scores.within_train.cell(), scores.across.cell(),
          scores.within_test.cell()] for label, step, feature, scores in rows])


def coverage_table(pairs: Sequence[tuple[ProbeData, ProbeData]]) -> list[str]:
    """How many episodes each env gives each step, and the success among them."""
    rows = []
    for data in (d for pair in pairs for d in pair):
        cells = []
        for step in ProbeStep:
            having = [r for r in data.records if step.index(r) is not None]
            success = sum(r.success for r in having)
            cells.append(f"{len(having)} ({success / max(len(having), 1):.0%})")
        looked_back = sum(r.cue_seen_from_fork for r in data.records)
        rows.append([data.label, data.env, str(len(data.records)), *cells, str(looked_back)])
    return markdown_table(["run", "env", "episodes", *(f"with {s.value} step (success)"
                                                       for s in ProbeStep),
                           "saw cue from fork"], rows)


def report(pairs: Sequence[tuple[ProbeData, ProbeData]], command: str, seconds: float,
           reading: Sequence[str]) -> str:
    rows = score_rows(pairs)
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    lines = [
        "# A linear probe for the cue at the fork, MemoryS7 agents on MemoryS7 and MemoryS13",
        "",
        f"Generated by `{command}` (see its docstring) in {seconds / 60:.1f} min; load average "
        f"at the end: {load} on {os.cpu_count()} cores. Cells read `accuracy ± binomial "
        f"standard error (correct/examples)`; chance is 50%. {FOLDS}-fold cross-validation; "
        f"logistic regression with L2 {L2} on standardised features. *output*: the memory "
        "cell's output at that step (the vector the policy heads read); *c*: its LSTM cell "
        "state. *fork*: the observation on which the agent first stands in the fork's column; "
        "*fork, cue seen before*: the same in the episodes that saw the cue before the fork; "
        "*after cue*: the observation after the last one that showed the cue; *choice*: the "
        "last observation, on which the agent steps to an object (episodes that saw the cue "
        "and ended at an object). Pooled rows sum "
        "the counts of the seeds' own probes.",
        "",
        *reading,
        "## Pooled by cell",
        "",
        *table(pooled(rows)),
        "",
        "## Per run",
        "",
        *table(rows),
        "",
        "## Episodes probed",
        "",
        *coverage_table(pairs),
    ]
    return "\n".join(lines) + "\n"


READING = "## Reading"


def hand_written(path: Path) -> list[str]:
    """The :data:`READING` section of ``path`` up to the next heading, kept on regeneration."""
    lines = path.read_text().splitlines() if path.exists() else []
    starts = [i for i, line in enumerate(lines) if line.startswith(READING)]
    if not starts:
        return []
    end = next((i for i in range(starts[0] + 1, len(lines)) if lines[i].startswith("## ")),
               len(lines))
    return lines[starts[0]:end]


def main(argv: Sequence[str] | None = None) -> int:
    parser = play_arguments((__doc__ or "").splitlines()[0], OUTPUT)
    args = parse_play_arguments(parser, argv)
    started = time.monotonic()
    pairs = []
    for run in args.runs:
        train, test = (collect(run, env, args.episodes, args.num_envs, args.seed)
                       for env in (TRAIN_ENV, TEST_ENV))
        pairs.append((train, test))
        print(f"{run}: {time.monotonic() - started:.0f}s", flush=True)
    command = " ".join(["python -m experiments.memory.fork_probe",
                        *(argv if argv is not None else sys.argv[1:])])
    args.output.write_text(report(pairs, command, time.monotonic() - started,
                                  hand_written(args.output)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
