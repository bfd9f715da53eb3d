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


@dataclass(frozen=True)
class PresetValues:
    """The values a preset gives the keys left null (each documented on
    :class:`~rlmem.agents.ppo.PPOConfig`), and the memory's size where ``memory.hidden_size``
    is null (:data:`MEMORY_SIZE_KEY`)."""

    normalize_advantage: bool
    shared_memory: bool
    recurrence: int
    reward_scale: float
    entropy_coef: float
    memory_size: int


PRESETS: dict[Preset, PresetValues] = {
    Preset.minigrid: PresetValues(normalize_advantage=False, shared_memory=True, recurrence=16,
                                  reward_scale=1.0, entropy_coef=0.01, memory_size=64),
    Preset.generic: PresetValues(normalize_advantage=True, shared_memory=False, recurrence=64,
                                 reward_scale=1.0, entropy_coef=0.0, memory_size=256),
}
"""Each preset's values; the MiniGrid one is rl-starter-files' recipe, unchanged, so MiniGrid
runs are what they were (their memory of 64 is :data:`rlmem.cells.registry.DEFAULT_HIDDEN_SIZE`,
written out here because composing a config must not import torch; a test holds them equal).
See :class:`~rlmem.agents.ppo.PPOConfig` for why each value; the generic memory size is
sb3-contrib's LSTM's, and the generic entropy coefficient sb3-contrib's (no bonus), both chosen
by ``python -m experiments.popgym.tune`` (``experiments/popgym/TUNING.md``)."""

MEMORY_SIZE_KEY = "memory_size"
"""The field of :class:`PresetValues` that sizes the memory (``memory.hidden_size``, decided
by :func:`rlmem.agents.derived.with_derived_values`), not a key of the agent section."""


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
                                     if field.name != MEMORY_SIZE_KEY)
"""The agent's keys that a preset decides where they are null."""


def agent_values(preset: Preset) -> dict[str, Any]:
    """The agent keys' values of ``preset`` (:data:`PRESET_KEYS`; not its memory size), e.g.
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
