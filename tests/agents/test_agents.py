"""The agent registry: every agent is one package with a torch-free config that checks itself,
found by the CLIs through the registry, and the values a run derives are recorded."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from rlmem.agents.base import AgentConfig
from rlmem.agents.derived import with_derived_values
from rlmem.agents.registry import AGENTS, get_agent, register_agent
from rlmem.schema.memory import CONF_DIR
from rlmem.schema.train import register_train_configs, resolve


def test_composing_any_agents_config_imports_neither_torch_nor_sb3() -> None:
    code = ("import sys; import rlmem.agents; from rlmem.agents.registry import AGENTS; "
            "assert sorted(AGENTS) == ['ppo', 'sb3'], AGENTS; "
            "print(sorted(m for m in ('torch', 'stable_baselines3', 'sb3_contrib') "
            "if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=120)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_every_agent_is_a_choice_whose_defaults_are_its_dataclass(name: str) -> None:
    register_train_configs()
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        composed = compose("train", overrides=[f"agent={name}"]).agent
    defaults = OmegaConf.structured(AGENTS[name].config())
    assert OmegaConf.to_container(composed) == OmegaConf.to_container(defaults)
    assert callable(AGENTS[name].train) and callable(AGENTS[name].load_actor)


def test_registration_checks_the_config_class() -> None:
    ppo = AGENTS["ppo"]
    with pytest.raises(ValueError, match="already registered"):
        register_agent("ppo", AGENTS["sb3"].config, ppo.train, ppo.load_actor)
    renamed = dataclasses.make_dataclass("Renamed", [], bases=(ppo.config,))
    with pytest.raises(ValueError, match=r"Renamed.name must default to 'renamed', got 'ppo'"):
        register_agent("renamed", renamed, ppo.train, ppo.load_actor)
    with pytest.raises(TypeError, match="must be a dataclass subclassing AgentConfig"):
        register_agent("plain", type("Plain", (), {}), ppo.train, ppo.load_actor)
    assert "renamed" not in AGENTS and "plain" not in AGENTS
    with pytest.raises(KeyError, match="unknown agent 'nope'; valid agents: ppo, sb3"):
        get_agent("nope")
    assert issubclass(get_agent("ppo").config, AgentConfig)


def test_a_recorded_config_decides_nothing_anew() -> None:
    """``mission: null`` is decided once, when a run records its config (MemoryS7's mission
    never varies); reading the recorded config back keeps what was decided. (A run of rlmem
    0.1 that recorded ``mission: null`` is migrated once: ``tests/test_migrate.py``.)"""
    derived = with_derived_values({"env": "MemoryS7", "mission": None})
    assert derived["mission"] is False
    assert with_derived_values(derived) == derived
    assert with_derived_values({"env": "MemoryS7", "mission": True})["mission"] is True


@pytest.mark.parametrize(("env", "mission"), [("GoToDoor-5x5", True), ("MemoryS7", False),
                                              ("CartPole-v1", False)])
def test_a_run_records_whether_it_encodes_the_mission(env: str, mission: bool) -> None:
    register_train_configs()
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose("train", overrides=[f"env={env}"])
    assert cfg.mission is None  # left to be derived from the env
    assert resolve(cfg).recorded()["mission"] is mission
