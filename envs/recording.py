"""Recording rendered episodes of an env, and writing them as GIFs."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from minigrid.minigrid_env import MiniGridEnv
from PIL import Image

from rlmem.runs.files import write_atomic


class EpisodeRecorder(gym.Wrapper):
    """Keep the rendered frames of the first ``episodes`` episodes of ``env``.

    A MiniGrid env's frames come from its ``get_frame`` (the full grid, the agent's view
    highlighted), so it needs no ``render_mode``; any other env must have been made with
    ``render_mode="rgb_array"``.

    Args:
        env: the env (possibly wrapped).
        episodes: how many episodes to keep.
        tile_size: pixels per grid cell (MiniGrid).

    Raises:
        ValueError: ``env`` is not MiniGrid and does not render RGB arrays.
    """

    def __init__(self, env: gym.Env, episodes: int, tile_size: int = 16) -> None:
        super().__init__(env)
        unwrapped = env.unwrapped
        self._minigrid = unwrapped if isinstance(unwrapped, MiniGridEnv) else None
        if self._minigrid is None and env.render_mode != "rgb_array":
            raise ValueError(f"recording GIFs of {env} needs render_mode='rgb_array', got "
                             f"{env.render_mode!r}")
        self.episodes = episodes
        self.tile_size = tile_size
        self.recorded: list[list[np.ndarray]] = []
        self._frames: list[np.ndarray] | None = None

    def _frame(self) -> np.ndarray:
        if self._minigrid is not None:
            return self._minigrid.get_frame(highlight=True, tile_size=self.tile_size)
        return np.asarray(self.env.render())

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        observation, info = self.env.reset(**kwargs)
        recording = len(self.recorded) < self.episodes
        self._frames = [self._frame()] if recording else None
        return observation, info

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        if self._frames is not None:
            self._frames.append(self._frame())
            if terminated or truncated:
                self.recorded.append(self._frames)
                self._frames = None
        return observation, reward, terminated, truncated, info


def write_gif(frames: list[np.ndarray], path: str | os.PathLike[str],
              duration_ms: int = 100) -> None:
    """Write ``frames`` (each ``(H, W, 3)`` uint8) as a looping GIF, atomically
    (:func:`rlmem.runs.files.write_atomic`: never through a symlink, never half a file)."""
    images = [Image.fromarray(frame) for frame in frames]
    buffer = io.BytesIO()
    images[0].save(buffer, format="GIF", save_all=True, append_images=images[1:],
                   duration=duration_ms, loop=0)
    write_atomic(Path(path), buffer.getvalue())
