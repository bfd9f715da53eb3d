"""The training run of ``python -m rlmem.train agent=sb3``: sb3-contrib's RecurrentPPO with
:class:`~rlmem.agents.sb3.MultiInputMemoryPolicy` on the same envs, memory and budget as
``agent=ppo``, writing the same run directory.

The run directory receives ``config.yaml`` (resolved), ``progress.csv`` and TensorBoard events
in ``tb/`` (one row per update; the columns of ``agent=ppo`` where they mean the same, see
:data:`~rlmem.agents.sb3.recorder.SB3_METRICS`) and ``checkpoint.pt`` after every update,
atomically. The checkpoint holds state dicts and counters only, so it loads with
``torch.load(weights_only=True)``; :func:`load_model` turns it back into a ``RecurrentPPO``.
(SB3's own ``model.save`` zip also works with this policy, but it stores parts of the model
with cloudpickle, so loading one executes pickled code: the runs never write or read it.)
Running the same command again resumes from the checkpoint.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from gymnasium import spaces
from sb3_contrib import RecurrentPPO
from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy
from sb3_contrib.ppo_recurrent import MlpLstmPolicy, MultiInputLstmPolicy
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv, VecMonitor

from rlmem.agents.derived import with_derived_values
from rlmem.agents.env_output import EnvOutputError
from rlmem.agents.run import env_seed
from rlmem.agents.run_config import RunConfig
from rlmem.agents.sb3.callback import MemoryCallback
from rlmem.agents.sb3.config import SB3Config, SB3Policy
from rlmem.agents.sb3.env_output import EnvOutputCallback
from rlmem.agents.sb3.extractor import MiniGridExtractor
from rlmem.agents.sb3.policy import MemoryPolicy, MultiInputMemoryPolicy
from rlmem.agents.sb3.recorder import RunRecorder
from rlmem.envs import EnvOptions, refuse_untrusted_code, resolve_vectorization
from rlmem.envs.backend import GYMNASIUM, TENSOR
from rlmem.envs.tensor import TensorVectorEnv
from rlmem.envs.tensor.sb3_vec_env import TensorSB3VecEnv
from rlmem.runs import CHECKPOINT_NAME, Checkpoint, RunLogger, RunSession, load_checkpoint
from rlmem.runs.checkpoint import on_disk
from rlmem.runs.restore import ON_EVALUATE, ON_RESUME, load_state, restore_rng

VEC_ENVS: dict[str, type[DummyVecEnv] | type[SubprocVecEnv]] = {
    "sync": DummyVecEnv, "async": SubprocVecEnv}
"""SB3's counterpart of each ``vectorization`` of :data:`rlmem.envs.VECTORIZATIONS`."""


def make_envs(config: Mapping[str, Any], num_envs: int, seed: int) -> VecEnv:
    """``num_envs`` copies of ``config.env`` as an SB3 VecEnv (with SB3's episode Monitor).

    ``config`` is the run's config (a DictConfig or the plain dict of a checkpoint); a
    ``vectorization=auto`` not yet decided is decided here as for a run. With
    ``env_backend=tensor`` the copies are one tensor env on the CPU, through
    :class:`~rlmem.envs.tensor.sb3_vec_env.TensorSB3VecEnv` (SB3 takes NumPy arrays), seeded as
    SB3 seeds its own (copy ``i`` gets ``seed + i``).
    """
    if config.get("env_backend", GYMNASIUM) == TENSOR:
        tensor = EnvOptions.from_config(config).make_vector(config["env"], num_envs,
                                                            backend=TENSOR)
        assert isinstance(tensor, TensorVectorEnv)
        envs = TensorSB3VecEnv(tensor)
        envs.seed(seed)
        return VecMonitor(envs)
    vectorization = resolve_vectorization(config["vectorization"], num_envs)
    return make_vec_env(functools.partial(EnvOptions.from_config(config).make, config["env"]),
                        n_envs=num_envs, seed=seed, vec_env_cls=VEC_ENVS[vectorization])


def build_model(config: Mapping[str, Any], env: VecEnv,
                device: torch.device | str = "cpu") -> RecurrentPPO:
    """The RecurrentPPO of a run's config (``agent`` section:
    :class:`~rlmem.agents.sb3.config.SB3Config`), derived values decided.

    The cell is ``config["memory"]`` (or, with ``agent.policy=sb3_lstm``, sb3-contrib's own
    LSTM policy of ``memory.hidden_size``); on MiniGrid (a dict observation) the features
    extractor is :class:`~rlmem.agents.sb3.MiniGridExtractor`, with the run's grid encoding,
    elsewhere SB3's own for the observation space (a flattened vector, a discrete value
    one-hot).
    """
    agent = config["agent"]
    memory = dict(config["memory"])
    head = [agent["head_size"]]
    minigrid = isinstance(env.observation_space, spaces.Dict)
    extractor: dict[str, Any] = dict(
        features_extractor_class=MiniGridExtractor, normalize_images=False,
        features_extractor_kwargs=dict(grid_encoding=config["grid_encoding"])) if minigrid \
        else {}
    policy_kwargs: dict[str, Any] = dict(
        **extractor, net_arch=dict(pi=head, vf=head), ortho_init=agent["ortho_init"],
        shared_lstm=agent["shared_lstm"], enable_critic_lstm=agent["enable_critic_lstm"],
        optimizer_kwargs=dict(eps=agent["adam_eps"]))
    policy: type[RecurrentActorCriticPolicy]
    # A recorded config holds the policy's name, a composed one the member.
    if SB3Policy(agent.get("policy", SB3Policy.memory)) is SB3Policy.sb3_lstm:
        if memory["name"] != "lstm":
            raise ValueError(f"agent.policy=sb3_lstm is sb3-contrib's own nn.LSTM: it needs "
                             f"memory=lstm, got memory={memory['name']}")
        # The size and the stack carry over; sb3-contrib's LSTM keeps torch's init (forget
        # bias 0).
        policy = MultiInputLstmPolicy if minigrid else MlpLstmPolicy
        policy_kwargs.update(lstm_hidden_size=memory["hidden_size"],
                             n_lstm_layers=memory.get("num_layers", 1),
                             lstm_kwargs=dict(dropout=memory.get("dropout", 0.0)))
    else:
        policy = MultiInputMemoryPolicy if minigrid else MemoryPolicy
        policy_kwargs.update(memory=memory.pop("name"), memory_kwargs=memory)
    return RecurrentPPO(
        policy, env, learning_rate=agent["lr"], n_steps=agent["frames_per_env"],
        batch_size=agent["batch_size"], n_epochs=agent["epochs"], gamma=agent["gamma"],
        gae_lambda=agent["gae_lambda"], clip_range=agent["clip"],
        clip_range_vf=agent["clip"] if agent["clip_value"] else None,
        normalize_advantage=agent["normalize_advantage"], ent_coef=agent["entropy_coef"],
        vf_coef=agent["value_coef"], max_grad_norm=agent["max_grad_norm"],
        target_kl=agent["target_kl"], seed=config["seed"], device=str(device),
        policy_kwargs=policy_kwargs)


def load_model(run_dir: str | Path, env: VecEnv | None = None,
               device: torch.device | str = "cpu", *,
               trust_run_config: bool = False) -> RecurrentPPO:
    """The RecurrentPPO of an ``agent=sb3`` run's checkpoint, ready for ``predict`` and
    :func:`~stable_baselines3.common.evaluation.evaluate_policy`.

    It computes in the caller's arithmetic: a run trained with ``flush_denormal=true`` acts as
    it trained inside ``with rlmem.runs.arithmetic.subnormal_floats(True):``, as
    ``rlmem.evaluate`` runs it.

    Args:
        run_dir: the run directory (or the checkpoint file itself).
        env: the env to attach; ``None`` makes one copy of the run's env.
        device: where to put the policy.
        trust_run_config: import the modules the run's config names (``module:EnvId``,
            wrappers outside gymnasium and minigrid); without it such a run is refused before
            anything is imported (:func:`rlmem.envs.refuse_untrusted_code`).

    Raises:
        UntrustedCodeError: the run's config names code and ``trust_run_config`` is off.
    """
    path = Path(run_dir)
    file = path / CHECKPOINT_NAME if path.is_dir() else path
    checkpoint = load_checkpoint(file)
    if checkpoint.config["agent"]["name"] != "sb3":
        raise ValueError(f"{path} is an agent={checkpoint.config['agent']['name']} run, not "
                         "agent=sb3")
    refuse_untrusted_code(checkpoint.config, source=str(file), trusted=trust_run_config)
    return model_from_checkpoint(checkpoint, env, device, path=file)


def model_from_checkpoint(checkpoint: Checkpoint, env: VecEnv | None = None,
                          device: torch.device | str = "cpu", *,
                          path: Path = Path(CHECKPOINT_NAME)) -> RecurrentPPO:
    """The RecurrentPPO of an ``agent=sb3`` checkpoint (see :func:`load_model`), read from
    ``path`` (named in the error when its states do not fit its config).

    Raises:
        IncompatibleStateError: the policy or optimizer state does not fit its own config.
    """
    config = with_derived_values(checkpoint.config)
    model = build_model(config, env if env is not None else make_envs(config, 1, config["seed"]),
                        device)
    load_state(model.policy, checkpoint, "policy", path, ON_EVALUATE)
    load_state(model.policy.optimizer, checkpoint, "optimizer", path, ON_EVALUATE)
    model.num_timesteps = checkpoint.count("frames")
    return model


def train(config: RunConfig[SB3Config], run: RunSession) -> None:
    """Train (or resume) RecurrentPPO with an rlmem cell as ``config`` says in ``run``, which
    has not reached its frames.

    Raises:
        rlmem.runs.NonFiniteLossError: the weights diverged; the last good checkpoint is kept.
    """
    start = run.checkpoint
    frames, updates = (start.count("frames"), start.count("updates")) if start else (0, 0)
    # What the run records; the model and its envs are built from it, as when it is evaluated.
    recorded = config.recorded()
    env = make_envs(recorded, config.num_envs, env_seed(config.seed, updates))
    model = build_model(recorded, env, run.device)
    # RecurrentPPO's own logger prints and writes nothing: RunRecorder writes the run's files.
    model.set_logger(Logger(folder=None, output_formats=[]))
    if start is not None:
        load_state(model.policy, start, "policy", run.checkpoint_path, ON_RESUME)
        load_state(model.policy.optimizer, start, "optimizer", run.checkpoint_path, ON_RESUME)
        restore_rng(torch.default_generator, start, "torch", run.checkpoint_path, ON_RESUME)
        model.num_timesteps = frames

    def save(frames: int, updates: int) -> None:
        run.save(Checkpoint(
            config=recorded, progress={"frames": frames, "updates": updates},
            states={"policy": model.policy.state_dict(),
                    "optimizer": model.policy.optimizer.state_dict()},
            rng={"torch": torch.get_rng_state()}))

    logger = RunLogger(run.run_dir, "frames", resume_step=frames if start is not None else None)
    recorder = RunRecorder(logger, save, frames, updates, config.frames, config.progress_bar,
                           should_stop=lambda: run.stop_requested)
    try:
        if frames < config.frames:
            # sb3-contrib's own LSTM policy has no cell to anneal or diagnose.
            callbacks: list[BaseCallback] = [EnvOutputCallback(config.env), recorder]
            if isinstance(model.policy, MemoryPolicy):
                callbacks.insert(1, MemoryCallback())
            model.learn(config.frames - frames, callback=callbacks,
                        reset_num_timesteps=start is None)
    except EnvOutputError as error:
        raise EnvOutputError(f"{error} {on_disk(run.checkpoint_path)}") from error
    finally:
        logger.close()
        env.close()
