"""(c) The encoder sees identical tensors from both backends: POPGym's envs as rlmem's runs wrap
them (the POPGym suite's wrappers, and with the previous action beside the observation) and the
tensor envs wrapped by the tensor versions of the same wrappers give the same spaces, and, step
for step from the same state, observations equal field by field in dtype, shape and value
(:func:`tensor_popgym_check.lockstep` through rlmem's gymnasium vector env), so the tensors
``observation_to_tensors`` makes of them, and the encoders' features, are identical."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import pytest
import torch
from tensor_popgym_check import PHYSICS, Tolerance, lockstep

from experiments.popgym.suite import ENV_OVERRIDES
from rlmem.agents.ppo.observation import field_encoder, observation_to_tensors
from rlmem.envs import make_vector_env
from rlmem.envs.tensor.popgym import POPGYM_TENSOR_ENVS
from rlmem.envs.tensor.popgym.wrappers import apply_tensor_wrappers

pytest.importorskip("popgym")

PREVIOUS_ACTION = "rlmem.envs.previous_action:PreviousAction"
NAMES = sorted(POPGYM_TENSOR_ENVS)


def suite_wrappers(name: str) -> tuple[str, ...]:
    """The wrappers the POPGym suite gives env ``name`` (its Easy level's overrides)."""
    family = name.removesuffix("Easy").removesuffix("Medium").removesuffix("Hard")
    overrides = ENV_OVERRIDES.get(f"{family}Easy", ())
    prefix = "wrappers=["
    return tuple(item for override in overrides if override.startswith(prefix)
                 for item in override[len(prefix):-1].split(","))


def tensor_maker(name: str, wrappers: tuple[str, ...]) -> Any:
    family = POPGYM_TENSOR_ENVS[name].family

    def make(envs: list[gym.Env[Any, Any]]) -> Any:
        return apply_tensor_wrappers(family.from_reference(envs), wrappers)
    return make


@pytest.mark.parametrize(("name", "previous_action"),
                         [*((name, True) for name in NAMES), ("AutoencodeEasy", False)])
def test_the_wrapped_envs_observe_alike(name: str, previous_action: bool) -> None:
    """Every env with the suite's wrappers and the previous action; Autoencode, the one env
    the suite wraps, with the suite's wrappers alone too (the others are unwrapped there:
    ``test_tensor_popgym_equality.py``)."""
    wrappers = suite_wrappers(name) + ((PREVIOUS_ACTION,) if previous_action else ())
    tolerance = PHYSICS if name.startswith("PositionOnly") else Tolerance()
    assert lockstep(name, tensor_maker(name, wrappers), num_envs=4, steps=100,
                    wrappers=wrappers, tolerance=tolerance) >= 0


@pytest.mark.parametrize("name", [name for name in NAMES if name.endswith("Easy")])
def test_the_encoder_sees_identical_tensors(name: str) -> None:
    """The suite's env, with the previous action: the same spaces, the same tensors, the same
    features from the encoder of each field."""
    wrappers = (*suite_wrappers(name), PREVIOUS_ACTION)
    reference = make_vector_env(name, 4, wrappers=wrappers)
    try:
        observation, _ = reference.reset(seed=3)
        tensor = tensor_maker(name, wrappers)(list(reference.envs))  # type: ignore[attr-defined]
        assert tensor.single_observation_space == reference.single_observation_space
        assert tensor.single_action_space == reference.single_action_space
        want = observation_to_tensors(observation, torch.device("cpu"))
        got = tensor.observe()
        assert want.keys() == got.keys()
        torch.manual_seed(0)
        for key, space in reference.single_observation_space.items():  # type: ignore[attr-defined]
            assert want[key].dtype == got[key].dtype and torch.equal(want[key], got[key]), key
            encoder = field_encoder(space)
            assert torch.equal(encoder(want[key]), encoder(got[key])), key
    finally:
        reference.close()
