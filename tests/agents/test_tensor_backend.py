"""``env_backend``: our PPO and sb3 train on the tensor envs through the real CLI, the run
records its backend and resumes with it (old runs as gymnasium), an env without a tensor
version is refused before any folder is made, and the encoder sees identical inputs from both
backends over a rollout from the same state."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from cli_runner import TINY_PPO, run_cli
from omegaconf import OmegaConf
from torch import Tensor

from rlmem.agents.derived import with_derived_values
from rlmem.agents.ppo.collector import RolloutCollector
from rlmem.agents.ppo.model import ActorCritic
from rlmem.agents.ppo.rollout import Rollout, select_state
from rlmem.agents.ppo.tensor_collector import TensorRolloutCollector
from rlmem.cells import State
from rlmem.envs import make_vector_env, resolve_backend, uses_mission
from rlmem.envs.tensor.minigrid import DoorKey, GoToDoor, Memory, MiniGridTensorEnv
from rlmem.runs import load_checkpoint


@pytest.mark.parametrize("env", ["DoorKey-5x5", "MemoryS7", "RepeatPreviousEasy"])
def test_ppo_trains_on_the_tensor_backend(env: str, tmp_path: Path) -> None:
    """Two updates through ``python -m rlmem.train``; the run records ``env_backend: tensor``
    and resumes with it."""
    if env.startswith("Repeat"):
        pytest.importorskip("popgym")
    run_dir = tmp_path / "run"
    args = (f"env={env}", "memory=lstm", "env_backend=tensor", f"run_dir={run_dir}")
    result = run_cli("rlmem.train", *args, *TINY_PPO, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert OmegaConf.load(run_dir / "config.yaml").env_backend == "tensor"
    more = [arg.replace("frames=64", "frames=96") for arg in TINY_PPO]
    result = run_cli("rlmem.train", *args, *more, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    checkpoint = load_checkpoint(run_dir / "checkpoint.pt")
    assert checkpoint.count("frames") == 96 and checkpoint.config["env_backend"] == "tensor"


def test_an_env_without_a_tensor_version_is_refused_before_any_folder(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    result = run_cli("rlmem.train", "env=CartPole-v1", "memory=lstm", "env_backend=tensor",
                     f"run_dir={run_dir}", *TINY_PPO, cwd=tmp_path)
    assert result.returncode != 0
    assert "has no tensor version" in result.stderr and "DoorKey-5x5" in result.stderr
    assert "RepeatPreviousEasy" in result.stderr
    assert not run_dir.exists()


def test_a_run_without_the_key_resumes_as_gymnasium() -> None:
    """A config recorded before ``env_backend`` decides to gymnasium; ``auto`` to tensor where
    the env has one."""
    recorded = {"env": "DoorKey-5x5", "mission": False, "num_envs": 2,
                "vectorization": "sync"}
    assert with_derived_values(recorded)["env_backend"] == "gymnasium"
    new = {**recorded, "env_backend": "auto", "vectorization": "auto"}
    assert with_derived_values(new)["env_backend"] == "tensor"
    cartpole = {**new, "env": "CartPole-v1"}
    assert with_derived_values(cartpole)["env_backend"] == "gymnasium"


def test_auto_keeps_the_backend_of_the_run_it_resumes() -> None:
    """``auto`` (the default) resuming a run decides as that run did: an older run on the
    gymnasium envs (recorded, or from before the key) resumes on them, not on the tensor envs
    that a new run of the same env would take."""
    current = {"env": "DoorKey-5x5", "mission": False, "num_envs": 2, "vectorization": "sync",
               "env_backend": "auto"}
    before_the_key = {key: value for key, value in current.items() if key != "env_backend"}
    for recorded, decided in (({**current, "env_backend": "gymnasium"}, "gymnasium"),
                              (before_the_key, "gymnasium"),
                              ({**current, "env_backend": "tensor"}, "tensor")):
        assert with_derived_values(current, recorded)["env_backend"] == decided
    assert with_derived_values({**current, "env_backend": "tensor"},
                               before_the_key)["env_backend"] == "tensor"


@pytest.mark.parametrize("vectorization", ["sync", "async"])
def test_auto_takes_gymnasium_where_vectorization_is_set(vectorization: str) -> None:
    """``vectorization`` says how gymnasium's envs step: setting it asks for them (so
    ``vectorization=sync`` stays the bit-exact reference); left ``auto``, the tensor envs."""
    config = {"env": "DoorKey-5x5", "mission": False, "num_envs": 2, "env_backend": "auto"}
    assert with_derived_values({**config, "vectorization": vectorization}
                               )["env_backend"] == "gymnasium"
    assert with_derived_values({**config, "vectorization": "auto"})["env_backend"] == "tensor"


@pytest.mark.parametrize(("name", "family"), [("DoorKey-5x5", DoorKey), ("MemoryS7", Memory),
                                              ("GoToDoor-5x5", GoToDoor)])
def test_the_encoder_sees_identical_inputs_from_both_backends(
        name: str, family: type[MiniGridTensorEnv]) -> None:
    """From the same state (the tensor env copied from the gymnasium envs with
    ``from_reference``) and the same torch seed, both collectors give the same rollout: every
    observation the encoder saw, every action, reward and end, until the first episode ends
    (after an auto-reset the layouts are drawn from other streams). GoToDoor's varying mission
    is encoded too."""
    mission = uses_mission(name)
    gymnasium = make_vector_env(name, 4, mission=mission)
    model = ActorCritic(gymnasium.single_observation_space, gymnasium.single_action_space,
                        {"name": "lstm", "hidden_size": 16}, grid_encoding="embedding",
                        discrete_encoding="onehot")
    device = torch.device("cpu")
    torch.manual_seed(0)
    reference = RolloutCollector(gymnasium, model, device, seed=5)
    copies = gymnasium.envs  # type: ignore[attr-defined]
    collector = TensorRolloutCollector(family.from_reference(copies, mission=mission), model,
                                       device, seed=5)
    collector.envs = family.from_reference(copies, mission=mission)  # its reset replaced it
    collector.observation = reference.observation
    torch.manual_seed(1)
    want = reference.collect(8, 8)
    torch.manual_seed(1)
    got = collector.collect(8, 8)
    ended = (want.terminated | want.truncated).any(dim=1)
    steps = int(ended.to(torch.int64).argmax()) + 1 if bool(ended.any()) else 8
    assert steps >= 2
    for key, value in want.observations.items():
        assert value.dtype == got.observations[key].dtype, key
        assert torch.equal(value[:steps], got.observations[key][:steps]), key
    for field in ("actions", "rewards", "terminated", "truncated", "log_probs", "values"):
        assert torch.equal(getattr(want, field)[:steps], getattr(got, field)[:steps]), field
    gymnasium.close()


class PerStepFinalValues(TensorRolloutCollector):
    """The reference: each truncated episode's value computed at its own step, from the
    truncated envs alone (as the collector did before it batched them per rollout)."""

    def _kept_state(self, state: State, truncated: Tensor) -> State:
        return state  # every env's memory; the truncated rows are selected below

    def _truncated_values(self, rollout: Rollout) -> None:
        for step, (final, state) in enumerate(self.finals):
            rows = rollout.truncated[step].nonzero().squeeze(1)
            if len(rows):
                observation = {key: value[rows].unsqueeze(0)
                               for key, value in self._fields(final, self.device).items()}
                no_reset = torch.zeros(1, len(rows), dtype=torch.bool)
                rollout.final_values[step, rows] = self.model(
                    observation, select_state(state, rows), no_reset).value[0]


def test_truncated_values_batched_per_rollout_equal_those_of_each_step() -> None:
    """Episodes cut every 6 steps, half the envs 3 steps out of step with the others: the
    values GAE bootstraps from, computed once per rollout for every truncation, equal those
    computed step by step (float64)."""
    torch.set_default_dtype(torch.float64)
    try:
        rollouts = []
        for collector_type in (PerStepFinalValues, TensorRolloutCollector):
            torch.manual_seed(0)
            envs = DoorKey(8, size=5, max_steps=6)
            model = ActorCritic(envs.single_observation_space, envs.single_action_space,
                                {"name": "lstm", "hidden_size": 16}, grid_encoding="embedding",
                                discrete_encoding="onehot")
            collector = collector_type(envs, model, torch.device("cpu"), seed=3)
            envs.step_count[1::2] += 3  # half the envs truncated 3 steps before the others
            rollouts.append(collector.collect(16, 8))
    finally:
        torch.set_default_dtype(torch.float32)
    want, got = rollouts
    assert int(want.truncated.sum()) >= 8
    assert int((want.truncated.sum(1) == 4).sum()) >= 2  # steps where half the envs were cut
    assert torch.equal(want.truncated, got.truncated)
    assert torch.allclose(want.final_values, got.final_values, rtol=0, atol=1e-12)
    assert bool((got.final_values[got.truncated] != 0).all())


def test_a_step_keeps_only_the_truncated_envs_memory_on_the_cpu() -> None:
    """What a step keeps for the truncated values: the truncated envs' rows of every field,
    in order, so that the rest of its memory is freed as the rollout goes."""
    envs = DoorKey(4, size=5, max_steps=6)
    model = ActorCritic(envs.single_observation_space, envs.single_action_space,
                        {"name": "memlstm", "hidden_size": 8, "capacity": 4},
                        grid_encoding="embedding", discrete_encoding="onehot")
    collector = TensorRolloutCollector(envs, model, torch.device("cpu"), seed=0)
    state = model.initial_state(4)
    state = state._make(torch.arange(value.numel()).view(value.shape).to(value.dtype)
                        for value in state)
    kept = collector._kept_state(state, torch.tensor([False, True, False, True]))
    for before, after in zip(state, kept, strict=True):
        assert torch.equal(after, before[[1, 3]])


def test_sb3_trains_on_the_tensor_backend(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    result = run_cli("rlmem.train", "agent=sb3", "env=MemoryS7", "memory=lstm",
                     "env_backend=tensor", "num_envs=2", "frames=64",
                     "agent.frames_per_env=16", "agent.batch_size=32", "agent.epochs=1",
                     "memory.hidden_size=16", "progress_bar=false", f"run_dir={run_dir}",
                     cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert load_checkpoint(run_dir / "checkpoint.pt").config["env_backend"] == "tensor"
    assert OmegaConf.load(run_dir / "config.yaml").env_backend == "tensor"


@pytest.mark.parametrize("name", ["RepeatPreviousEasy", "AutoencodeEasy", "BattleshipEasy"])
def test_popgym_envs_with_the_suites_wrappers_have_the_gymnasium_spaces(name: str) -> None:
    """Through ``make_vector_env``, a POPGym env with the wrappers the suites give it (the
    flattened observation, the previous action) has the same spaces on both backends; a
    wrapper without a tensor version keeps ``auto`` on gymnasium."""
    pytest.importorskip("popgym")
    wrappers = (["gymnasium.wrappers:FlattenObservation"] if name.startswith("Autoencode")
                else []) + ["rlmem.envs.previous_action:PreviousAction"]
    tensor = make_vector_env(name, 2, backend="tensor", wrappers=wrappers)
    gymnasium = make_vector_env(name, 2, wrappers=wrappers)
    assert tensor.single_observation_space == gymnasium.single_observation_space
    assert tensor.single_action_space == gymnasium.single_action_space
    gymnasium.close()
    other = ["gymnasium.wrappers:RecordEpisodeStatistics"]
    assert resolve_backend("auto", name, wrappers=other) == "gymnasium"
