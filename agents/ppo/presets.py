"""Our PPO's presets: the values of the keys that MiniGrid and other envs want different, and
which one a run takes.

rl-starter-files' MiniGrid recipe, our PPO's defaults since rlmem 0.1, learns worse than
sb3-contrib's RecurrentPPO on a POMDP it was not tuned for (issue 30: POPGym's
RepeatPreviousEasy). So the keys below are left null in :class:`~rlmem.agents.ppo.PPOConfig`
and decided when the run's config is built, from a preset chosen by the env's family
(:func:`rlmem.envs.family.env_family`) unless ``agent.preset`` names one; a key the user sets
(``agent.recurrence=32``) keeps its value. The run records the preset and every value it
decided (``config.yaml``, the checkpoint), so resuming and evaluating use what the run
recorded, whatever the presets are later (:func:`decide_presets`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any


class Preset(Enum):
    """The presets ``agent.preset`` names."""

    minigrid = "minigrid"
    """rl-starter-files' MiniGrid recipe: the values of every run before presets existed."""
    generic = "generic"
    """Measured on POPGym's Easy envs against sb3-contrib's RecurrentPPO (issue 30)."""
    fast = "fast"
    """The MiniGrid recipe's learning values and gradient steps per frame, acting in many envs
    with short rollouts (issue 59; chosen by wall-clock time to a return threshold on
    DoorKey-5x5 and MemoryS7, ``experiments/fast_trainer/TUNING.md``: the only candidate that
    learnt MemoryS7 on every tuning seed). Never chosen by an env's family: a run asks for it
    (``agent.preset=fast``). Against the minigrid preset it solved 1.2-1.6x sooner, but failed
    the learning rule for MiniGrid's default (lstm ended DoorKey-5x5 lower on seeds 3-17,
    ``experiments/fast_trainer/FAST_DEFAULT.md``)."""


@dataclass(frozen=True)
class PresetValues:
    """The values a preset gives the keys left null (each documented on
    :class:`~rlmem.agents.ppo.PPOConfig`), the memory's size where ``memory.hidden_size``
    is null (:data:`MEMORY_SIZE_KEY`) and the envs where ``num_envs`` is null
    (:data:`NUM_ENVS_KEY`).

    Raises:
        ValueError: the preset's rollout of ``num_envs × frames_per_env`` frames cannot be cut
            into chunks of ``recurrence`` steps and whole minibatches of ``batch_size``.
    """

    normalize_advantage: bool
    shared_memory: bool
    recurrence: int
    reward_scale: float
    entropy_coef: float
    frames_per_env: int
    epochs: int
    batch_size: int
    memory_size: int
    num_envs: int

    def __post_init__(self) -> None:
        rollout = self.num_envs * self.frames_per_env
        for name, value, divisor in (("frames_per_env", self.frames_per_env, self.recurrence),
                                     ("batch_size", self.batch_size, self.recurrence),
                                     ("num_envs × frames_per_env", rollout, self.batch_size)):
            if value <= 0 or value % divisor:
                raise ValueError(f"a preset's {name}={value} must be a positive multiple of "
                                 f"{divisor}: its rollout of {self.num_envs} envs × "
                                 f"{self.frames_per_env} frames, cut into chunks of "
                                 f"{self.recurrence} steps, must fill minibatches of "
                                 f"{self.batch_size} frames")


_SHAPE = {"num_envs": 16, "frames_per_env": 128, "epochs": 4, "batch_size": 256}
"""The work's shape of the minigrid and generic presets: rl-starter-files' (and rlmem's before
the presets decided it)."""

PRESETS: dict[Preset, PresetValues] = {
    Preset.minigrid: PresetValues(normalize_advantage=False, shared_memory=True, recurrence=16,
                                  reward_scale=1.0, entropy_coef=0.01, memory_size=64,
                                  **_SHAPE),
    Preset.generic: PresetValues(normalize_advantage=True, shared_memory=False, recurrence=64,
                                 reward_scale=1.0, entropy_coef=0.0, memory_size=256,
                                 **_SHAPE),
    Preset.fast: PresetValues(normalize_advantage=False, shared_memory=True, recurrence=16,
                              reward_scale=1.0, entropy_coef=0.01, memory_size=64,
                              num_envs=256, frames_per_env=16, epochs=4, batch_size=256),
}
"""Each preset's values; the MiniGrid one is rl-starter-files' recipe, unchanged, so MiniGrid
runs are what they were (their memory of 64 is :data:`rlmem.cells.registry.DEFAULT_HIDDEN_SIZE`,
written out here because composing a config must not import torch; a test holds them equal).
See :class:`~rlmem.agents.ppo.PPOConfig` for why each value; the generic memory size is
sb3-contrib's LSTM's, and the generic entropy coefficient sb3-contrib's (no bonus), both chosen
by ``python -m experiments.popgym.tune`` (``experiments/popgym/TUNING.md``). The fast preset's
envs, rollout, epochs and minibatch were chosen by ``python -m experiments.fast_trainer.tune``
(``experiments/fast_trainer/TUNING.md``), its other values are minigrid's."""

MEMORY_SIZE_KEY = "memory_size"
"""The field of :class:`PresetValues` that sizes the memory (``memory.hidden_size``, decided
by :func:`rlmem.agents.derived.with_derived_values`), not a key of the agent section."""

NUM_ENVS_KEY = "num_envs"
"""The field of :class:`PresetValues` that gives the run's ``num_envs`` where it is null
(decided by :func:`rlmem.agents.derived.with_derived_values`), not a key of the agent
section."""


def family_preset(env: str) -> Preset:
    """The preset a run on ``env`` takes where ``agent.preset`` is null: minigrid for MiniGrid
    (and BabyAI) envs, generic for every other (:func:`rlmem.envs.family.env_family`).

    Raises:
        KeyError: ``env`` is no env.
    """
    # Here, not at the top: rlmem.envs imports torch, which composing a config must not.
    from rlmem.envs.family import EnvFamily, env_family

    return {EnvFamily.minigrid: Preset.minigrid, EnvFamily.other: Preset.generic}[
        env_family(env)]

PRESET_KEYS: tuple[str, ...] = tuple(field.name for field in dataclasses.fields(PresetValues)
                                     if field.name not in (MEMORY_SIZE_KEY, NUM_ENVS_KEY))
"""The agent's keys that a preset decides where they are null."""


def agent_values(preset: Preset) -> dict[str, Any]:
    """The agent keys' values of ``preset`` (:data:`PRESET_KEYS`; not its memory size nor its
    envs), e.g.
    ``PPOConfig(**agent_values(Preset.minigrid))`` for a trainer built without a run config."""
    values = PRESETS[preset]
    return {key: getattr(values, key) for key in PRESET_KEYS}


def decide_presets(agent: Mapping[str, Any], env: str,
                   recorded: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The ``agent`` section of a run's config with ``preset`` and every key of
    :data:`PRESET_KEYS` decided.

    A null ``preset`` becomes the env's family's (:func:`family_preset`); a null key of
    :data:`PRESET_KEYS` takes the value ``recorded`` (the agent section of the checkpoint this
    run resumes) decided, where it decided the same preset, else the preset's value. A key set
    to a value keeps it. A recorded config has every key decided, so deciding it again changes
    nothing: resuming and evaluating a run use its recorded values, not today's presets.

    Args:
        agent: the agent section, as composed (enum members as their names).
        env: the run's env (its family picks the preset).
        recorded: the agent section of the checkpoint this run resumes, if any.

    Raises:
        KeyError: ``env`` is no env, or ``preset`` names no preset.
    """
    decided = dict(agent)
    chosen = decided.get("preset")
    preset = family_preset(env) if chosen is None else Preset[str(chosen)]
    decided["preset"] = preset.name
    earlier = (recorded if recorded is not None and recorded.get("name") == agent.get("name")
               and recorded.get("preset") == preset.name else {})
    values = agent_values(preset)
    for key in PRESET_KEYS:
        if decided.get(key) is None:
            decided[key] = earlier[key] if earlier.get(key) is not None else values[key]
    return decided


def before_presets(agent: dict[str, Any]) -> None:
    """Migrate the agent section of a run from before presets (checkpoint format 3): its
    values were rl-starter-files' (:attr:`Preset.minigrid`), the critic read the actor's memory
    and rewards were not scaled. Its ``normalize_advantage`` and ``recurrence`` were recorded
    since format 3 and its ``entropy_coef`` always (an older config that lacks them had
    rl-starter-files' values too). Written out, not read from :data:`PRESETS`: this is what
    those runs did, whatever the presets become."""
    agent.setdefault("preset", Preset.minigrid.name)
    agent.setdefault("normalize_advantage", False)
    agent.setdefault("shared_memory", True)
    agent.setdefault("recurrence", 16)
    agent.setdefault("reward_scale", 1.0)
    agent.setdefault("entropy_coef", 0.01)
