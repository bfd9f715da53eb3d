"""Tensor envs: batched torch implementations of MiniGrid and POPGym envs, their whole state
tensors of shape ``(num_envs, ...)`` on any device (:mod:`rlmem.envs.tensor.base`)."""

from rlmem.envs.tensor.base import StepResult, TensorObservation, TensorVectorEnv

__all__ = ["StepResult", "TensorObservation", "TensorVectorEnv"]
