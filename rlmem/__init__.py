"""rlmem: recurrent memory cells for reinforcement learning."""

__version__ = "0.2.0"
