"""Our recurrent PPO (``agent=ppo``), readable top to bottom:

- :mod:`~rlmem.agents.ppo.config`: the hyperparameters (torch-free, registered as ``ppo``);
- :mod:`~rlmem.agents.ppo.presets`: the values MiniGrid and other envs want different, chosen
  by the env's family and recorded in the run;
- :mod:`~rlmem.agents.ppo.model`: the actor-critic (field encoders, the memory cell, heads);
- :mod:`~rlmem.agents.ppo.critic_memory`: the state of a critic with a memory cell of its own;
- :mod:`~rlmem.agents.ppo.collector`: rollouts from vectorised envs, one batched step at a time;
- :mod:`~rlmem.agents.ppo.rollout`: a rollout and its BPTT chunks, in minibatches;
- :mod:`~rlmem.agents.ppo.gae`: advantages and returns;
- :mod:`~rlmem.agents.ppo.loss`: the clipped PPO objective;
- :mod:`~rlmem.agents.ppo.update`: one PPO update (the optimizer steps);
- :mod:`~rlmem.agents.ppo.train`: the training run; :mod:`~rlmem.agents.ppo.actor`: evaluation.

Importing the package registers :class:`PPOConfig` and imports nothing else.
"""

from rlmem.agents.ppo.config import PPOConfig

__all__ = ["PPOConfig"]
