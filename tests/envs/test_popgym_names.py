"""POPGym's envs by short name (``env=RepeatPreviousEasy``), as MiniGrid's go by theirs."""

from __future__ import annotations

import builtins
import sys
from typing import Any

import gymnasium as gym
import pytest

from rlmem.envs import env_spec, make_env
from rlmem.envs.registry import POPGYM_ENVS, POPGYM_NAMES
from rlmem.envs.trust import UntrustedCodeError, refuse_untrusted_code

popgym = pytest.importorskip("popgym")


def test_the_short_names_are_popgyms_registered_envs() -> None:
    registered = {key for key in gym.registry if key.startswith("popgym-")}
    assert {f"popgym-{name}-v0" for name in POPGYM_NAMES} == registered
    assert len(POPGYM_NAMES) == 42


@pytest.mark.parametrize("name", ["RepeatPreviousEasy", "popgym-RepeatPreviousEasy-v0",
                                  "popgym:popgym-RepeatPreviousEasy-v0"])
def test_every_spelling_is_one_spec_that_names_the_module(name: str) -> None:
    spec = env_spec(name)
    assert spec == POPGYM_ENVS["RepeatPreviousEasy"]
    assert spec.id == "popgym:popgym-RepeatPreviousEasy-v0" and spec.transfer is None


def test_a_short_name_makes_the_env() -> None:
    env = make_env("CountRecallEasy")
    try:
        assert env.spec is not None and env.spec.id == "popgym-CountRecallEasy-v0"
        observation, _ = env.reset(seed=0)
        assert env.observation_space.contains(observation)
    finally:
        env.close()


def test_a_near_miss_is_an_unknown_env() -> None:
    with pytest.raises(KeyError, match=r"unknown env 'RepeatPreviousEasier'.*POPGym"):
        env_spec("RepeatPreviousEasier")


def test_without_popgym_the_message_says_how_to_install_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_popgym(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "popgym" or name.startswith("popgym."):
            raise ModuleNotFoundError("No module named 'popgym'")
        return real_import(name, *args, **kwargs)

    for module in [key for key in sys.modules if key == "popgym" or key.startswith("popgym.")]:
        monkeypatch.delitem(sys.modules, module)
    monkeypatch.setattr(builtins, "__import__", no_popgym)
    with pytest.raises(KeyError, match=r"POPGym env.*pip install 'rlmem\[popgym\]'"):
        env_spec("RepeatPreviousEasy")


def test_a_recorded_popgym_id_needs_no_trust() -> None:
    refuse_untrusted_code({"env": "popgym:popgym-RepeatPreviousEasy-v0"}, source="run",
                          trusted=False)
    with pytest.raises(UntrustedCodeError):
        refuse_untrusted_code({"env": "popgymx:Env-v0"}, source="run", trusted=False)
