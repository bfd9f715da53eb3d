"""``MemoryCallback``: what a cell needs from the training loop that RecurrentPPO does not do."""

from __future__ import annotations

from stable_baselines3.common.callbacks import BaseCallback

from rlmem.agents.sb3.policy import MemoryPolicy


class MemoryCallback(BaseCallback):
    """Anneal the cells with training progress and log their diagnostics to the SB3 logger.

    Pass it to ``learn`` (``model.learn(n, callback=MemoryCallback())``). It:

    - calls ``policy.anneal(progress)`` at the end of each rollout, just before RecurrentPPO's
      update, with ``progress = num_timesteps / total_timesteps`` (SA-RNN's slope schedule; a
      no-op for cells without one);
    - records the means of each update's cell diagnostics and aux losses (``memory/...`` for
      the actor's cell, ``memory/critic/...``, ``loss/memory_aux``) into the SB3 logger as
      soon as the update is over (at the next rollout's start, or the end of training); they
      are dumped with the ``train/`` metrics of the same update.

    Without it the aux losses still reach the PPO loss (see :mod:`rlmem.agents.sb3.policy`);
    only annealing and logging are skipped.
    """

    def _init_callback(self) -> None:
        policy = self.model.policy
        if not isinstance(policy, MemoryPolicy):
            raise TypeError(f"MemoryCallback needs a MemoryPolicy, got {type(policy).__name__}")
        self.policy = policy

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        total = max(self.model._total_timesteps, 1)
        self.policy.anneal(min(self.model.num_timesteps / total, 1.0))

    def _on_rollout_start(self) -> None:
        self._record()

    def _on_training_end(self) -> None:
        self._record()

    def _record(self) -> None:
        for key, value in self.policy.pop_diagnostics().items():
            self.logger.record(key, value)
