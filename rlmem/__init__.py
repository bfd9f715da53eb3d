"""rlmem: recurrent memory cells for reinforcement learning."""

__version__ = "0.1.0"
