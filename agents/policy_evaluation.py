"""Running a trained actor-critic for a fixed number of episodes and summarising them."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any, Protocol, TypeVar

import numpy as np
from gymnasium.vector import VectorEnv
from tqdm import tqdm

from rlmem.agents.env_output import EnvOutputCheck, env_name
from rlmem.agents.episodes import EpisodeTracker
from rlmem.envs import Observation

State = TypeVar("State")
"""An actor's memory of a batch of envs; evaluation only hands it back to the actor."""


@dataclass
class EvaluationResult:
    """Summary of evaluation episodes."""

    return_mean: float
    """Mean episode return."""
    return_std: float
    """Standard deviation of the episode returns."""
    success_rate: float | None
    """Fraction of episodes with a positive return: MiniGrid rewards only success. ``None``
    where a positive return does not mean success (:meth:`without_success`, any other env)."""
    length_mean: float
    """Mean episode length in steps."""
    episodes: int
    """Number of episodes."""
    interrupted: bool = False
    """Ctrl-C stopped the evaluation: these are the episodes finished before it (a sample
    biased toward short episodes), fewer than were asked for."""

    def as_dict(self) -> dict[str, float | int]:
        """The fields as a plain dict (for JSON)."""
        return asdict(self)

    def without_success(self) -> EvaluationResult:
        """The same result for an env whose rewards do not mark success (CartPole's return is
        positive in every episode)."""
        return replace(self, success_rate=None)

    def summary(self) -> str:
        """One line for the terminal."""
        success = ("" if self.success_rate is None
                   else f", success {self.success_rate:.1%}")
        stopped = " (interrupted)" if self.interrupted else ""
        return (f"return {self.return_mean:.3f} ± {self.return_std:.3f} (mean ± standard "
                f"deviation over episodes){success}, length {self.length_mean:.1f}, "
                f"{self.episodes} episodes{stopped}")


def weights_changed(eval_memory: dict[str, Any], problems: list[str]) -> ValueError:
    """The error of an evaluation whose ``eval_memory`` makes a model that the run's weights
    do not fit (``problems``: how, :func:`rlmem.runs.restore.state_mismatches`)."""
    return ValueError(f"eval_memory={eval_memory} changes the cell's weights ("
                      f"{'; '.join(problems)}); only weight-free hyperparameters (such as "
                      "MemLSTM's capacity) may differ. Nothing was evaluated; drop the keys "
                      "that change the weights.")


def episode_quotas(episodes: int, num_envs: int, first: int = 0) -> list[int]:
    """Episodes each env contributes: as even as possible, env 0 at least ``first``.

    A fixed quota per env keeps the sample unbiased: taking the first ``episodes`` episodes to
    finish overall would over-represent short ones.
    """
    quotas = [0] * num_envs
    quotas[0] = min(episodes, max(first, -(-episodes // num_envs)))
    rest = episodes - quotas[0]
    for index in range(1, num_envs):
        share = rest // (num_envs - index) + (rest % (num_envs - index) > 0)
        quotas[index] = share
        rest -= share
    return quotas


class Actor(Protocol[State]):
    """What evaluation needs of a trained agent, whichever trainer made it."""

    def initial_state(self, num_envs: int) -> State:
        """The memory of ``num_envs`` envs before their first step."""

    def act(self, observation: Observation, state: State, resets: np.ndarray,
            greedy: bool) -> tuple[np.ndarray, State]:
        """Actions for a batch of observations (a vector env's: a dict of arrays for a Dict
        space, else an array), and the memory after them; ``resets[b]`` says that
        ``observation[b]`` starts an episode (its memory is re-initialised first)."""


def evaluate_policy(actor: Actor[State], envs: VectorEnv, episodes: int, *, greedy: bool, seed: int,
                    quotas: list[int] | None = None, name: str | None = None,
                    progress: bool = False, first_to_end: bool = False
                    ) -> tuple[EvaluationResult, list[float]]:
    """Play ``episodes`` episodes with ``actor`` in ``envs`` (``SAME_STEP`` autoreset).

    Each env's memory is re-initialised exactly when that env starts an episode. What the envs
    return is checked before the actor sees it (:class:`~rlmem.agents.env_output.EnvOutputCheck`).
    Ctrl-C (a :class:`KeyboardInterrupt`) after the first finished episode ends the evaluation
    with the episodes finished so far, marked :attr:`EvaluationResult.interrupted`, so that a
    long evaluation keeps what it did.

    Args:
        actor: the trained agent.
        envs: the vector env.
        episodes: total episodes.
        greedy: take the most likely action instead of sampling.
        seed: seeds the envs' first reset.
        quotas: episodes per env (default :func:`episode_quotas`).
        name: the env, for the messages (default: its gymnasium id).
        progress: show a progress bar over the episodes, with their mean return.
        first_to_end: count episodes as they end over all envs until ``episodes`` have (with
            every episode that ends at that step), as rl-starter-files' ``evaluate.py``
            counts them, instead of by ``quotas``: a sample biased toward short episodes.

    Returns:
        the summary, and the per-episode returns.

    Raises:
        EnvOutputError: an env returned a non-finite observation or reward, or an observation
            that does not fit its space; the message names the env and the step.
        KeyboardInterrupt: Ctrl-C before any episode finished.
    """
    quotas = quotas if quotas is not None else episode_quotas(episodes, envs.num_envs)
    if first_to_end:
        quotas = [episodes] * envs.num_envs
    check = EnvOutputCheck(name or env_name(envs), envs.single_observation_space, envs.num_envs,
                           "Nothing was evaluated or written.")
    returns: list[float] = []
    lengths: list[int] = []
    interrupted = False
    bar = tqdm(total=episodes, unit="episode", disable=not progress, dynamic_ncols=True,
               desc=name)
    try:
        _play(actor, envs, check, seed=seed, quotas=quotas, greedy=greedy, bar=bar,
              returns=returns, lengths=lengths, until=episodes if first_to_end else None)
    except KeyboardInterrupt:
        if not returns:
            raise
        interrupted = True
    finally:
        bar.close()
    values = np.asarray(returns)
    result = EvaluationResult(float(values.mean()), float(values.std()),
                              float((values > 0).mean()), float(np.mean(lengths)), len(values),
                              interrupted=interrupted)
    return result, returns


def _play(actor: Actor[State], envs: VectorEnv, check: EnvOutputCheck, *, seed: int,
          quotas: list[int], greedy: bool, bar: tqdm[Any], returns: list[float],
          lengths: list[int], until: int | None = None) -> None:
    """Step ``envs`` with ``actor`` until each env has finished its quota of episodes (or,
    with ``until``, until that many have ended over all envs), appending each counted
    episode's return and length to ``returns`` and ``lengths`` as it ends (so an evaluation
    stopped by Ctrl-C keeps the episodes it finished)."""
    num_envs = envs.num_envs
    observation = check.reset(envs, seed, "the first reset of the evaluation")
    state = actor.initial_state(num_envs)
    resets = np.ones(num_envs, dtype=bool)
    tracker = EpisodeTracker(num_envs)
    counts = np.zeros(num_envs, dtype=np.int64)
    step = 0
    while (counts < quotas).any() and (until is None or len(returns) < until):
        action, state = actor.act(observation, state, resets, greedy)
        step += 1
        observation, reward, terminated, truncated, _ = check.step(
            envs, action, f"step {step} of the evaluation (frame {step * num_envs})")
        resets = terminated | truncated
        for episode in tracker.step(reward, resets):
            if counts[episode.env] < quotas[episode.env]:
                returns.append(episode.episode_return)
                lengths.append(episode.length)
                counts[episode.env] += 1
                bar.update(1)
                bar.set_postfix(ret=f"{np.mean(returns):.3f}")
