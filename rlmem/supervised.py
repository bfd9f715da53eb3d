"""Train a memory cell on a supervised sequence task: copy, transfer-copy, denoise or adding.

    python -m rlmem.supervised task=copy seq_len=100 memory=relstm
    python -m rlmem.supervised task=transfer_copy memory=relstm memory.hidden_size=128
    python -m rlmem.supervised task=adding seq_len=200 memory=tarnn iterations=1000 lr=1e-2

The run directory (``runs/supervised/<task>/<cell>_T<seq_len>_seed<seed>`` unless
``run_dir=...``, with the settings that differ from the defaults after the cell, or a preset's
name in its place: ``runs/supervised/transfer_copy/relstm_T100+memory.hidden_size-128_seed0``,
so that runs of other tasks, presets or settings never share one,
:mod:`rlmem.schema.run_names`) receives ``config.yaml``, ``progress.csv``, TensorBoard
events in ``tb/``, ``checkpoint.pt``, ``results.json`` and the PNG figures. Running the same
command again resumes from the checkpoint (``resume=false`` starts afresh).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import hydra
import torch
from omegaconf import DictConfig, OmegaConf

from rlmem.cells import full_attention, make_cell_from_config, widened_note
from rlmem.runs import (
    CHECKPOINT_NAME,
    NonFiniteLossError,
    ResumeRules,
    RunSession,
    checkpoint_to_resume,
    open_run,
    reported_as_cli_errors,
    resolved_config,
)
from rlmem.runs.allocator import keep_freed_memory
from rlmem.runs.files import write_json
from rlmem.schema.command_line import CommandLine, freeze_imported_objects, front_door
from rlmem.schema.memory import cell_configs, check_memory_config
from rlmem.schema.run_names import existing_run_dir
from rlmem.schema.supervised import (
    TASK_SCHEMAS,
    OptimizerName,
    SupervisedConfig,
    check_supervised_config,
    register_supervised_configs,
)
from rlmem.tasks import (
    Baseline,
    Schedule,
    SequenceModel,
    SequenceTask,
    SupervisedTrainer,
    TrainResult,
    make_task_from_config,
    write_figures,
)
from rlmem.tasks.held_out import evaluate
from rlmem.tasks.saved import load_saved_model
from rlmem.tasks.warm_start import warm_start_weights

OPTIMIZERS: dict[OptimizerName, Callable[..., torch.optim.Optimizer]] = {
    OptimizerName.adam: torch.optim.Adam,
    OptimizerName.rmsprop: torch.optim.RMSprop,
    OptimizerName.sgd: torch.optim.SGD,
}

RESUME_SECTIONS = ("task", "memory", "seq_len", "seq_len_min", "batch_size", "lr", "optimizer",
                   "weight_decay", "grad_clip", "seed", "amp", "flush_denormal")
"""Keys that must match a checkpoint to resume from it (``iterations`` may grow)."""

register_supervised_configs()


def _optimizer_name(value: OptimizerName | str) -> OptimizerName:
    return value if isinstance(value, OptimizerName) else OptimizerName(str(value))


def _print(message: str) -> None:
    print(message, flush=True)


RULES = ResumeRules(sections=RESUME_SECTIONS, counter="iteration", budget="iterations")
"""A run resumes a checkpoint of the same config; ``iterations`` may grow."""


def _eval_memory(task: SequenceTask, config: dict[str, Any]) -> dict[str, Any]:
    """The run's ``eval_memory`` for its evaluations at ``eval_seq_lens``: as given, and, for a
    bound it leaves out, the full attention over the longest of those sequences
    (:func:`rlmem.cells.full_attention`: MemLSTM's capacity), said when it applies."""
    given = dict(config["eval_memory"])
    if not config["eval_seq_lens"]:
        return given
    longest = max(config["eval_seq_lens"])
    steps = task.total_length(longest)
    widened = full_attention(config["memory"], steps, given)
    if widened:
        _print(f"eval_seq_lens: a sequence at T = {longest} lasts {steps} steps, so "
               f"{widened_note(config['memory'], widened)}")
    return {**widened, **given}


def run(cfg: DictConfig, run_dir: Path) -> TrainResult:
    """Build everything from ``cfg``, train (resuming if a checkpoint is there), write results
    and figures into ``run_dir``."""
    check_supervised_config(cfg)
    check_memory_config(cfg.memory)
    task = make_task_from_config(cfg.task)
    task.check_seq_len(cfg.seq_len)
    if cfg.get("seq_len_min") is not None:
        task.check_seq_len(cfg.seq_len_min, key="seq_len_min")
    for seq_len in cfg.eval_seq_lens:
        task.check_seq_len(seq_len, key="eval_seq_lens")
    config = resolved_config(cfg)
    config["eval_memory"] = _eval_memory(task, config)
    # A run resuming its own checkpoint no longer needs (nor reads) its warm start.
    resuming = cfg.resume and checkpoint_to_resume(run_dir) is not None
    warm = warm_start_weights(cfg.warm_start, config) if cfg.warm_start and not resuming else None
    with open_run(run_dir, config, RULES, program="rlmem.supervised") as session:
        return _run(cfg, config, task, session, warm)


def _run(cfg: DictConfig, config: dict[str, Any], task: SequenceTask, session: RunSession,
         warm: dict[str, torch.Tensor] | None) -> TrainResult:
    device, run_dir = session.device, session.run_dir
    torch.manual_seed(cfg.seed)
    cell = make_cell_from_config(cfg.memory, input_size=task.input_size)
    model = SequenceModel(cell, task.output_size, task.categorical).to(device)
    optimizer = OPTIMIZERS[_optimizer_name(cfg.optimizer)](model.parameters(), lr=cfg.lr,
                                                           weight_decay=cfg.weight_decay)
    schedule = _schedule(cfg)
    transfer_model = _transfer_model(cfg, config["eval_memory"], task, model, device)
    trainer = SupervisedTrainer(model, task, optimizer, schedule, session, config,
                                transfer_model)
    if session.checkpoint is not None:
        trainer.load(session.checkpoint)  # open_run has said that the run resumes
    elif warm is not None:
        model.load_state_dict(warm)
        _print(f"warm start: the model's weights from {cfg.warm_start}")

    baseline = task.baseline(cfg.seq_len)
    parameters = sum(p.numel() for p in model.parameters())
    _print(f"{task.describe()} T={cfg.seq_len} | {cell.name} hidden {cell.hidden_size}, "
           f"{parameters} parameters | {device} | run dir {run_dir}")
    _print(f"naive baseline {baseline.metric}: {baseline.rule}")
    try:
        result = trainer.train(show_progress=cfg.progress_bar)
    except NonFiniteLossError as error:
        # The same config and seed diverge the same way again: record it as the run's result.
        stopped = TrainResult(trainer.iteration, trainer.elapsed_s, trainer.cpu_s)
        _write_results(run_dir, cfg, stopped, baseline.metric, baseline.value, parameters,
                       cfg.eval_seq_lens, diverged=str(error))
        raise
    if session.stop_requested:  # interrupted: no results for an unfinished run
        return result
    _write_results(run_dir, cfg, result, baseline.metric, baseline.value, parameters,
                   cfg.eval_seq_lens)
    _report_finished(cfg, result, baseline, task, model, session)
    return result


def _schedule(cfg: DictConfig) -> Schedule:
    """The trainer's timetable, read from ``cfg``: one place names every key it takes."""
    return Schedule(
        seq_len=cfg.seq_len, seq_len_min=cfg.get("seq_len_min"), batch_size=cfg.batch_size,
        iterations=cfg.iterations,
        grad_clip=cfg.grad_clip, eval_seq_lens=list(cfg.eval_seq_lens),
        eval_batch_size=cfg.eval_batch_size, eval_every=cfg.eval_every,
        transfer_every=cfg.get("transfer_every"), log_every=cfg.log_every,
        checkpoint_every=cfg.checkpoint_every, amp=cfg.amp, seed=cfg.seed, target=cfg.target,
        confirm_batches=cfg.confirm_batches)


def _transfer_model(cfg: DictConfig, eval_memory: dict[str, Any], task: SequenceTask,
                    model: SequenceModel, device: torch.device) -> SequenceModel | None:
    """A twin of ``model`` whose cell takes ``eval_memory``'s settings, or None without any.

    It shares ``model``'s weights (loaded into it at each transfer evaluation), so the settings
    may change only weight-free hyperparameters: one that changes a weight's shape is refused
    here, before any training, rather than when the first transfer evaluation comes.
    """
    if not eval_memory:
        return None
    transfer_cell = make_cell_from_config(OmegaConf.merge(cfg.memory, eval_memory),
                                          input_size=task.input_size)
    transfer_model = SequenceModel(transfer_cell, task.output_size, task.categorical)
    try:
        transfer_model.load_state_dict(model.state_dict())
    except RuntimeError as error:
        raise ValueError(f"eval_memory={eval_memory} changes the cell's weights; "
                         f"only weight-free hyperparameters may differ:\n{error}") from None
    transfer_model.to(device)
    return transfer_model


def _report_finished(cfg: DictConfig, result: TrainResult, baseline: Baseline,
                     task: SequenceTask, model: SequenceModel, session: RunSession) -> None:
    """Print a finished run's summary and verdict, draw its figures and say what is next.

    Only a run that finished its iterations gets here: its results.json is already written,
    so a fault while drawing a figure loses nothing.
    """
    run_dir = session.run_dir
    _print(_summary(result, cfg.seq_len, cfg.eval_seq_lens))
    _print(verdict(result, cfg.seq_len, baseline, task.name))
    if cfg.figures:
        generator = torch.Generator(device=session.device)
        generator.manual_seed(cfg.seed)
        for path in write_figures(run_dir, model, task, cfg.seq_len, generator,
                                  title=f"{task.name} T={cfg.seq_len}, {model.cell.name}"):
            _print(f"figure: {path}")
    _print(f"The run is in {run_dir}: results.json, {CHECKPOINT_NAME}, config.yaml, "
           "progress.csv and TensorBoard events in tb/. Next: train it further by running the "
           "same command with a larger iterations= (it resumes), or compare another cell with "
           "memory=<cell> (`python -m rlmem.supervised --help` lists them).")


def _write_results(run_dir: Path, cfg: DictConfig, result: TrainResult, metric: str,
                   baseline: float, parameters: int, eval_seq_lens: Iterable[int],
                   diverged: str | None = None) -> None:
    """``results.json``: the run's final evaluation, or, for a run stopped by a non-finite loss
    (``diverged``, the error's message), the iterations it completed and no evaluation."""
    results = {
        "task": cfg.task.name, "memory": cfg.memory.name, "seq_len": cfg.seq_len,
        "eval_seq_lens": list(eval_seq_lens), "iterations": result.iteration,
        "batch_size": cfg.batch_size, "lr": cfg.lr, "hidden_size": cfg.memory.hidden_size,
        "parameters": parameters, "elapsed_s": round(result.elapsed_s, 2),
        "cpu_s": round(result.cpu_s, 2), "target": cfg.target,
        "converged_at": result.converged_at, "diverged": diverged,
        "baseline": {metric: baseline},
        "eval": {key.removeprefix("eval/"): value for key, value in result.final.items()},
    }
    write_json(run_dir / "results.json", results)


LEARNED_BELOW = 0.9
"""A run learned when its final evaluation's baseline metric (``ce``, ``mse``) at its ``T`` is
below this fraction of the memoryless baseline's: within 10% of it, the model has at best
learnt a little beyond the blank and the uniform guess (an untrained copy model starts at
several times the baseline, and one that has only learnt the blanks ends just above it)."""

LEARNS = {
    "copy": ("a copy run that learns in minutes (measured on 3 of 3 seeds): python -m "
             "rlmem.supervised task=copy seq_len=10 memory=relstm lr=1e-2 iterations=1000; "
             "at T = 100, the ReLSTM paper's setting, +preset=kerg2020_table1_transfer_copy_"
             "relstm_script (hours; experiments/supervised/RESULTS.md)"),
    "adding": ("the presets that solved adding, in experiments/supervised/RESULTS.md: "
               "+preset=kag2021_grid_lr1e-3_adding_tarnn_T200"),
    "denoise": ("the presets that learned denoise, in experiments/supervised/RESULTS.md "
                "(a curriculum from T = 20)"),
}
"""What learns each task, for the closing paragraph of a run that did not: a command measured
here, or the presets of the reproduction suite."""


def verdict(result: TrainResult, seq_len: int, baseline: Baseline, task: str) -> str:
    """Whether the run learned: its final evaluation against the memoryless ``baseline`` at
    ``seq_len`` (:data:`LEARNED_BELOW`), said plainly, with what learns ``task`` when it did
    not."""
    key = f"eval/{baseline.metric}@T{seq_len}"
    if key not in result.final:
        return ""
    value, metric = result.final[key], baseline.metric
    compared = f"{metric} {value:.4f} at T={seq_len} against the memoryless baseline's " \
               f"{baseline.value:.4f} ({baseline.rule})"
    if value < LEARNED_BELOW * baseline.value:
        return f"It learned: {compared}."
    learns = LEARNS.get(task.removeprefix("transfer_"), "")
    return (f"It did not learn: {compared}, so the model does no better than one without "
            f"memory. More iterations= or a larger lr= may help; "
            + (f"{learns}." if learns else "see the presets, python -m rlmem.supervised "
               "--help."))


def _summary(result: TrainResult, seq_len: int, eval_seq_lens: Iterable[int]) -> str:
    lines = [f"finished {result.iteration} iterations in {result.elapsed_s:.1f}s "
             f"({result.cpu_s:.1f}s CPU)"
             + ("" if result.converged_at is None else
                f"; the target was met at iteration {result.converged_at}")]
    for T in dict.fromkeys([seq_len, *eval_seq_lens]):
        values = {key.removeprefix("eval/").split("@")[0]: value
                  for key, value in result.final.items() if key.endswith(f"@T{T}")}
        shown = ", ".join(f"{key} {100 * value:.1f}%" if key == "accuracy" else
                          f"{key} {value:.4f}" for key, value in values.items())
        lines.append(f"  T={T}: {shown}")
    return "\n".join(lines)


def evaluate_saved_run(run_dir: Path, eval_seq_lens: list[int], eval_memory: dict[str, Any],
                       batch_size: int) -> dict[str, float]:
    """Evaluate the copy model saved in ``run_dir`` at its own ``T`` and at ``eval_seq_lens``
    (``task=transfer_copy run=<copy run>``), without training or writing anything; prints and
    returns the metrics (``<metric>@T<T>``).

    Raises:
        ValueError: ``run_dir`` holds no checkpoint, or its model is not a copy model.
    """
    if not (run_dir / CHECKPOINT_NAME).is_file():
        raise ValueError(f"run={run_dir}: no {CHECKPOINT_NAME} there; give the folder of a copy "
                         "run (python -m rlmem.supervised task=copy ... prints it). Nothing was "
                         "evaluated.")
    saved = load_saved_model(run_dir)
    config, task = saved.config, saved.task
    if task.name != "copy":
        raise ValueError(f"run={run_dir} is a {task.name} run; transfer-copy evaluates a copy "
                         "model. Nothing was evaluated.")
    for seq_len in eval_seq_lens:
        task.check_seq_len(seq_len, key="eval_seq_lens")
    keep_freed_memory()  # as a run does: no page faults on torch's fresh buffers
    seq_len, device = int(config["seq_len"]), torch.device("cpu")
    memory = _eval_memory(task, {**config, "eval_seq_lens": eval_seq_lens,
                                 "eval_memory": eval_memory})
    results = evaluate(saved.model, task, [seq_len], batch_size, saved.seed, device)
    lengths = [T for T in dict.fromkeys(eval_seq_lens) if seq_len != T]
    if lengths:
        transfer = SequenceModel(make_cell_from_config(OmegaConf.merge(config["memory"], memory),
                                                       input_size=task.input_size),
                                 task.output_size, task.categorical)
        transfer.load_state_dict(saved.model.state_dict())
        results.update(evaluate(transfer, task, lengths, batch_size, saved.seed, device))
    result = TrainResult(saved.iteration, 0.0, 0.0,
                         {f"eval/{key}": value for key, value in results.items()})
    _print(f"{run_dir}: the {config['memory']['name']} copy model trained {saved.iteration} "
           f"iterations at T={seq_len}, evaluated (nothing trained or written)")
    _print("\n".join(_summary(result, seq_len, lengths).splitlines()[1:]))
    _print(verdict(result, seq_len, task.baseline(seq_len), task.name))
    return results


LINE = CommandLine(
    program="rlmem.supervised", config_name="supervised", register=register_supervised_configs,
    schema=SupervisedConfig,
    sections={"memory": cell_configs, "task": lambda: TASK_SCHEMAS.values()},
    purpose=("Train a memory cell on a supervised sequence task (copy, transfer_copy, denoise, "
             "adding), or a paper's setting with +preset=<name>. The run directory (run_dir) "
             "receives config.yaml, progress.csv, TensorBoard events in tb/, checkpoint.pt, "
             "results.json and figures; the same command again resumes it."),
    examples=("task=copy seq_len=100 memory=relstm",
              "task=transfer_copy memory=relstm memory.hidden_size=128",
              "task=adding seq_len=200 memory=tarnn iterations=1000 lr=1e-2",
              "+preset=kerg2020_table1_transfer_copy_relstm seed=1",
              "task=transfer_copy run=runs/supervised/copy/relstm_T100_seed0"),
    groups=("task", "memory", "+preset"))
"""What ``python -m rlmem.supervised --help`` says."""


@hydra.main(config_path="conf", config_name="supervised", version_base="1.3")
def _hydra_main(cfg: DictConfig) -> None:
    """The run: the run directory is ``run_dir``, which the run creates once the config has
    been checked (Hydra creates none)."""
    with reported_as_cli_errors("rlmem.supervised"):
        if cfg.run is not None:
            evaluate_saved_run(Path(cfg.run), list(cfg.eval_seq_lens), dict(cfg.eval_memory),
                               cfg.eval_batch_size)
            return
        if OmegaConf.is_interpolation(cfg, "run_dir"):  # the default: maybe an older name's
            cfg.run_dir = str(existing_run_dir(Path(cfg.run_dir)))
        run(cfg, Path(cfg.run_dir))


def main() -> None:
    """The CLI: ``--help``, unknown keys (:func:`~rlmem.schema.command_line.front_door`),
    then Hydra."""
    sys.argv[1:] = front_door(LINE)  # Hydra reads its command line from sys.argv
    freeze_imported_objects()
    _hydra_main()


if __name__ == "__main__":
    main()
