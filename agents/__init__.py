"""Agents: our recurrent PPO (:mod:`rlmem.agents.ppo`) and the sb3-contrib adapter
(:mod:`rlmem.agents.sb3`), with what they share (the run's config, the MiniGrid encoders,
evaluation).

Each subpackage is one agent. Importing this package imports every subpackage, whose
``__init__`` registers the agent's torch-free config (:mod:`rlmem.agents.registry`): a new agent
is a new package, listed nowhere else.
"""

import importlib
import pkgutil

for _package in pkgutil.iter_modules(__path__):
    if _package.ispkg:
        importlib.import_module(f"{__name__}.{_package.name}")
