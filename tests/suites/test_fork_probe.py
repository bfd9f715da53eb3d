"""experiments.memory.fork_probe: the linear probe finds a planted linear signal and stays at
chance on noise, and per-step features are cut into the episodes they belong to."""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest

from experiments.memory import fork_probe, start_positions


@pytest.fixture(scope="module")
def probe() -> ModuleType:
    return fork_probe


def planted(rng: np.random.Generator, examples: int, signal: float) -> tuple[np.ndarray,
                                                                             np.ndarray]:
    """64 Gaussian features; the label shifts one random direction by ``±signal``."""
    labels = rng.integers(0, 2, examples).astype(np.float64)
    direction = rng.normal(size=64)
    direction /= np.linalg.norm(direction)
    features = rng.normal(size=(examples, 64)) + np.outer(2 * labels - 1, direction) * signal
    return features, labels


def test_probe_recovers_a_planted_signal_and_not_noise(probe: ModuleType) -> None:
    rng = np.random.default_rng(0)
    signal = probe.cross_validated(planted(rng, 200, 3.0))
    noise = probe.cross_validated(planted(rng, 200, 0.0))
    assert signal.total == noise.total == 200
    assert signal.correct / signal.total > 0.9
    # Binomial sd of the accuracy on 200 examples is 3.5%: chance within 4 sd.
    assert abs(noise.correct / noise.total - 0.5) < 0.14
    train, test = planted(rng, 200, 3.0), planted(rng, 100, 3.0)
    assert probe.transfer_score(train, test).total == 100


def test_a_probe_needs_both_cues(probe: ModuleType) -> None:
    with pytest.raises(ValueError, match="both cues"):
        probe.LinearProbe.fit(np.zeros((4, 2)), np.ones(4))
    assert probe.cross_validated((np.zeros((4, 2)), np.array([0.0, 1, 0, 1]))).total == 0


def test_features_are_cut_into_each_envs_episodes(probe: ModuleType) -> None:
    lengths = [[3, 2], [5]]  # env 0 plays two episodes, env 1 one, then both keep playing
    records = [start_positions.EpisodeRecord(1, 3, "key", 0.0, length,
                                             start_positions.Outcome.TIMEOUT, False, False,
                                             None, None, None)
               for env in lengths for length in env]
    calls = 6
    # Feature = 10 * env + step of that env: each episode must get its own env's steps.
    steps = np.array([[[10.0 * env + t] for env in range(2)] for t in range(calls)])
    episodes = probe.split_episodes(steps, records, [2, 1])
    assert [e[:, 0].tolist() for e in episodes] == [[0, 1, 2], [3, 4], [10, 11, 12, 13, 14]]
    with pytest.raises(ValueError, match="quotas"):
        probe.split_episodes(steps, records, [1, 1])
