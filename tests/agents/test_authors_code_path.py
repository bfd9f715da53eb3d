"""``reset_rule=authors_code`` (with ``readout=authors_code``) is the ReLSTM authors' RL code path,
checked against a re-implementation of their loops written here from their code (the
``minigrid-rl`` and ``torch-ac`` branches of bhargav104/MemoryNets; issue 58):

- their rollout (``torch_ac/algos/base.py``) calls the model with ``reset=True`` at every step
  (``if done:`` tests the tuple of all envs' flags, always true), on ``(h, c)`` masked at
  episode starts; their ``RelLSTM`` then empties its memory and takes a plain LSTM step on
  ``(h, c)``;
- their update (``torch_ac/algos/ppo.py``) replays each chunk from the stored ``(h, c)``,
  masked, with ``reset=True`` at its first step only; after it their ``RelLSTM`` ignores the
  ``(h, c)`` it is given: it attends over the chunk's own states, and neither episode ends
  inside the chunk nor the mask reach it.

Our side runs as our PPO does: one-step calls of :class:`ActorCritic` while acting (the
collector), then :meth:`Rollout.chunks` and one call per chunk (``PPO.step``), in float64.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch
from gymnasium import spaces
from hydra import compose, initialize_config_dir
from torch import Tensor

from rlmem.agents.policy_evaluation import evaluate_policy
from rlmem.agents.ppo.model import ActorCritic
from rlmem.agents.ppo.rollout import Rollout, stack_states
from rlmem.cells import make_cell
from rlmem.cells.relstm import ReLSTM, ReLSTMState
from rlmem.envs import make_env, make_vector_env
from rlmem.schema.memory import CONF_DIR
from rlmem.schema.train import register_train_configs

OBS, H, NU, RHO = 5, 6, 2, 2
STEPS, ENVS, CHUNK = 12, 3, 6
ENDS = {(3, 0), (5, 1), (8, 2)}
"""(step, env) where an episode ends: env 0 and env 2 inside a chunk, env 1 at a chunk's end."""
NU_RL = 5
"""ν = ρ of the authors' RL model (``RelLSTM(..., 5, 5, True)`` in their ``model.py``)."""


class AuthorsRelLSTM:
    """Their ``RelLSTM.forward(x, (h, c), reset)``, module state and all, on the weights of our
    cell: per-env lists for the relevant set, attention over ``[last ν states, relevant]``
    queried by the previous macro-state, ``s = ½ (h_{t-1} + read)``, then the LSTM on
    ``(s, c)``; a state leaving the ν-buffer enters a free slot, or replaces the lowest score
    it beats (scores frozen on entry)."""

    def __init__(self, cell: ReLSTM) -> None:
        self.cell = cell

    def __call__(self, x: Tensor, h: Tensor, c: Tensor, reset: bool) -> tuple[Tensor, Tensor]:
        batch = x.shape[0]
        if reset:
            self.c, self.s, self.t = c, h, -1
            self.memory: list[Tensor] = []
            self.relevant: list[list[Tensor]] = [[] for _ in range(batch)]
            self.relevant_score: list[list[float]] = [[] for _ in range(batch)]
            self.score: dict[int, Tensor] = {}
        else:
            self.s = torch.stack([self.macro_state(b) for b in range(batch)])
        h, self.c = self.cell.base.cell(x, (self.s, self.c))
        self.t += 1
        if self.t >= NU:
            self.screen(self.t - NU, batch)
        self.memory.append(h)
        self.score[self.t] = torch.zeros(batch, dtype=x.dtype)
        if len(self.memory) > NU:
            del self.memory[0]
        return h, self.c

    def macro_state(self, b: int) -> Tensor:
        attention = self.cell.attention
        slots = torch.stack([m[b] for m in self.memory] + self.relevant[b])
        logits = attention.score(torch.tanh(attention.query(self.s[b]) + attention.key(slots)))
        weights = torch.softmax(logits.squeeze(-1), dim=0)
        first = self.t - len(self.memory) + 1
        for index in range(len(self.memory)):
            self.score[first + index][b] += weights[index].detach()
        return 0.5 * (self.memory[-1][b] + weights @ slots)

    def screen(self, time: int, batch: int) -> None:
        for b in range(batch):
            score = float(self.score[time][b])
            if len(self.relevant[b]) < RHO:
                self.relevant[b].append(self.memory[0][b])
                self.relevant_score[b].append(score)
                continue
            lowest = min(range(RHO), key=lambda slot: self.relevant_score[b][slot])
            if score > self.relevant_score[b][lowest]:
                self.relevant[b][lowest] = self.memory[0][b]
                self.relevant_score[b][lowest] = score


def authors_model(model: ActorCritic, rel: AuthorsRelLSTM, obs: Tensor, memory: Tensor,
                  reset: bool) -> tuple[Tensor, Tensor, Tensor]:
    """Their ``ACModel.forward(obs, memory, reset)`` on our model's encoder and heads."""
    encoder = model.get_submodule("observation")
    x = encoder(obs)
    h, c = rel(x, memory[:, :H], memory[:, H:], reset)
    return model.actor(h), model.critic(h).squeeze(-1), torch.cat([h, c], dim=1)


def authors_rollout(model: ActorCritic, rel: AuthorsRelLSTM, obs: Tensor, masks: Tensor
                    ) -> tuple[Tensor, Tensor, Tensor]:
    """Their ``collect_experiences``: logits, values and the memory before every step."""
    memory = torch.zeros(ENVS, 2 * H, dtype=torch.float64)
    memories, logits, values = [], [], []
    for t in range(STEPS):
        memories.append(memory)
        logit, value, memory = authors_model(model, rel, obs[t], memory * masks[t, :, None],
                                             True)
        logits.append(logit)
        values.append(value)
    return torch.stack(logits), torch.stack(values), torch.stack(memories)


def authors_update(model: ActorCritic, rel: AuthorsRelLSTM, obs: Tensor, masks: Tensor,
                   memories: Tensor) -> tuple[Tensor, Tensor]:
    """Their ``update_parameters`` replay of every chunk: logits and values, time-major."""
    logits, values = torch.zeros(STEPS, ENVS, 3, dtype=torch.float64), torch.zeros(
        STEPS, ENVS, dtype=torch.float64)
    for start in range(0, STEPS, CHUNK):
        memory = memories[start]
        for i in range(CHUNK):
            t = start + i
            logits[t], values[t], memory = authors_model(
                model, rel, obs[t], memory * masks[t, :, None], i == 0)
    return logits, values


def our_rollout(model: ActorCritic, obs: Tensor, resets: Tensor) -> tuple[Tensor, Tensor, Rollout]:
    """Our collector's calls: one step at a time, the state before every chunk kept."""
    state, chunk_states, logits, values = model.initial_state(ENVS), [], [], []
    for t in range(STEPS):
        if t % CHUNK == 0:
            chunk_states.append(state)
        out = model({"observation": obs[t:t + 1]}, state, resets[t:t + 1])
        state = out.state
        logits.append(out.action_params[0])
        values.append(out.value[0])
    zeros = torch.zeros(STEPS, ENVS, dtype=torch.float64)
    rollout = Rollout({"observation": obs}, resets, zeros.long(), zeros, zeros, zeros,
                      zeros.bool(), zeros.bool(), zeros, zeros[0], CHUNK,
                      stack_states(chunk_states))
    return torch.stack(logits), torch.stack(values), rollout


def unchunk(value: Tensor) -> Tensor:
    """``(CHUNK, chunks * ENVS, ...)``, :meth:`Rollout.chunks`' layout -> ``(STEPS, ENVS, ...)``."""
    return value.reshape(CHUNK, STEPS // CHUNK, ENVS, *value.shape[2:]).transpose(0, 1).reshape(
        STEPS, ENVS, *value.shape[2:])


def make_model() -> ActorCritic:
    torch.manual_seed(0)
    memory = {"name": "relstm", "hidden_size": H, "short_term": NU, "relevant": RHO,
              "forget_bias": None, "readout": "authors_code", "reset_rule": "authors_code"}
    space = spaces.Box(-1.0, 1.0, (OBS,))
    model = ActorCritic(space, 3, memory, head_size=8).double()
    # The vector encoder's Linear-Tanh without SB3's preprocessing, which casts to float32.
    model.observation = model.get_submodule("observation.net")
    return model


def episodes() -> tuple[Tensor, Tensor, Tensor]:
    """Observations, our resets and their masks (``1 - done`` of the step before)."""
    obs = torch.randn(STEPS, ENVS, OBS, dtype=torch.float64)
    resets = torch.zeros(STEPS, ENVS, dtype=torch.bool)
    resets[0] = True
    for step, env in ENDS:
        resets[step + 1, env] = True
    masks = torch.ones(STEPS, ENVS, dtype=torch.float64)
    masks[1:] = (~resets[1:]).double()
    return obs, resets, masks


def test_acting_and_the_update_are_the_authors_loops() -> None:
    """Acting: every step equals theirs (a plain LSTM step); the update: each chunk's outputs
    and the gradients of a loss on them equal theirs, with episode ends inside chunks."""
    model = make_model()
    rel = AuthorsRelLSTM(model.memory)  # type: ignore[arg-type]
    obs, resets, masks = episodes()
    with torch.no_grad():
        logits, values, rollout = our_rollout(model, obs, resets)
        their_logits, their_values, memories = authors_rollout(model, rel, obs, masks)
    torch.testing.assert_close(logits, their_logits, atol=1e-12, rtol=0)
    torch.testing.assert_close(values, their_values, atol=1e-12, rtol=0)
    chunks = rollout.chunks(torch.zeros(STEPS, ENVS), torch.zeros(STEPS, ENVS))
    start = chunks.start_state
    assert isinstance(start, ReLSTMState)
    torch.testing.assert_close(start.s, memories[::CHUNK, :, :H].reshape(-1, H),
                               atol=1e-12, rtol=0)  # each chunk starts from the stored h
    weights = torch.randn(STEPS, ENVS, 4, dtype=torch.float64)

    def loss(logit: Tensor, value: Tensor) -> Tensor:
        return (torch.log_softmax(logit, -1) * weights[..., :3]).sum() + (
            value * weights[..., 3]).sum()

    out = model(chunks.observations, chunks.start_state, chunks.resets)
    ours = torch.autograd.grad(loss(unchunk(out.action_params), unchunk(out.value)),
                               list(model.parameters()), allow_unused=True)
    their_logits, their_values = authors_update(model, rel, obs, masks, memories)
    theirs = torch.autograd.grad(loss(their_logits, their_values), list(model.parameters()),
                                 allow_unused=True)
    torch.testing.assert_close(unchunk(out.action_params), their_logits, atol=1e-12, rtol=0)
    torch.testing.assert_close(unchunk(out.value), their_values, atol=1e-12, rtol=0)
    assert any(g is not None and g.abs().sum() > 0 for g in ours), "nothing trained"
    for (name, _), mine, their in zip(model.named_parameters(), ours, theirs, strict=True):
        assert (mine is None) == (their is None), name
        if mine is not None and their is not None:
            torch.testing.assert_close(mine, their, atol=1e-12, rtol=0, msg=name)
    attention = [g for (name, _), g in zip(model.named_parameters(), ours, strict=True)
                 if name.startswith("memory.attention")]
    assert all(g is not None and g.abs().sum() > 0 for g in attention), "no attention trained"


def test_acting_runs_no_attention_and_is_the_plain_lstm_step() -> None:
    """A one-step call is ``LSTMCell(x, (h_{t-1}, c_{t-1}))``: the attention's weights change
    nothing, and the state handed on is ``(h_t, c_t)``."""
    torch.manual_seed(1)
    cell = make_cell("relstm", input_size=OBS, hidden_size=H, short_term=NU, relevant=RHO,
                     readout="authors_code", reset_rule="authors_code").double()
    assert isinstance(cell, ReLSTM)
    x = torch.randn(7, ENVS, OBS, dtype=torch.float64)
    resets = torch.zeros(7, ENVS, dtype=torch.bool)
    resets[4, 1] = True
    state, h, c = cell.initial_state(ENVS), torch.zeros(ENVS, H, dtype=torch.float64), \
        torch.zeros(ENVS, H, dtype=torch.float64)
    steps = []
    with torch.no_grad():
        for t in range(7):
            keep = (~resets[t]).double()[:, None]
            h, c = cell.base.cell(x[t], (h * keep, c * keep))
            y, state = cell(x[t:t + 1], state, resets[t:t + 1])
            torch.testing.assert_close(y[0], h, atol=1e-12, rtol=0)
            torch.testing.assert_close((state.s, state.c), (h, c), atol=1e-12, rtol=0)
            steps.append(y[0])
        # One call of the 7 steps attends from its second step on, and hands on (h, c) too.
        y, state = cell(x, None, resets)
    torch.testing.assert_close(y[0], steps[0], atol=1e-12, rtol=0)
    assert not torch.allclose(y[1:], torch.stack(steps[1:]))
    assert torch.equal(state.s, y[-1])


def test_the_rule_needs_the_authors_readout() -> None:
    with pytest.raises(ValueError, match="needs its read-out, readout=authors_code"):
        make_cell("relrnn", input_size=3, hidden_size=4, reset_rule="authors_code")


def test_the_recipes_are_the_authors_settings() -> None:
    """``+recipe=kerg2020_code`` gives relstm the authors' path, ``kerg2020_code_lstm`` the
    LSTM as torch initialises it; both the raw grid floats, DoorKey-5x5 and 5M frames."""
    register_train_configs()
    with initialize_config_dir(str(CONF_DIR), version_base=None):
        relstm = compose("train", overrides=["+recipe=kerg2020_code", "memory=relstm"])
        lstm = compose("train", overrides=["+recipe=kerg2020_code_lstm", "memory=lstm"])
    assert relstm.memory.readout.name == relstm.memory.reset_rule.name == "authors_code"
    assert (relstm.memory.short_term, relstm.memory.relevant, relstm.memory.forget_bias) == (
        NU_RL, NU_RL, 0.0)
    assert lstm.memory.forget_bias is None
    for cfg in (relstm, lstm):
        assert (cfg.env, cfg.frames, cfg.grid_encoding, cfg.stop_return) == (
            "DoorKey-5x5", 5_001_216, "raw", None)
        assert cfg.run_dir == f"runs/ppo/DoorKey-5x5/{cfg.memory.name}_kerg2020_code/seed0"


class TurnLeft:
    """An actor that turns left for ever: a DoorKey episode lasts until its time limit."""

    def initial_state(self, num_envs: int) -> None:
        return None

    def act(self, observation: object, state: None, resets: np.ndarray,
            greedy: bool) -> tuple[np.ndarray, None]:
        return np.zeros(len(resets), dtype=np.int64), None


@pytest.mark.parametrize(("limits", "first_to_end", "lengths"), [
    ([3, 40], False, [3, 3, 40, 40]),       # ours: a fixed share of the episodes per env
    ([3, 40], True, [3, 3, 3, 3]),          # theirs: the first 4 to end, all of the short env
    ([3, 3], True, [3, 3, 3, 3]),           # and every episode ending at the step that ends it
])
def test_the_authors_count_takes_the_first_episodes_to_end(
        limits: list[int], first_to_end: bool, lengths: list[int]) -> None:
    """``first_to_end`` counts as rl-starter-files' ``scripts/evaluate.py``: episodes in the
    order they end over all envs until as many as asked for have ended (3 asked of two envs
    ending together: 4 counted), so short episodes weigh more."""
    envs = make_vector_env("DoorKey-5x5", len(limits), env_fns=[
        functools.partial(make_env, "DoorKey-5x5", max_steps=steps) for steps in limits])
    asked = 3 if limits == [3, 3] else 4
    result, returns = evaluate_policy(TurnLeft(), envs, asked, greedy=True, seed=0,
                                      first_to_end=first_to_end)
    envs.close()
    assert result.episodes == len(returns) == len(lengths)
    assert result.length_mean == sum(lengths) / len(lengths)
