"""Environments: any registered gymnasium env, MiniGrid's observation encoding, short names and
train -> transfer pairs, a run's ``env_kwargs`` and ``wrappers``.

>>> from rlmem.envs import make_vector_env
>>> envs = make_vector_env("DoorKey-5x5", num_envs=16)  # doctest: +SKIP
>>> envs = make_vector_env("CartPole-v1", num_envs=16)  # doctest: +SKIP
>>> envs = make_vector_env("DoorKey-5x5", 4096, backend="auto", device="cuda")  # doctest: +SKIP
"""

from rlmem.envs.backend import BACKENDS, resolve_backend
from rlmem.envs.env_workers import EnvWorkerError, EnvWorkers
from rlmem.envs.factory import (
    VECTORIZATIONS,
    EnvOptions,
    env_constructors,
    episode_limit,
    make_env,
    make_vector_env,
    resolved_mission,
    uses_mission,
)
from rlmem.envs.minigrid_observation import (
    MISSION_LENGTH,
    VOCABULARY,
    GridSpace,
    MiniGridObservation,
    MissionSpace,
    is_minigrid,
    mission_varies,
    tokenize,
)
from rlmem.envs.recording import EpisodeRecorder, write_gif
from rlmem.envs.registry import ENVS, EnvSpec, env_spec, transfer_target
from rlmem.envs.spaces import (
    IncompatibleEnvError,
    Observation,
    describe_space,
    interface_mismatch,
    space_signature,
)
from rlmem.envs.trust import TRUST_KEY, UntrustedCodeError, refuse_untrusted_code
from rlmem.envs.vectorization import (
    AUTO,
    resolve_vectorization,
    usable_cores,
    worker_count,
)
from rlmem.envs.wrappers import WrapperSpec, apply_wrappers, parse_wrappers

__all__ = [
    "AUTO",
    "BACKENDS",
    "ENVS",
    "MISSION_LENGTH",
    "TRUST_KEY",
    "VECTORIZATIONS",
    "VOCABULARY",
    "EnvOptions",
    "EnvSpec",
    "EnvWorkerError",
    "EnvWorkers",
    "EpisodeRecorder",
    "GridSpace",
    "IncompatibleEnvError",
    "MiniGridObservation",
    "MissionSpace",
    "Observation",
    "UntrustedCodeError",
    "WrapperSpec",
    "apply_wrappers",
    "describe_space",
    "env_constructors",
    "env_spec",
    "episode_limit",
    "interface_mismatch",
    "is_minigrid",
    "make_env",
    "make_vector_env",
    "mission_varies",
    "parse_wrappers",
    "refuse_untrusted_code",
    "resolve_backend",
    "resolve_vectorization",
    "resolved_mission",
    "space_signature",
    "tokenize",
    "transfer_target",
    "usable_cores",
    "uses_mission",
    "worker_count",
    "write_gif",
]
