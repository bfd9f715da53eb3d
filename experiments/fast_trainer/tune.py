"""How the ``fast`` preset's values were chosen: by the rule of ``TUNING.md`` (written before
any run), on tuning seeds 0-2 only.

    python -m experiments.fast_trainer.tune --dry-run   # the runs, where each stands
    python -m experiments.fast_trainer.tune --runs      # frames to threshold (resumable)
    python -m experiments.fast_trainer.tune --speed     # frames/s, candidates in turn
    python -m experiments.fast_trainer.tune --report    # the rule applied, into TUNING.md

Every run is ``tune_runs/<candidate>/<env>/seed<k>/`` with its outcome in ``solve.json``
(:mod:`experiments.fast_trainer.solve_runs`). ``--code DIR`` trains with the rlmem of ``DIR``
(:func:`~experiments.fast_trainer.solve_runs.packaged_commit`), so the checkout may change
while the sweep runs. Each candidate names all its values as overrides, so it runs what was
measured whatever the presets become.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from experiments.fast_trainer.solve_runs import OUTCOME, Solve, load_average, train_to_threshold

HERE = Path(__file__).resolve().parent
RUNS = HERE / "tune_runs"
SPEED = HERE / "tune_speed.json"
OUTPUT = HERE / "TUNING.md"
RESULTS_HEADING = "## Results"

TUNING_SEEDS = (0, 1, 2)
"""The only seeds tuned on; 3-7 are ``benchmarks/time_to_solve.py``'s test seeds."""
CAPS = {"DoorKey-5x5": 400_000, "MemoryS7": 800_000}
"""Each tuning env and the frames a run stops at if it has not reached the threshold."""
THRESHOLD = 0.9
"""``stop_return``: the mean return of the last 1,000 episodes."""
CLOSE = 0.10
"""Scores within this share of each other are a tie, broken by frames (``TUNING.md``)."""


@dataclass(frozen=True)
class Candidate:
    """The values a candidate gives the preset's shape keys."""

    num_envs: int
    frames_per_env: int
    epochs: int
    batch_size: int
    lr: float = 1e-3
    """The MiniGrid preset's, but for the second addendum's candidates."""

    def overrides(self) -> list[str]:
        """Its Hydra overrides, with the MiniGrid preset's learning values named."""
        return [f"num_envs={self.num_envs}", f"agent.frames_per_env={self.frames_per_env}",
                f"agent.epochs={self.epochs}", f"agent.batch_size={self.batch_size}",
                f"agent.lr={self.lr}", "agent.preset=minigrid", "env_backend=tensor",
                # as every tuning run before these keys existed: the candidates' arithmetic
                # alike
                "agent.update_threads=1", "agent.fused_adam=false"]


CANDIDATES = {"A": Candidate(256, 16, 1, 1024), "B": Candidate(256, 16, 1, 256),
              "C": Candidate(256, 16, 2, 512), "D": Candidate(64, 64, 2, 512),
              "E": Candidate(256, 16, 4, 256), "F": Candidate(256, 16, 1, 256, lr=3e-3),
              "G": Candidate(256, 16, 1, 1024, lr=4e-3), "H": Candidate(256, 16, 1, 256, lr=2e-3)}
"""The candidates of ``TUNING.md``, in the order they are run (D and E: its addendum; F, G
and H: its second addendum)."""


def run_dir(name: str, env: str, seed: int) -> Path:
    return RUNS / name / env / f"seed{seed}"


def capped(name: str) -> bool:
    """Whether a finished run of candidate ``name`` stopped at its cap (rule 1: it is then
    eligible only if no candidate is)."""
    return any(not Solve(**json.loads(path.read_text())).reached
               for path in (RUNS / name).glob(f"*/*/{OUTCOME}"))


def sweep(code: Path | None, dry_run: bool) -> None:
    """Every run of every candidate, env-major (the short DoorKey runs first), seeds in turn;
    the runs of a candidate that already stopped at a cap come after all the others' (rule 1
    leaves it out unless no candidate is eligible)."""
    late = [name for name in CANDIDATES if capped(name)]
    runs = [(name, env, cap, seed) for group in ([n for n in CANDIDATES if n not in late], late)
            for env, cap in CAPS.items() for seed in TUNING_SEEDS for name in group]
    for name, env, cap, seed in runs:
        folder = run_dir(name, env, seed)
        if dry_run:
            print(f"{name} {env} seed{seed}: "
                  f"{'done' if (folder / OUTCOME).exists() else 'to run'}")
            continue
        overrides = [f"env={env}", "memory=lstm", f"seed={seed}", f"frames={cap}",
                     f"stop_return={THRESHOLD}", *CANDIDATES[name].overrides()]
        solve = train_to_threshold(overrides, folder, code)
        print(f"{name} {env} seed{seed}: {solve}", flush=True)


def solves(name: str, env: str) -> list[Solve] | None:
    """A candidate's finished runs on ``env``, one per tuning seed; None while one is left."""
    found = []
    for seed in TUNING_SEEDS:
        outcome = run_dir(name, env, seed) / OUTCOME
        if not outcome.exists():
            return None
        found.append(Solve(**json.loads(outcome.read_text())))
    return found


def measure_speed(updates: int) -> None:
    """Every candidate's frames/s on each env, candidates in turn, one update at a time
    (:func:`experiments.fast_trainer.speed.alternating_fps`), into ``tune_speed.json``."""
    from experiments.fast_trainer.speed import alternating_fps  # torch only here

    before, start = load_average(), time.time()
    speeds = {env: alternating_fps(env, "lstm", {name: vars(candidate) for name, candidate
                                                  in CANDIDATES.items()}, updates)
              for env in CAPS}
    SPEED.write_text(json.dumps({"fps": speeds, "load_before": before,
                                 "load_after": load_average(), "updates": updates,
                                 "seconds": time.time() - start}, indent=1))
    print(json.dumps(speeds, indent=1))


def scores(fps: dict[str, dict[str, float]], envs: Sequence[str]
           ) -> dict[str, tuple[float, float, bool]]:
    """Each candidate finished on ``envs``: its score (seconds, rule 2), frames summed over
    envs, and whether every run reached the threshold (rule 1)."""
    result = {}
    for name in CANDIDATES:
        runs = {env: solves(name, env) for env in envs}
        if any(found is None for found in runs.values()):
            continue  # rule 4: unfinished
        frames = {env: statistics.mean(solve.frames for solve in found or [])
                  for env, found in runs.items()}
        result[name] = (sum(frames[env] / fps[env][name] for env in envs), sum(frames.values()),
                        all(solve.reached for found in runs.values() for solve in found or []))
    return result


def choose(scored: dict[str, tuple[float, float, bool]]) -> str | None:
    """Rules 1 and 3 of ``TUNING.md``: the lowest score among the eligible, a tie within
    :data:`CLOSE` going to fewer frames."""
    eligible = {name: value for name, value in scored.items() if value[2]} or scored
    if not eligible:
        return None
    best = min(eligible, key=lambda name: eligible[name][0])
    close = [name for name, value in eligible.items()
             if value[0] <= eligible[best][0] * (1 + CLOSE)]
    return min(close, key=lambda name: eligible[name][1])


def _frames_cell(name: str, env: str) -> str:
    """Each tuning seed's frames to threshold (``(cap)``: stopped at the cap; ``—``: not
    run), and their mean once all are in."""
    shown, frames = [], []
    for seed in TUNING_SEEDS:
        outcome = run_dir(name, env, seed) / OUTCOME
        if not outcome.exists():
            shown.append("—")
            continue
        solve = Solve(**json.loads(outcome.read_text()))
        frames.append(solve.frames)
        shown.append(f"{solve.frames / 1000:.0f}k" + ("" if solve.reached else " (cap)"))
    mean = (f" (mean {statistics.mean(frames) / 1000:.0f}k)" if len(frames) == len(TUNING_SEEDS)
            else "")
    return ", ".join(shown) + mean


def report(envs: Sequence[str]) -> str:
    """The results section of ``TUNING.md``: every run, the speeds, the scores on ``envs`` and
    the choice."""
    speed = json.loads(SPEED.read_text()) if SPEED.exists() else None
    fps = speed["fps"] if speed else {env: {} for env in CAPS}
    lines = [RESULTS_HEADING, "", "Frames to threshold per tuning seed (0, 1, 2), frames/s "
             f"(candidates in turn, one process), and the score of rule 2 on {', '.join(envs)}.",
             "",
             "| candidate | " + " | ".join(f"{env} frames | {env} frames/s" for env in CAPS)
             + " | score (s) |", "|---|" + "---|---|" * len(CAPS) + "---:|"]
    scored = scores(fps, envs) if speed else {}
    for name in CANDIDATES:
        cells = [f"{_frames_cell(name, env)} | "
                 + (f"{fps[env][name]:.0f}" if name in fps[env] else "—")  # not measured
                 for env in CAPS]
        score = f"{scored[name][0]:.1f}" if name in scored else "—"
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {score} |")
    runs = [Solve(**json.loads(path.read_text())) for path in RUNS.glob(f"*/*/*/{OUTCOME}")]
    loads = [value for solve in runs for value in (solve.load_before, solve.load_after)]
    lines += ["", f"Load average (1 min) around the runs: {min(loads, default=0):.1f} to "
              f"{max(loads, default=0):.1f}" + (f"; around the speed measurement "
              f"{speed['load_before']:.1f} and {speed['load_after']:.1f}" if speed else "")
              + ".", ""]
    chosen = choose(scored)
    lines.append(f"Chosen: **{chosen}**." if chosen else "No candidate has finished all runs.")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--runs", action="store_true")
    parser.add_argument("--speed", action="store_true")
    parser.add_argument("--speed-updates", type=int, default=10)
    parser.add_argument("--report", action="store_true")
    parser.add_argument("--report-envs", nargs="+", default=list(CAPS),
                        help="the envs the rule is applied to (TUNING.md's interim rule: "
                             "DoorKey-5x5)")
    parser.add_argument("--code", type=Path, default=None,
                        help="a folder whose rlmem the runs train with")
    args = parser.parse_args()
    if args.dry_run or args.runs:
        sweep(args.code, args.dry_run)
    if args.speed:
        measure_speed(args.speed_updates)
    if args.report:
        text = OUTPUT.read_text()
        rule = text.split(RESULTS_HEADING)[0].rstrip()
        OUTPUT.write_text(rule + "\n\n" + report(args.report_envs))


if __name__ == "__main__":
    main()
