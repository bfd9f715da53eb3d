"""Evaluate a trained agent, on its training env or on any env with the same spaces.

    python -m rlmem.evaluate run=runs/ppo/DoorKey-5x5/relstm/seed0 env=transfer episodes=100
    python -m rlmem.evaluate run=... env=DoorKey-8x8 argmax=true gif=3
    python -m rlmem.evaluate run=runs/ppo/CartPole-v1/relstm/seed0

The env is rebuilt from the run's recorded config (its ``env_kwargs`` and ``wrappers``), and its
observation and action spaces are checked against the training env's before anything is played.
Shows a progress bar over the episodes, prints a summary (the result, where it was written, what
to run next) and writes ``<run>/eval/<env>_<sampled|greedy>_<episodes>ep_seed<seed>.json``
(:func:`report_name`; and ``..._<i>.gif``), so that evaluations of other settings never replace
each other. Ctrl-C writes the episodes finished so far, marked ``"interrupted": true``.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import gymnasium as gym
import hydra
import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from rlmem.agents.base import EnvProbe
from rlmem.agents.derived import with_derived_values
from rlmem.agents.policy_evaluation import EvaluationResult, episode_quotas, evaluate_policy
from rlmem.agents.registry import AGENTS
from rlmem.cells import full_attention, widened_note
from rlmem.envs import (
    ENVS,
    EnvOptions,
    EpisodeRecorder,
    IncompatibleEnvError,
    env_spec,
    interface_mismatch,
    make_vector_env,
    refuse_untrusted_code,
    transfer_target,
)
from rlmem.envs.backend import GYMNASIUM
from rlmem.envs.recording import write_gif
from rlmem.runs import (
    CHECKPOINT_NAME,
    INTERRUPTED,
    Checkpoint,
    load_checkpoint,
    reported_as_cli_errors,
    resolve_device,
)
from rlmem.runs.allocator import keep_freed_memory
from rlmem.runs.arithmetic import FLUSH_KEY, subnormal_floats
from rlmem.runs.directory import (
    PREVIOUS,
    refuse_invalid_path,
    refuse_symlinks,
    remove_temporaries,
    run_identity,
)
from rlmem.runs.errors import UnwritableRunError
from rlmem.runs.files import write_json
from rlmem.runs.lock import RunLock
from rlmem.schema.command_line import CommandLine, freeze_imported_objects, front_door
from rlmem.schema.evaluate import (
    TRANSFER,
    EvaluateConfig,
    check_evaluate_config,
    register_evaluate_configs,
)
from rlmem.schema.run_names import describe
from rlmem.schema.shell_override import override

register_evaluate_configs()

__all__ = ["IncompatibleEnvError", "evaluate_run", "evaluation_env", "load_run", "main",
           "report_name", "report_path"]


UNREADABLE = ("It was not loaded, and no file of the run was changed: evaluate another run, "
              "or train this one again.")
"""What to do about a checkpoint that cannot be evaluated, ending its message."""


def short_name(name: str) -> str:
    """The short name of an env if it has one (``MiniGrid-DoorKey-16x16-v0``: ``DoorKey-16x16``)."""
    spec = env_spec(name)
    return next((key for key, value in ENVS.items() if value == spec), name)


def load_run(run: Path, *, trusted: bool = False) -> Checkpoint:
    """The checkpoint of an RL run directory, its config's derived values decided (an older run
    may have left them to be), with a clear error when there is none.

    The config is data: one that names code to import is refused unless ``trusted``
    (:func:`rlmem.envs.refuse_untrusted_code`), before anything in it is interpreted.
    """
    refuse_invalid_path(run, key="run")
    path = run / CHECKPOINT_NAME
    if not run.is_dir():
        raise ValueError(f"run={run}: no such run directory")
    if not path.is_file():
        raise ValueError(f"run={run}: no {CHECKPOINT_NAME} (has it trained for one update?)")
    checkpoint = load_checkpoint(path, remedy=UNREADABLE)
    config = checkpoint.config
    if "agent" not in config:
        task = config.get("task", {}).get("name", "?") if isinstance(config.get("task"),
                                                                     dict) else "?"
        raise ValueError(f"run={run} is a supervised run (task={task}), not an RL agent; its "
                         "results are in its progress.csv and its test metrics")
    if config["agent"]["name"] not in AGENTS:
        raise ValueError(f"run={run} was trained by agent={config['agent']['name']}; "
                         f"rlmem.evaluate evaluates {', '.join(AGENTS)} runs")
    refuse_untrusted_code(config, source=str(path), trusted=trusted)
    # An evaluation steps the original envs, whatever the run trained on: the tensor envs
    # equal them step for step (rlmem.envs.tensor), and only the originals exist for every
    # transfer target and draw the GIFs.
    return dataclasses.replace(
        checkpoint, config=with_derived_values({**config, "env_backend": GYMNASIUM}))


def evaluation_env(requested: str | None, config: dict[str, Any]) -> str:
    """The env to evaluate a run on: ``requested`` (a name, ``transfer`` or None, see
    :class:`~rlmem.schema.evaluate.EvaluateConfig`) for a run of recorded ``config``.

    Raises:
        KeyError: ``transfer`` was asked for a run without a transfer target.
    """
    trained_on = config["env"]
    target = config.get("transfer_env") or env_spec(trained_on).transfer
    if requested is None:
        return target or trained_on
    if requested == TRANSFER:
        return target or transfer_target(trained_on)  # raises, listing the pairs
    return requested


def check_interface(run: Path, name: str, config: dict[str, Any],
                    options: EnvOptions) -> EnvProbe:
    """Env ``name`` as one env made with the run's ``options`` shows it, after checking that its
    spaces are those of the env the run was trained on.

    Raises:
        IncompatibleEnvError: they are not; the message says what differs.
    """
    trained_on = config["env"]
    trained = EnvProbe(trained_on, *options.probe(trained_on))
    probed = EnvProbe(name, *options.probe(name))
    mismatch = interface_mismatch(probed.observation_space, probed.action_space,
                                  trained.observation_space, trained.action_space)
    if mismatch:
        kind = (f" is not a MiniGrid env like {trained_on} and"
                if trained.minigrid and not probed.minigrid else "")
        raise IncompatibleEnvError(f"env={name}{kind} {mismatch}: the agent in {run} was "
                                   f"trained on {trained_on} and cannot act in it")
    return probed


def _env_makers(name: str, options: EnvOptions, probe: EnvProbe, num_envs: int, *, gif: int,
                tile_size: int) -> tuple[list[Callable[[], gym.Env]], list[EpisodeRecorder]]:
    """One maker per env of the vector env, and the list its GIF recorder will be put in.

    With ``gif`` episodes to record, the first env (the one :func:`episode_quotas` gives at
    least ``gif`` episodes where there are that many) is wrapped in an
    :class:`EpisodeRecorder`; it is created when the vector env calls the maker, so the list
    stays empty until then.
    """
    recorder: list[EpisodeRecorder] = []

    def make(index: int) -> gym.Env:
        if index == 0 and gif:
            # MiniGrid draws its own frames; any other env renders them.
            env = options.make(name, **({} if probe.minigrid else {"render_mode": "rgb_array"}))
            recording = EpisodeRecorder(env, gif, tile_size=tile_size)
            recorder.append(recording)
            return recording
        return options.make(name)

    return [functools.partial(make, index) for index in range(num_envs)], recorder


def evaluate_run(cfg: EvaluateConfig) -> tuple[str, EvaluationResult, Path | None]:
    """Evaluate ``cfg.run`` on ``cfg.env``; return the env's name, the result and where its
    JSON was written (None when it could not be written; the error is printed)."""
    check_evaluate_config(cfg)
    run = Path(cfg.run)
    identity = run_identity(run)  # before the checkpoint is read: the run it belongs to
    checkpoint = load_run(run, trusted=cfg.trust_run_config)
    refuse_symlinks(run, key="run", elsewhere=None)  # the results are written into <run>/eval/
    config = checkpoint.config
    trained_on = config["env"]
    name = short_name(evaluation_env(cfg.env, config))
    device = resolve_device(cfg.device)
    torch.set_num_threads(cfg.torch_threads)
    keep_freed_memory()  # as a run does: no page faults on torch's fresh buffers

    options = EnvOptions.from_config(config)
    probe = check_interface(run, name, config, options)
    eval_memory = {**full_attention_on(name, config["memory"], probe.episode_limit,
                                       given=cfg.eval_memory), **cfg.eval_memory}
    load_actor = AGENTS[config["agent"]["name"]].load_actor
    actor = load_actor(run, checkpoint, probe.observation_space, probe.action_space, device,
                       eval_memory)

    num_envs = min(cfg.num_envs, cfg.episodes)
    quotas = episode_quotas(cfg.episodes, num_envs, first=cfg.gif)
    env_fns, recorder = _env_makers(name, options, probe, num_envs, gif=cfg.gif,
                                    tile_size=cfg.gif_tile_size)
    target = report_path(run, name, argmax=cfg.argmax, episodes=cfg.episodes, seed=cfg.seed,
                         eval_memory=eval_memory, first_to_end=cfg.first_to_end)
    # Held to the end: two evaluations of one run on one env do not race for its report.
    with report_lock(run, name, target) as writable:
        envs = make_vector_env(name, num_envs, env_fns=env_fns)
        seed = int(np.random.SeedSequence([cfg.seed]).generate_state(1)[0])
        torch.manual_seed(seed)
        try:
            # The arithmetic the run trained with, as its own evaluations had it.
            with subnormal_floats(bool(config[FLUSH_KEY])):
                result, returns = evaluate_policy(actor, envs, cfg.episodes, greedy=cfg.argmax,
                                                  seed=seed, quotas=quotas, name=name,
                                                  progress=cfg.progress_bar,
                                                  first_to_end=cfg.first_to_end)
        finally:
            envs.close()
        if not probe.minigrid:
            result = result.without_success()
        # The result is printed by the caller whatever happens to the files below.
        report = {"env": name, "trained_on": trained_on, "frames": checkpoint.count("frames"),
                  "agent": config["agent"]["name"], "argmax": cfg.argmax, "seed": cfg.seed,
                  "num_envs": num_envs, "eval_memory": eval_memory,
                  **({"first_to_end": True} if cfg.first_to_end else {}),
                  **result.as_dict(), "returns": returns}
        gifs = recorder[0].recorded if recorder else []
        if not writable or not same_run(run, identity):
            return name, result, None
        return name, result, write_results(target.parent, target.stem, report, gifs)


@contextmanager
def report_lock(run: Path, env: str, target: Path) -> Iterator[bool]:
    """Hold the lock of the report ``target`` while the block evaluates; yield whether it can
    be written. Where the run cannot be written (a read-only mount, a full disk), the
    evaluation goes on without the lock and writes nothing: it says so, and the block's result
    is printed all the same. The lock taken, temporaries of the report that a killed
    evaluation left are removed.

    Raises:
        RunLockedError: another evaluation of ``run`` on ``env`` with these settings runs.
        RunDirectoryError: the report's lock file is a symlink.
    """
    lock = RunLock(target.parent, name=f".{target.stem}.lock",
                   what=f"the evaluation of {run} on {env}", elsewhere=None)
    try:
        lock.acquire()
    except UnwritableRunError as error:
        cause = error.__cause__
        why = cause.strerror if isinstance(cause, OSError) and cause.strerror else str(error)
        print(f"rlmem.evaluate: cannot write into {target.parent} ({why}): the evaluation "
              "runs and prints its result, but nothing of it can be written.", file=sys.stderr,
              flush=True)
        yield False
        return
    try:
        remove_temporaries(target.parent, (target.name,))
        yield True
    finally:
        lock.release()


def same_run(run: Path, identity: tuple[int, int] | None) -> bool:
    """Whether ``run`` still holds the run whose checkpoint was evaluated (``identity``, its
    :func:`~rlmem.runs.directory.run_identity` before it was read); says why not where it
    does not: ``resume=false`` moved it aside meanwhile, and its report must not land in the
    new run's ``eval/``."""
    if run_identity(run) == identity:
        return True
    print(f"rlmem.evaluate: the run in {run} was started afresh while it was evaluated "
          f"(resume=false moved the evaluated one into {run / PREVIOUS}/); the result is "
          "printed but not written, so that the new run's eval/ holds no report of another "
          "model. Evaluate the earlier run in its new folder, or the new run once it has "
          "trained.", file=sys.stderr, flush=True)
    return False


def full_attention_on(env: str, memory: dict[str, Any], steps: int | None,
                      given: Mapping[str, Any]) -> dict[str, int]:
    """The ``eval_memory`` that lets the cell of a run's ``memory`` config attend over every
    step of ``env``'s episodes (at most ``steps``), as in the papers' transfer evaluations
    (:func:`rlmem.cells.full_attention`), but for the keys the evaluation was ``given``; said
    when it is not empty: trained with a shorter ``capacity``, MemLSTM would otherwise attend
    over a sliding window of the latest steps."""
    widened = full_attention(memory, steps, given)
    if widened:
        print(f"rlmem.evaluate: {env}'s episodes last up to {steps} steps, so "
              f"{widened_note(memory, widened)}", flush=True)
    return widened


def report_name(env: str, *, argmax: bool = False, episodes: int = 100, seed: int = 0,
                eval_memory: dict[str, Any] | None = None, first_to_end: bool = False) -> str:
    """The file name (without ``.json``) of an evaluation on ``env`` with these settings:
    ``DoorKey-16x16_sampled_100ep_seed0``, ``..._greedy_...``, ``_first-to-end`` after the
    episodes where they were counted so, and the ``eval_memory`` overrides after a comma
    (``,capacity=2560``). The env name is made a file name (:func:`safe_file_name`). The
    defaults are :class:`EvaluateConfig`'s."""
    mode = "greedy" if argmax else "sampled"
    mode += "_first-to-end" if first_to_end else ""
    memory = describe(eval_memory) if eval_memory else ""
    return (f"{safe_file_name(env)}_{mode}_{episodes}ep_seed{seed}"
            f"{',' if memory else ''}{memory}")


def report_path(run: Path, env: str, *, argmax: bool = False, episodes: int = 100,
                seed: int = 0, eval_memory: dict[str, Any] | None = None,
                first_to_end: bool = False) -> Path:
    """Where the evaluation of ``run`` on ``env`` with these settings is written:
    ``<run>/eval/<report_name>.json`` (:func:`report_name`)."""
    return run / "eval" / (report_name(env, argmax=argmax, episodes=episodes, seed=seed,
                                       eval_memory=eval_memory, first_to_end=first_to_end)
                           + ".json")


def write_results(out_dir: Path, stem: str, report: dict[str, Any],
                  gifs: list[list[np.ndarray]]) -> Path | None:
    """Write ``<stem>.json`` and ``<stem>_<i>.gif`` into ``out_dir``, each atomically (a reader
    sees the earlier file or this one, never a part); return the JSON's path, or None after
    printing why it could not be written. Replacing an earlier evaluation is said, with its
    settings."""
    target = out_dir / f"{stem}.json"
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        earlier = _settings(target)
        for index, frames in enumerate(gifs):
            write_gif(frames, out_dir / f"{stem}_{index}.gif")
        write_json(target, report)
    except OSError as error:
        print(f"rlmem.evaluate: could not write the results into {out_dir}: {error}",
              file=sys.stderr, flush=True)
        return None
    if earlier is not None:
        print(f"rlmem.evaluate: {target} replaces an earlier evaluation ({earlier})", flush=True)
    return target


def _settings(report: Path) -> str | None:
    """The settings of the evaluation stored in ``report``, in one phrase, or None when there
    is none (or it cannot be read)."""
    try:
        stored = json.loads(report.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(stored, dict):
        return None
    keys = ("episodes", "argmax", "seed", "num_envs", "frames", "eval_memory", "interrupted")
    return ", ".join(f"{key}={stored.get(key)!r}" for key in keys)


def safe_file_name(name: str) -> str:
    """An env name as a file name: ``ALE/Pong-v5`` -> ``ALE_Pong-v5`` (a namespace's slash
    would make a directory)."""
    return name.replace("/", "_")


LINE = CommandLine(
    program="rlmem.evaluate", config_name="evaluate", register=register_evaluate_configs,
    schema=EvaluateConfig,
    purpose=("Evaluate a trained agent (a run directory of python -m rlmem.train) on its "
             "transfer target, its own env or any env with the same spaces, and write the "
             "result into <run>/eval/, in a file named by the env and the evaluation's "
             "settings."),
    examples=("run=runs/ppo/DoorKey-5x5/relstm/seed0 env=transfer episodes=100",
              "run=runs/ppo/DoorKey-5x5/relstm/seed0 env=DoorKey-8x8 argmax=true gif=3"),
    required=("run",), shows_envs=True)
"""What ``python -m rlmem.evaluate --help`` says."""


def summary(cfg: EvaluateConfig, name: str, result: EvaluationResult,
            written: Path | None) -> str:
    """What an evaluation says at its end: the result, where it is, and what to run next."""
    run = Path(cfg.run)
    mode = "greedy" if cfg.argmax else "sampled"
    where = (f"written to {written}" if written is not None
             else "not written (see the error above)")
    if result.interrupted:
        return (f"{name}: {result.summary()}\nInterrupted after {result.episodes} of "
                f"{cfg.episodes} episodes: the episodes finished so far are {where}, marked "
                "interrupted (a sample biased toward short episodes). Run the same command "
                "again for the whole evaluation.")
    command = f"python -m rlmem.evaluate {override('run', str(run))} env={name}"
    after = (f"watch it act with `{command} episodes=3 gif=3` (GIFs in {run / 'eval'})"
             if not cfg.gif else f"its GIFs are in {run / 'eval'}")
    other = "sampled" if cfg.argmax else "greedy"
    flag = "false" if cfg.argmax else "true"
    return (f"{name}: {result.summary()}\nEvaluated {run} on {name} with {mode} actions "
            f"(seed {cfg.seed}); the result is {where}. Next: {after}, or evaluate it with "
            f"{other} actions: `{command} episodes={cfg.episodes} argmax={flag}`.")


@hydra.main(config_path="conf", config_name="evaluate", version_base="1.3")
def _hydra_main(cfg: DictConfig) -> None:
    """Evaluate and print the summary; exit 130 after Ctrl-C (the partial result written)."""
    with reported_as_cli_errors("rlmem.evaluate"):
        typed = OmegaConf.to_object(cfg)
        assert isinstance(typed, EvaluateConfig)  # the schema of conf/evaluate.yaml
        name, result, written = evaluate_run(typed)
    print(summary(typed, name, result, written), flush=True)
    if written is None:
        sys.exit(1)
    if result.interrupted:
        sys.exit(INTERRUPTED)


def main() -> None:
    """The CLI: ``--help``, a missing ``run=``, unknown keys
    (:func:`~rlmem.schema.command_line.front_door`), then Hydra."""
    sys.argv[1:] = front_door(LINE)  # Hydra reads its command line from sys.argv
    freeze_imported_objects()
    _hydra_main()


if __name__ == "__main__":
    main()
