"""GIF frames carry the step and the return so far, and an episode keeps at most max_frames."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from rlmem.envs.recording import CAPTION_HEIGHT, EpisodeRecorder, captioned


def test_each_frame_is_captioned_with_its_step_and_return() -> None:
    frame = np.zeros((20, 120, 3), dtype=np.uint8)
    one, other = captioned(frame, "step 1  return 0.00"), captioned(frame, "step 2  return 1.00")
    assert one.shape == (20 + CAPTION_HEIGHT, 120, 3)
    assert one[:CAPTION_HEIGHT].any() and not one[CAPTION_HEIGHT:].any()  # text in the band
    assert (one != other).any()


def test_an_episode_keeps_at_most_max_frames_and_its_last() -> None:
    env = EpisodeRecorder(gym.make("CartPole-v1", render_mode="rgb_array"), episodes=1,
                          max_frames=5)
    env.reset(seed=0)
    steps = 0
    done = False
    while not done:
        _, _, terminated, truncated, _ = env.step(0)
        steps += 1
        done = terminated or truncated
    [frames] = env.recorded
    assert steps > 5 and len(frames) == 5
    rendered = np.asarray(env.render())
    assert frames[-1].shape == (rendered.shape[0] + CAPTION_HEIGHT, *rendered.shape[1:])
    env.close()
