"""What every RL trainer's run shares: the rules of resuming, the checkpoint a run resumes,
the envs' options and seeds, and the notice of frames rounded up to whole updates.

``python -m rlmem.train`` resolves the run's config once
(:func:`rlmem.schema.train.resolve`), opens the run with :data:`RULES`
(:func:`rlmem.runs.open_run`) and hands both to the agent's trainer
(:data:`rlmem.agents.base.Trainer`), which writes only its loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from rlmem.agents.derived import with_derived_values
from rlmem.agents.run_config import RunConfig
from rlmem.envs import TRUST_KEY, EnvOptions, env_spec, parse_wrappers, refuse_untrusted_code
from rlmem.envs.trust import named_imports
from rlmem.runs import ResumeRules, checkpoint_to_resume, load_checkpoint
from rlmem.runs.errors import RunError

RESUME_SECTIONS = ("env", "env_kwargs", "wrappers", "memory", "agent", "num_envs",
                   "env_backend", "mission", "direction", "grid_encoding", "discrete_encoding",
                   "seed", "flush_denormal")
"""Keys that must match a checkpoint to resume from it (``frames`` may grow). ``transfer_env``
is not one: it only names where the run is evaluated."""

def refuse_recorded_code(saved: Mapping[str, Any], current: Mapping[str, Any],
                         source: str) -> None:
    """Refuse a checkpoint's config that names code to import, unless this run trusts it
    (``trust_run_config=true``) or names the same code itself (a run resuming its own
    ``env=my_module:MyEnv``): :func:`rlmem.envs.refuse_untrusted_code`."""
    given = {target for _, target in named_imports(current)}
    refuse_untrusted_code(saved, source=source, trusted=bool(current.get(TRUST_KEY)),
                          given=given)


RULES = ResumeRules(sections=RESUME_SECTIONS, counter="frames", budget="frames",
                    same={"env": lambda name: env_spec(name).id}, recorded=with_derived_values,
                    refuse_code=refuse_recorded_code)
"""A run resumes a checkpoint of the same config; ``frames`` may grow, an env may be named by
its short name or its gymnasium id, and a checkpoint that left a value undecided (an older
run's ``mission: null``) is compared with what it decides to. Code that the checkpoint's config
names is imported only when trusted."""


ROUNDING_NOTICE = 0.01
"""A run trains whole updates: when rounding ``frames`` up to them adds more than this share of
``frames``, the run says so (:func:`rounding_notice`); below it (the default 300,000 frames are
301,056 in updates of 2,048) the difference does not matter and nothing is said."""


def frames_to_train(frames: int, frames_per_update: int) -> int:
    """The frames a run asked for ``frames`` trains: whole updates of ``frames_per_update``,
    rounded up (the loop updates while fewer than ``frames`` are trained)."""
    return -(-frames // frames_per_update) * frames_per_update


def rounding_notice(frames: int, frames_per_update: int, update: str) -> str | None:
    """What to tell a user whose ``frames`` is not a whole number of updates of
    ``frames_per_update`` frames (``update`` spells how they are made), where the rounding up
    matters (:data:`ROUNDING_NOTICE`); None where it does not."""
    trained = frames_to_train(frames, frames_per_update)
    if trained - frames <= ROUNDING_NOTICE * frames:
        return None
    return (f"frames={frames} is not a whole number of updates of {update}: training "
            f"{trained} frames ({_count(trained // frames_per_update, 'update')}).")


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def env_seed(seed: int, updates: int, replica: int = 0) -> int:
    """The seed of the envs' first reset when (re)starting after ``updates`` updates; distinct
    runs' seeds do not overlap across their envs as ``seed + env index`` would. A replica of a
    data-parallel run other than the first (``agent.processes``) seeds its envs, and its
    torch generator, apart."""
    entropy = [seed, updates] if replica == 0 else [seed, updates, replica]
    return int(np.random.SeedSequence(entropy).generate_state(1)[0])


def env_options(config: RunConfig[Any]) -> EnvOptions:
    """How the run's envs (and its transfer env) are made: its decided ``mission``, its
    ``direction``, ``wrappers`` and ``env_kwargs``."""
    return EnvOptions(mission=config.mission, direction=config.direction,
                      wrappers=parse_wrappers(config.wrappers), kwargs=config.env_kwargs)


def resumed_config(run_dir: Path) -> dict[str, Any] | None:
    """The config recorded by the checkpoint a run in ``run_dir`` would resume, or None where
    there is none to read (:func:`~rlmem.runs.open_run` then says why, under the run's lock).

    Read before the run is opened so that what the command leaves to be decided (our PPO's
    presets) is decided as the run decided it, not by today's defaults
    (:func:`~rlmem.agents.derived.with_derived_values`). Only values are read (the
    checkpoint loads with ``weights_only=True``); nothing it names is imported, and
    :func:`~rlmem.runs.open_run` compares it in full under the lock."""
    path = checkpoint_to_resume(run_dir)
    if path is None:
        return None
    try:
        return dict(load_checkpoint(path).config)
    except RunError:
        return None
