"""POPGym's measure: a run's maximum mean episodic reward (MMER), read from its ``progress.csv``.

The POPGym paper (Morad et al., 2023, ICLR) scores a trial by the *maximum mean episodic reward*:
the mean episodic reward of the training episodes at each reporting interval, maximised over
training. Its envs scale their rewards so that an episode's return lies in [-1, 1], so the MMERs
of different envs can be compared and averaged as they are: nothing is normalised here.

How this module computes it, for our runs and sb3-contrib's alike (both write our
``progress.csv``, one row per PPO update):

- the reporting points are the updates (``num_envs × frames_per_env`` frames apart: 2048 with
  our defaults);
- the mean episodic reward at a point is ``return_recent``, the mean return of the last
  :data:`~rlmem.runs.episode_stats.RECENT_EPISODES` (100) training episodes to end (sampled
  actions, as in training), a window that runs across updates;
- a point counts once :data:`MIN_EPISODES` (100) episodes have ended since the run began, so
  that every counted mean is over 100 episodes (a first update's handful of long episodes would
  otherwise count alone);
- the run's MMER is the largest counted mean; a run with no counted point has none.

Where it differs from the paper's: POPGym's baselines (``popgym/baselines/ppo.py``) train with
RLlib's PPO, whose mean episodic reward (``episode_reward_mean``) is reported once per training
iteration, a train batch of 65,536 frames there (1024 × 4 workers × 16 envs), over the episodes
of that iteration, topped up with earlier ones to at least 100 but never cut to 100 (RLlib's
``reporting(metrics_num_episodes_for_smoothing=100)``): often over far more than 100 episodes on
short-episode envs. The paper's trials run 15M frames. Our points are 32 times denser, each
over exactly 100 episodes, and our runs about 90 times shorter. A maximum over more, noisier
points is biased upward, most where a policy's return varies a lot from episode to episode
(HigherLower, CountRecall): compare MMERs within this suite, and with the paper's only
roughly. (The paper's own wording of the definition could not be read offline where this was
written; the computation above follows its name and POPGym's RLlib reporting.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from rlmem.runs.episode_stats import RECENT_EPISODES
from rlmem.runs.progress import read_progress

MIN_EPISODES = RECENT_EPISODES
"""A reporting point counts once this many episodes have ended: its window is then full."""


@dataclass(frozen=True)
class Curve:
    """A run's reporting points: frames, episodes ended so far, and the 100-episode mean."""

    frames: list[float]
    episodes: list[float]
    means: list[float]

    @property
    def final_frames(self) -> float | None:
        """The frames of its last update (None before the first)."""
        return self.frames[-1] if self.frames else None

    def counted(self) -> list[float]:
        """The means at the counted points, in the order of the updates."""
        return [mean for episodes, mean in zip(self.episodes, self.means, strict=True)
                if episodes >= MIN_EPISODES and math.isfinite(mean)]

    def mmer(self) -> float | None:
        """The maximum of the means at the counted points (None: no point counts)."""
        counted = self.counted()
        return max(counted) if counted else None


def read_curve(run_dir: Path) -> Curve:
    """The reporting points of ``run_dir``'s ``progress.csv`` (none without the file).

    Raises:
        CorruptProgressError: a row is not rlmem's; the message names the file and the line.
    """
    path = run_dir / "progress.csv"
    frames: list[float] = []
    episodes: list[float] = []
    means: list[float] = []
    ended = 0.0
    for row in read_progress(path) if path.exists() else []:
        ended += row.number("episodes", 0.0)
        mean = row.finite("return_recent")
        frames.append(row.number("frames"))
        episodes.append(ended)
        means.append(float("nan") if mean is None else mean)
    return Curve(frames, episodes, means)


def mmer(run_dir: Path) -> float | None:
    """The MMER of the run in ``run_dir`` (None: no counted point, or no run)."""
    return read_curve(run_dir).mmer()
