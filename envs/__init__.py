"""MiniGrid environments: short names, observation encoding, transfer pairs.

>>> from rlmem.envs import make_vector_env
>>> envs = make_vector_env("DoorKey-5x5", num_envs=16)  # doctest: +SKIP
"""

from rlmem.envs.encoding import (
    MISSION_LENGTH,
    VOCABULARY,
    MiniGridObservation,
    mission_varies,
    tokenize,
)
from rlmem.envs.factory import (
    VECTORIZATIONS,
    make_env,
    make_vector_env,
    resolved_mission,
    uses_mission,
)
from rlmem.envs.recording import EpisodeRecorder, write_gif
from rlmem.envs.registry import ENVS, EnvSpec, env_spec, transfer_target

__all__ = [
    "ENVS",
    "MISSION_LENGTH",
    "VECTORIZATIONS",
    "VOCABULARY",
    "EnvSpec",
    "EpisodeRecorder",
    "MiniGridObservation",
    "env_spec",
    "make_env",
    "make_vector_env",
    "mission_varies",
    "resolved_mission",
    "tokenize",
    "transfer_target",
    "uses_mission",
    "write_gif",
]
