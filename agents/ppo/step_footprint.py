"""What one step of a large run holds at once besides its rollout, measured before the run
starts (issue 59's "``num_envs`` beyond memory").

:func:`~rlmem.agents.ppo.rollout_footprint.check_rollout_fits` bounds the rollout alone. At
millions of envs one rollout step's own tensors are gigabytes too: with ``agent.preset=fast
num_envs=3000000`` the grid encoder's table rows are 3.3 GiB of int64, and the op that offsets
them holds that twice, so that run passed the rollout's bound and failed in its first step.
Every such tensor grows with the envs. So, for a run whose rollout takes a sizeable share of
the memory (:data:`MEASURED_SHARE`), the run's own envs and model are made at two small numbers
of envs (:data:`PROBE_ENVS`) and take one rollout step each under :class:`OpBytes`, which
records what each op holds at once (the storages of its tensors, each once: its inputs and its
outputs). An op's bytes are an affine function of the envs; the largest op's at ``num_envs``
is a lower bound on the step's peak, and the step at the end of a rollout runs beside the whole
rollout. Their sum is the bound :func:`check_step_fits` holds the memory to: a run it refuses
could not have run; one it lets through may still fail, later, where what it leaves out (the
envs' other state, the update's activations) does not fit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, NamedTuple

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from rlmem.agents.ppo.rollout_footprint import device_memory, rollout_bytes
from rlmem.agents.ppo.run_pieces import collector_of, make_envs, make_model
from rlmem.agents.run_config import RunConfig
from rlmem.cells.footprint import readable_bytes

PROBE_ENVS = (64, 128)
"""The numbers of envs whose steps are measured."""
MEASURED_SHARE = 16
"""A run is measured where its rollout's bound passes ``1 / MEASURED_SHARE`` of the memory
(about 1.5 GiB of this project's 23.5): smaller runs start without the probe's second or so."""


class OpBytes(TorchDispatchMode):
    """While on, records each op (by name) and the bytes of the distinct storages of its tensor
    arguments and outputs: what the op holds at once."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[tuple[str, int]] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Sequence[Any] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        out = func(*args, **(kwargs or {}))
        storages = {}
        for value in tree_leaves((args, kwargs, out)):
            if isinstance(value, torch.Tensor):
                storage = value.untyped_storage()
                storages[storage.data_ptr()] = storage.nbytes()
        self.ops.append((str(func), sum(storages.values())))
        return out


class StepBound(NamedTuple):
    """The largest op of a rollout step at some number of envs: its name and its bytes."""

    op: str
    bytes: int


def step_ops(config: RunConfig[Any], device: torch.device, num_envs: int) -> list[tuple[str, int]]:
    """Every op of one rollout step of ``num_envs`` of ``config``'s envs (the model acting and
    the envs stepping, as the run's collector does) with its bytes (:class:`OpBytes`). The
    global random state is left as it was."""
    probe = dataclasses.replace(config, num_envs=num_envs)
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        envs = make_envs(probe, device)
        try:
            collector = collector_of(probe)(envs, make_model(probe, envs, device), device,
                                            seed=0, name=config.env)
            with OpBytes() as measured:
                collector.collect(1, 1)
        finally:
            envs.close()
    return measured.ops


def step_bound(config: RunConfig[Any], device: torch.device) -> StepBound | None:
    """The largest op of a rollout step of ``config.num_envs`` envs, each op's bytes taken as
    affine in the envs through its bytes at :data:`PROBE_ENVS`; None where the two probes'
    ops differ (a step whose ops depend on its draws: nothing is claimed)."""
    small, large = (step_ops(config, device, envs) for envs in PROBE_ENVS)
    if [name for name, _ in small] != [name for name, _ in large]:
        return None
    fewer, more = PROBE_ENVS
    bounds = [StepBound(name, low + (high - low) * (config.num_envs - fewer) // (more - fewer))
              for (name, low), (_, high) in zip(small, large, strict=True)]
    return max(bounds, key=lambda bound: bound.bytes)


def check_step_fits(config: RunConfig[Any], observation_space: Any, frames_per_env: int,
                    device: torch.device) -> None:
    """Refuse a run (its rollouts of ``frames_per_env`` frames an env, as decided) whose
    rollout and one step's largest op (the module docstring) exceed ``device``'s memory;
    measured only where the rollout takes more than ``1 / MEASURED_SHARE`` of it.

    Raises:
        ValueError: naming ``num_envs``, both bounds, the op and the memory there is.
    """
    available = device_memory(device)
    rollout = rollout_bytes(observation_space, config.num_envs, frames_per_env)
    if available is None or rollout * MEASURED_SHARE <= available:
        return
    step = step_bound(config, device)
    if step is None or rollout + step.bytes <= available:
        return
    where = "this machine's memory" if device.type == "cpu" else f"the free memory of {device}"
    raise ValueError(
        f"num_envs={config.num_envs} × agent.frames_per_env={frames_per_env}: the rollout "
        f"holds at least {readable_bytes(rollout)}, and one step of the envs and the model "
        f"at least {readable_bytes(step.bytes)} more beside it ({step.op}, measured at "
        f"{' and '.join(map(str, PROBE_ENVS))} envs), together more than {where}, "
        f"{readable_bytes(available)}. Nothing was started; choose fewer num_envs.")
