"""Reproduction suite: every cell in our PPO and sb3-contrib's RecurrentPPO on POPGym's Easy envs.

    python -m experiments.popgym.suite --dry-run        # the runs, where each stands, commands,
                                                        # and the CPU hours left (hours_left)
    python -m experiments.popgym.suite                  # train what is left (resumable)
    python -m experiments.popgym.suite --envs RepeatPreviousEasy --agents lstm sb3 --seeds 0
    python -m experiments.popgym.aggregate              # RESULTS.md, mmer.csv

Eight POPGym families at their Easy setting (:data:`ENVS`), the nine cells of
:data:`rlmem.cells.CELLS` in our PPO at the library's defaults (``python -m rlmem.train
env=<env> memory=<cell>``) and sb3-contrib's RecurrentPPO with its own ``MlpLstmPolicy``
(:mod:`experiments.popgym.sb3_reference`, label :data:`REFERENCE`), five seeds each, every run
:data:`FRAMES` frames: 400 runs. Each run is ``runs/<env>/<agent>/seed<k>/``; the measure is
POPGym's maximum mean episodic reward over training (:mod:`experiments.popgym.mmer`), so there is
no evaluation step.

It runs seed by seed (seed 0 of every env and agent, then seed 1, ...), so a partial suite has
every row. Every step skips finished work: a run whose ``progress.csv`` has its frames is not
started (ours without their checkpoint too: :func:`~experiments.common.suite_runs.startable`); an
unfinished run of ours resumes from its checkpoint, an unfinished sb3 run starts again from zero
(it keeps none); a run another process holds is skipped, not failed. So it can be stopped
(Ctrl-C, or SIGINT to its PID: the running runs stop at their next checkpoint,
:mod:`experiments.common.signal_relay`) and run again over several sittings. It exits with
status 1 when a run failed, 130 after Ctrl-C.

A run of ours that recorded other values than its preset decides today (:func:`superseded`: the
preset changed since) measured an earlier default. Unless Hydra overrides are given, the suite
runs it again (:data:`~experiments.common.suite_runs.AGAIN`), which moves the earlier run into
the run's ``previous/`` (nothing is deleted), once: whether it still is superseded is checked
again just before it starts, as another process of the suite may have run it since.
``aggregate`` counts only runs made with today's values. A run trained part-way whose
checkpoint is gone (committed before it finished) cannot resume, and is started again likewise
(:func:`~experiments.common.suite_runs.cannot_resume`).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from experiments.common.outcome import Outcome, run_recorded
from experiments.common.signal_relay import exit_passing_signals_on, stopping
from experiments.common.suite_runs import (
    AGAIN,
    PlannedRun,
    add_run_arguments,
    cannot_resume,
    print_dry_run,
    reported,
    standing,
    startable,
)
from rlmem.agents.ppo.presets import MEMORY_SIZE_KEY, NUM_ENVS_KEY, PRESETS, Preset
from rlmem.cells import CELLS
from rlmem.runs import INTERRUPTED
from rlmem.runs.progress import read_progress

HERE = Path(__file__).resolve().parent
RUNS = HERE / "runs"

FAMILIES = ("RepeatPrevious", "RepeatFirst", "CountRecall", "Autoencode",
            "PositionOnlyCartPole", "PositionOnlyPendulum", "HigherLower", "Battleship")
"""POPGym's families in the suite: its diagnostic, control, noisy and game envs."""
ENVS = tuple(f"{family}Easy" for family in FAMILIES)
"""POPGym's names of the envs (``RepeatPreviousEasy``, ...): the runs' folder names."""


def env_argument(name: str) -> str:
    """What ``env=`` is given for the POPGym env ``name``: the short name itself, which
    ``rlmem.envs`` maps to ``popgym:popgym-<name>-v0`` (an rlmem without POPGym's short names
    takes that full id instead: return it here)."""
    return name


ENV_OVERRIDES: dict[str, tuple[str, ...]] = {
    "AutoencodeEasy": ("wrappers=[gymnasium.wrappers:FlattenObservation]",),
}
"""Overrides our PPO's runs of an env need. Autoencode observes a ``Tuple`` (the bit, and
whether to listen or answer), which our encoders do not take: gymnasium's
``FlattenObservation`` makes it the one-hot vector that the sb3 reference sees too
(:func:`experiments.popgym.sb3_reference.make_env`)."""


TRAINER = ("vectorization=sync",)
"""How our PPO's runs step and update, pinned: gymnasium's POPGym envs in one process, in
sync, the trainer's exact reference path (one update thread). Every row of the suite was made
that way, before the tensor envs became the default (``env_backend=auto``, which such a run
now takes); they equal gymnasium's step for step but draw other episodes from a seed, and the
default trainer may change the update's arithmetic. Pinned, the rows stay one measurement, the
cells added later (ffm, lru, deltanet, gtrxl) included."""

FRAMES = 163_840
"""Frames per run: 80 updates of our PPO's 16 envs × 128 frames (and of RecurrentPPO's, matched),
whole updates for any of 1, 2, 4, 8, 16 or 32 envs × 128 frames too. Measured on
RepeatPreviousEasy, seed 0, on a shared 2-core machine (load 7-9): our lstm with the generic
preset's memory of 64 then 67 s of CPU (182 s wall), sb3-contrib's RecurrentPPO 587 s of CPU
(31 min wall). The generic preset's memory is now 256 (sb3-contrib's LSTM's), which cost about
2.3 times as much per frame in the tuning runs (``experiments/popgym/tune.py``): about 150 s
of CPU for lstm. Our other cells run at 0.66-0.9 times lstm's speed at 64
(``benchmarks/results/throughput_cells.txt``; not measured at 256), so the 360 runs of ours
take roughly 15-20 CPU hours and sb3's 40 6.5. The POPGym paper trained 15M frames per trial,
about 90 times this."""
SEEDS = tuple(range(5))

REFERENCE = "sb3"
"""The label of sb3-contrib's RecurrentPPO (:mod:`experiments.popgym.sb3_reference`)."""
HEADLINE = ("lstm", "gru")
"""The cells the POPGym paper ran too, listed first."""
AGENTS = (*HEADLINE, *sorted(set(CELLS) - set(HEADLINE)), REFERENCE)
"""Every label of the suite, in the order it runs them and ``aggregate`` lists them."""


def run_dir(root: Path, env: str, agent: str, seed: int) -> Path:
    """Where the run of ``agent`` at ``seed`` on ``env`` goes."""
    return root / env / agent / f"seed{seed}"


def superseded(config: DictConfig) -> bool:
    """Whether a run's ``config`` is one of our PPO's that recorded values, of the keys its
    preset decides, the memory's size and the envs, other than its preset's today: the run
    measured an earlier default. sb3-contrib's runs, which have no preset, are not."""
    agent = config.get("agent")
    if not isinstance(agent, DictConfig) or agent.get("preset") is None:
        return False
    today = dataclasses.asdict(PRESETS[Preset[str(agent.preset)]])
    recorded = {key: agent.get(key) for key in today}
    recorded[MEMORY_SIZE_KEY] = config.memory.hidden_size
    recorded[NUM_ENVS_KEY] = config.get("num_envs")
    return recorded != today


def made_earlier(run: Path) -> bool:
    """Whether the run in ``run`` is :func:`superseded` (a run without a config is not)."""
    path = run / "config.yaml"
    if not path.exists():
        return False
    config = OmegaConf.load(path)
    return isinstance(config, DictConfig) and superseded(config)


def runs_again(run: PlannedRun) -> bool:
    """Whether the suite runs ``run`` again (:data:`AGAIN`)."""
    return run.command[-len(AGAIN):] == list(AGAIN)


def command(root: Path, env: str, agent: str, seed: int, frames: int,
            extra: Sequence[str] = ()) -> list[str]:
    """The command that trains (or resumes) one run: ``python -m rlmem.train`` for a cell
    (:data:`TRAINER`, the env's :data:`ENV_OVERRIDES`, then ``extra`` Hydra overrides appended),
    :mod:`experiments.popgym.sb3_reference` for :data:`REFERENCE`."""
    where = run_dir(root, env, agent, seed)
    if agent == REFERENCE:
        return ["python", "-m", "experiments.popgym.sb3_reference", "--env", env_argument(env),
                "--seed", str(seed), "--frames", str(frames), "--run-dir", str(where)]
    return ["python", "-m", "rlmem.train", f"env={env_argument(env)}", f"memory={agent}",
            f"seed={seed}", f"frames={frames}", "progress_bar=false", f"run_dir={where}",
            *TRAINER, *ENV_OVERRIDES.get(env, ()), *extra]


def starts_again(run: Path, frames: int, extra: Sequence[str]) -> bool:
    """Whether the suite starts the run in ``run`` again from zero (:data:`AGAIN`): it is
    :func:`superseded` and no ``extra`` overrides are given (with them, a run's values are the
    overrides', not the preset's), or it :func:`cannot_resume`."""
    return (not extra and made_earlier(run)) or cannot_resume(run, frames)


def planned(root: Path, envs: Sequence[str], agents: Sequence[str], seeds: Sequence[int],
            frames: int, extra: Sequence[str] = ()) -> list[PlannedRun]:
    """Every run, seed by seed, then env by env, then agent by agent; with :data:`AGAIN`
    where the suite :func:`starts_again` it."""
    return [PlannedRun(f"{env} {agent} seed {seed}", where, frames, None,
                       [*command(root, env, agent, seed, frames, extra),
                        *(AGAIN if starts_again(where, frames, extra) else ())])
            for seed in seeds for env in envs for agent in agents
            for where in [run_dir(root, env, agent, seed)]]


def recorded_speeds(root: Path) -> dict[str, float]:
    """Each agent's frames per second as its runs under ``root`` recorded them: the median
    over the runs of each run's median ``fps`` (the first two updates left out, which carry the
    start-up). Recorded under whatever load those runs shared the machine with: a guide to the
    CPU time a budget takes, not a measurement."""
    per_run: dict[str, list[float]] = {}
    for progress in sorted(root.glob("*/*/seed*/progress.csv")):
        speeds = [row.number("fps") for row in read_progress(progress)[2:]]
        if speeds:
            per_run.setdefault(progress.parent.parent.name, []).append(statistics.median(speeds))
    return {agent: statistics.median(values) for agent, values in per_run.items()}


def hours_left(runs: Sequence[PlannedRun], speeds: Mapping[str, float]) -> tuple[float, list[str]]:
    """The CPU hours the unfinished ``runs`` take at ``speeds`` (:func:`recorded_speeds`), one
    core each, and the agents with no recorded speed (left out of the hours)."""
    hours, unknown = 0.0, set()
    for run in runs:
        where = standing(run.run_dir, run.budget)
        if where.finished:
            continue
        agent = run.run_dir.parent.name
        if agent not in speeds:
            unknown.add(agent)
            continue
        hours += (run.budget - (where.frames or 0)) / speeds[agent] / 3600
    return hours, sorted(unknown)


def train_all(runs: Sequence[PlannedRun], jobs: int,
              extra: Sequence[str] = ()) -> dict[str, Outcome]:
    """Train the runs left (planned with the Hydra overrides ``extra``), ``jobs`` at a time,
    and how each ended (``done`` for a run that was finished already); after Ctrl-C (the
    suite's, or one run's) no further run starts."""
    stop = threading.Event()

    def train_one(run: PlannedRun) -> Outcome:
        if runs_again(run) and not starts_again(run.run_dir, run.budget, extra):
            # Another process of the suite ran it again since this one planned: not a third time.
            run = dataclasses.replace(run, command=run.command[:-len(AGAIN)])
        where = standing(run.run_dir, run.budget)
        if not runs_again(run) and (where.finished or not startable(run.run_dir, run.budget)):
            return Outcome.done
        if where.holder is not None:
            print(f"[suite] {run.name}: running now (PID {where.holder}); skipped", flush=True)
            return Outcome.locked
        if stop.is_set() or stopping():
            return Outcome.interrupted
        print("+", " ".join(run.command), flush=True)
        outcome = reported(run.name, run_recorded([sys.executable, *run.command[1:]]))
        if outcome is Outcome.interrupted:
            stop.set()
        return outcome

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return {run.name: outcome
                for run, outcome in zip(runs, pool.map(train_one, runs), strict=True)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", default=list(ENVS), choices=ENVS)
    parser.add_argument("--agents", nargs="+", default=list(AGENTS), choices=AGENTS,
                        help=f"cells, and {REFERENCE} for sb3-contrib's RecurrentPPO")
    parser.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS))
    parser.add_argument("--frames", type=int, default=FRAMES,
                        help="frames per run (the suite's budget; aggregate reads any)")
    parser.add_argument("--jobs", type=int, default=1, help="runs trained at once")
    add_run_arguments(parser, RUNS, "every run of our PPO")
    args = parser.parse_args(argv)
    runs = planned(args.runs.resolve(), args.envs, args.agents, args.seeds, args.frames,
                   args.overrides)
    if args.dry_run:
        print_dry_run([run for run in runs if not runs_again(run)], [], 0)
        for run in runs:
            if runs_again(run):
                why = ("made with an earlier preset" if not args.overrides and
                       made_earlier(run.run_dir) else
                       f"{standing(run.run_dir, run.budget).describe()}, its checkpoint gone")
                print(f"# {run.name}: {why}; runs again, the earlier run moved into previous/\n"
                      f"{' '.join(run.command)}")
        hours, unknown = hours_left(runs, recorded_speeds(RUNS))
        # No quote marks in the line: the suite's tests read the dry run with shlex.
        print(f"# left: about {hours:.1f} hours of one core, at the frames/s recorded by each "
              f"agent in {RUNS.relative_to(HERE.parent.parent)} (median; under the load of "
              "their day, a guide only)"
              + (f"; no recorded speed for {', '.join(unknown)}" if unknown else ""))
        return 0
    outcomes = train_all(runs, args.jobs, args.overrides)
    if Outcome.interrupted in outcomes.values():
        return INTERRUPTED
    failed = [name for name, outcome in outcomes.items() if outcome is Outcome.failed]
    if failed:
        print(f"popgym suite: {len(failed)} runs failed ({', '.join(failed)}; see above); the "
              "rest are done", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    exit_passing_signals_on(main)
