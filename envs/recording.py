"""Recording rendered episodes of an env, and writing them as GIFs.

Each frame carries a caption above the picture: the step and the return so far
(``t=7 R=0.00``, short enough for MiniGrid's smallest grids), so a GIF shows when the reward
came. An episode keeps at most :data:`MAX_FRAMES` frames (the last one
always), so a long or never-ending episode does not fill the memory and the disk.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from minigrid.minigrid_env import MiniGridEnv
from PIL import Image, ImageDraw

from rlmem.runs.files import write_atomic

MAX_FRAMES = 500
"""The most frames kept of one episode: its first ``MAX_FRAMES - 1`` and its last."""

CAPTION_HEIGHT = 14
"""Pixels of the band above each frame that holds its caption."""


def captioned(frame: np.ndarray, text: str) -> np.ndarray:
    """``frame`` (``(H, W, 3)`` uint8) under a black band of :data:`CAPTION_HEIGHT` pixels
    holding ``text`` in white: ``(H + CAPTION_HEIGHT, W, 3)``."""
    height, width = frame.shape[:2]
    image = Image.new("RGB", (width, height + CAPTION_HEIGHT))
    image.paste(Image.fromarray(np.ascontiguousarray(frame[..., :3])), (0, CAPTION_HEIGHT))
    ImageDraw.Draw(image).text((2, 1), text, fill=(255, 255, 255))
    return np.asarray(image)


class EpisodeRecorder(gym.Wrapper):
    """Keep the rendered frames of the first ``episodes`` episodes of ``env``.

    A MiniGrid env's frames come from its ``get_frame`` (the full grid, the agent's view
    highlighted), so it needs no ``render_mode``; any other env must have been made with
    ``render_mode="rgb_array"``. Each frame is :func:`captioned` with its step and the return
    so far.

    Args:
        env: the env (possibly wrapped).
        episodes: how many episodes to keep.
        tile_size: pixels per grid cell (MiniGrid).
        max_frames: the most frames kept of an episode (its first ``max_frames - 1`` and its
            last).

    Raises:
        ValueError: ``env`` is not MiniGrid and does not render RGB arrays.
    """

    def __init__(self, env: gym.Env, episodes: int, tile_size: int = 16,
                 max_frames: int = MAX_FRAMES) -> None:
        super().__init__(env)
        unwrapped = env.unwrapped
        self._minigrid = unwrapped if isinstance(unwrapped, MiniGridEnv) else None
        if self._minigrid is None and env.render_mode != "rgb_array":
            raise ValueError(f"recording GIFs of {env} needs render_mode='rgb_array', got "
                             f"{env.render_mode!r}")
        self.episodes = episodes
        self.tile_size = tile_size
        self.max_frames = max(max_frames, 2)
        self.recorded: list[list[np.ndarray]] = []
        self._frames: list[np.ndarray] | None = None
        self._step, self._return = 0, 0.0

    def _frame(self) -> np.ndarray:
        if self._minigrid is not None:
            frame = self._minigrid.get_frame(highlight=True, tile_size=self.tile_size)
        else:
            frame = np.asarray(self.env.render())
        return captioned(frame, f"t={self._step} R={self._return:.2f}")

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        observation, info = self.env.reset(**kwargs)
        self._step, self._return = 0, 0.0
        recording = len(self.recorded) < self.episodes
        self._frames = [self._frame()] if recording else None
        return observation, info

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        self._step += 1
        self._return += float(reward)
        done = terminated or truncated
        if self._frames is not None:
            if len(self._frames) < self.max_frames - 1 or done:
                self._frames.append(self._frame())
            if done:
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
