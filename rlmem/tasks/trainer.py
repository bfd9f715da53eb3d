"""The training loop of the supervised tasks: fresh batches, aux losses, clipping, checkpoints.

Every iteration draws a new batch from the task's seeded generator (the papers train on an
endless stream, not a fixed data set), adds the cell's own losses (SA-RNN's update budget,
TARNN's Ω) to the task loss, clips the gradient norm and steps the optimizer. A loss or gradient
that stops being finite ends the run with :class:`NonFiniteLossError` before the bad update is
applied, so the last checkpoint on disk is a good one.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from rlmem.cells._engines.onednn_linear import onednn_products
from rlmem.runs import CHECKPOINT_NAME, Checkpoint, NonFiniteLossError, RunLogger, RunSession
from rlmem.runs.checkpoint import on_disk
from rlmem.runs.restore import ON_RESUME, load_state, restore_rng
from rlmem.tasks.base import SequenceTask
from rlmem.tasks.cuda_graph import GraphedLoss, compute, graph_refusal
from rlmem.tasks.held_out import confirmation_score, evaluate
from rlmem.tasks.model import SequenceModel


@dataclass
class Schedule:
    """How long to train and how often to log, evaluate and checkpoint."""

    seq_len: int
    """Delay ``T`` of the training sequences, and of the evaluation the target is checked on."""
    batch_size: int
    """Sequences per update."""
    iterations: int
    """Total updates (the run stops there, also after a resume)."""
    grad_clip: float | None
    """Max global gradient norm, or None for no clipping."""
    eval_seq_lens: Sequence[int] = ()
    """Extra delays evaluated besides ``seq_len`` (transfer)."""
    eval_batch_size: int = 256
    """Sequences in the fixed evaluation batch of each ``T``."""
    eval_every: int = 100
    """Evaluate at ``seq_len`` every this many updates (and at the end)."""
    transfer_every: int | None = None
    """Evaluate at ``eval_seq_lens`` every this many updates (and at the end); None: only at
    the end."""
    log_every: int = 10
    """Write a progress row every this many updates."""
    checkpoint_every: int = 100
    """Checkpoint every this many updates (and at the end)."""
    amp: bool = False
    """bf16 autocast for the forward passes."""
    seed: int = 0
    """Seeds the training stream and the evaluation batches."""
    target: float | None = None
    """Stop at the first evaluation whose score at ``seq_len`` meets this (the task's
    :attr:`~rlmem.tasks.SequenceTask.score`); None trains all ``iterations``."""
    confirm_batches: int = 0
    """With a target: stop only if the pooled score of this many confirmation batches
    (:func:`~rlmem.tasks.held_out.confirmation_score`) meets it too; 0: the evaluation batch
    alone decides."""
    seq_len_min: int | None = None
    """Train each batch at a delay drawn uniformly from ``[seq_len_min, seq_len]``; None:
    every batch at ``seq_len``."""

    @property
    def fixed_length(self) -> bool:
        """Every training batch is at ``seq_len``."""
        return self.seq_len_min is None or self.seq_len_min == self.seq_len

    def training_seq_len(self, generator: torch.Generator) -> int:
        """The delay of the next training batch, drawn from ``generator`` only when the delays
        vary, so a fixed-delay run's data stream is the same as without the option."""
        if self.fixed_length:
            return self.seq_len
        assert self.seq_len_min is not None  # else fixed_length
        return int(torch.randint(self.seq_len_min, self.seq_len + 1, (), generator=generator,
                                 device=generator.device))


@dataclass
class TrainResult:
    """What a finished run measured."""

    iteration: int
    elapsed_s: float
    """Wall-clock seconds of training and evaluation, over every resume."""
    cpu_s: float
    """CPU seconds of this process over the same span (one core with ``OMP_NUM_THREADS=1``)."""
    final: dict[str, float] = field(default_factory=dict)
    converged_at: int | None = None
    """The iteration whose evaluation first met the schedule's target, if it did."""


class SupervisedTrainer:
    """Train ``model`` on ``task``; resumable from the checkpoint in ``run_dir``.

    Args:
        model: the sequence model (already on ``device``).
        task: the task to sample from.
        optimizer: over ``model.parameters()``.
        schedule: lengths and intervals.
        run: the open run (:func:`rlmem.runs.open_run`): its directory receives
            ``checkpoint.pt``, ``progress.csv`` and ``tb/``; its device is where the data is
            generated and the model runs; Ctrl-C stops training at a checkpoint.
        config: the run's resolved config, stored in the checkpoint for compatibility checks.
        transfer_model: evaluates at ``schedule.eval_seq_lens`` with the trained weights copied
            in; a cell built with other weight-free hyperparameters (e.g. a MemLSTM whose
            capacity holds the longer sequences). ``None``: ``model`` itself.
    """

    def __init__(self, model: SequenceModel, task: SequenceTask,
                 optimizer: torch.optim.Optimizer, schedule: Schedule, run: RunSession,
                 config: Mapping[str, Any], transfer_model: SequenceModel | None = None) -> None:
        if transfer_model is not None:
            transfer_model.load_state_dict(model.state_dict())
        self.model = model
        self.transfer_model = transfer_model
        self.task = task
        self.optimizer = optimizer
        self.schedule = schedule
        self.run = run
        self.run_dir = run.run_dir
        self.device = run.device
        self.config = dict(config)
        self.generator = torch.Generator(device=run.device)
        self.generator.manual_seed(schedule.seed)
        self.iteration = 0
        self.elapsed_s = 0.0
        self.cpu_s = 0.0
        self.converged_at: int | None = None
        self.resumed = False
        self.graph_refusal = graph_refusal(model, run.device, schedule.fixed_length, schedule.amp)
        """Why the iterations run eagerly (:mod:`rlmem.tasks.cuda_graph`); ``None`` where a
        CUDA graph replays them (recorded at the first iteration)."""
        self._graphed: GraphedLoss | None = None

    @property
    def checkpoint_path(self) -> Path:
        return self.run_dir / CHECKPOINT_NAME

    # --- checkpoints -------------------------------------------------------------------------

    def checkpoint(self) -> Checkpoint:
        """Everything needed to continue: weights, optimizer, data stream, counters."""
        return Checkpoint(
            config=self.config,
            progress={"iteration": self.iteration, "elapsed_s": self.elapsed_s,
                      "cpu_s": self.cpu_s,
                      **({} if self.converged_at is None else
                         {"converged_at": self.converged_at})},
            states={"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()},
            rng={"data": self.generator.get_state()})

    def save(self) -> None:
        """Write the checkpoint atomically (only when the weights are finite)."""
        self.run.save(self.checkpoint())

    def load(self, checkpoint: Checkpoint) -> None:
        """Restore weights, optimizer, data stream and counters.

        Raises:
            IncompatibleStateError: a saved state does not fit the model, optimizer or
                generator of the checkpoint's own config, or the data was drawn on another
                kind of device (a CUDA generator's state cannot go on in a CPU one's, nor back).
        """
        path = self.checkpoint_path
        load_state(self.model, checkpoint, "model", path, ON_RESUME)
        load_state(self.optimizer, checkpoint, "optimizer", path, ON_RESUME)
        restore_rng(self.generator, checkpoint, "data", path, ON_RESUME)
        self.iteration = checkpoint.count("iteration")
        self.elapsed_s = float(checkpoint.progress.get("elapsed_s", 0.0))
        self.cpu_s = float(checkpoint.progress.get("cpu_s", 0.0))
        converged = checkpoint.progress.get("converged_at")
        self.converged_at = None if converged is None else int(converged)
        self.resumed = True

    def _tick(self, clock: tuple[float, float]) -> tuple[float, float]:
        """Add the wall and CPU time since ``clock`` to the counters; returns the new clock."""
        now = (time.perf_counter(), time.process_time())
        self.elapsed_s += now[0] - clock[0]
        self.cpu_s += now[1] - clock[1]
        return now

    # --- training ----------------------------------------------------------------------------

    def train_step(self) -> dict[str, torch.Tensor]:
        """One update on a fresh batch; returns the step's metrics as detached 0-dim tensors.

        The finiteness check is the step's only host synchronisation; the metrics are turned
        into numbers only when a row is logged.
        """
        schedule = self.schedule
        self.model.cell.anneal(self.iteration / max(schedule.iterations, 1))
        batch = self.task.sample(schedule.batch_size, schedule.training_seq_len(self.generator),
                                 self.generator)
        max_norm = schedule.grad_clip if schedule.grad_clip is not None else math.inf
        if self._graphed is not None:
            computed = self._graphed(batch)
        elif self.graph_refusal is None:  # the first iteration: eager, then recorded
            self._graphed, computed = GraphedLoss.capture(self.model, self.task, batch,
                                                          max_norm)
            if self._graphed is None:
                self.graph_refusal = "the capture or its check failed (see the warning)"
        else:
            self.optimizer.zero_grad(set_to_none=True)
            computed = compute(self.model, self.task, batch, max_norm, schedule.amp)
        loss, grad_norm, outputs, aux = (computed.loss, computed.grad_norm, computed.outputs,
                                         computed.aux)
        if not bool(torch.isfinite(loss) & torch.isfinite(grad_norm)):
            raise NonFiniteLossError(
                f"non-finite {'loss' if not torch.isfinite(loss) else 'gradient norm'} at "
                f"iteration {self.iteration + 1} (loss {float(loss):.4g}, gradient norm "
                f"{float(grad_norm):.4g}); stopped before applying it. "
                f"{on_disk(self.checkpoint_path)} Try a lower lr or a smaller grad_clip.")
        self.optimizer.step()
        self.iteration += 1
        metrics = {f"train/{key}": value
                   for key, value in self.task.metrics(outputs.float(), batch).items()}
        metrics["train/loss"] = loss.clone()  # a graph's results are overwritten by its replay
        metrics["train/grad_norm"] = grad_norm.clone()
        for key, value in aux.losses.items():
            metrics[f"aux/{key}"] = value.detach().clone()
        for key, value in aux.diagnostics.items():
            metrics[f"memory/{key}"] = value
        return metrics

    def evaluate(self, at_seq_len: bool = True, transfer: bool = True) -> dict[str, float]:
        """Metrics on the fixed evaluation batches at ``seq_len`` and at ``eval_seq_lens``."""
        schedule = self.schedule
        lengths = [T for T in dict.fromkeys(schedule.eval_seq_lens) if schedule.seq_len != T]
        results: dict[str, float] = {}
        if at_seq_len:
            results.update(evaluate(self.model, self.task, [schedule.seq_len],
                                    schedule.eval_batch_size, schedule.seed, self.device,
                                    schedule.amp))
        if transfer and lengths:
            model = self.model
            if self.transfer_model is not None:
                self.transfer_model.load_state_dict(self.model.state_dict())
                model = self.transfer_model
            results.update(evaluate(model, self.task, lengths, schedule.eval_batch_size,
                                    schedule.seed, self.device, schedule.amp))
        return {f"eval/{key}": value for key, value in results.items()}

    # the cells' large products in oneDNN: the same products rounded otherwise, ~1.8x as fast
    # where torch's BLAS is slow (rlmem.cells._engines.onednn_linear)
    @onednn_products()
    def train(self, show_progress: bool = True) -> TrainResult:
        """Run from the current iteration to ``schedule.iterations``; returns the last eval."""
        schedule = self.schedule
        baseline = self.task.baseline(schedule.seq_len)
        final: dict[str, float] = {}
        with RunLogger(self.run_dir, "iteration",
                       resume_step=self.iteration if self.resumed else None) as logger, \
                tqdm(total=schedule.iterations, initial=self.iteration, unit="it",
                     desc=f"{self.task.name} T={schedule.seq_len}", mininterval=2.0,
                     disable=not show_progress, dynamic_ncols=True) as bar:
            self.model.train()
            clock = (time.perf_counter(), time.process_time())
            window_start, since_log = clock[0], 0
            recheck: dict[str, float] = {}
            if self.converged_at is not None:
                # The stop rule may change on resume (a stricter target, or confirmation
                # batches): a run that no longer meets it trains on.
                recheck = self.evaluate(transfer=False)
                if not self._meets_target(recheck):
                    self.converged_at = None
            if self.finished:  # resumed a finished run: report its evaluation
                final = {**self.evaluate(at_seq_len=not recheck), **recheck}
            while not self.finished and not self.run.stop_requested:
                try:
                    step = self.train_step()
                except NonFiniteLossError:
                    self._tick(clock)  # a diverged run's result counts its time too
                    raise
                bar.update(1)
                since_log += 1
                last = self.iteration == schedule.iterations
                evaluated = self.iteration % schedule.eval_every == 0 or last
                metrics: dict[str, float] = {}
                if evaluated:
                    metrics = self.evaluate(transfer=False)
                    if self._meets_target(metrics):
                        self.converged_at = self.iteration
                        last = True
                    if last or self._transfer_due():
                        metrics.update(self.evaluate(at_seq_len=False))
                    final = metrics
                if self.iteration % schedule.log_every == 0 or last or evaluated:
                    metrics = {**{key: float(value) for key, value in step.items()}, **metrics}
                    clock = self._tick(clock)
                    rate = since_log / max(clock[0] - window_start, 1e-9)
                    window_start, since_log = clock[0], 0
                    logger.log({"iteration": self.iteration, **metrics,
                                f"baseline/{baseline.metric}": baseline.value,
                                "time/elapsed_s": self.elapsed_s, "time/cpu_s": self.cpu_s,
                                "time/its_per_s": rate})
                    bar.set_postfix(self._postfix(metrics), refresh=False)
                    if evaluated:
                        bar.write(self._eval_line(metrics))
                if (self.iteration % schedule.checkpoint_every == 0 or last
                        or self.run.stop_requested):
                    clock = self._tick(clock)
                    self.save()
        return TrainResult(self.iteration, self.elapsed_s, self.cpu_s, final, self.converged_at)

    @property
    def finished(self) -> bool:
        """All iterations done, or the target met."""
        return self.iteration >= self.schedule.iterations or self.converged_at is not None

    def _transfer_due(self) -> bool:
        every = self.schedule.transfer_every
        return every is not None and self.iteration % every == 0

    def _meets_target(self, metrics: dict[str, float]) -> bool:
        """Whether the evaluation in ``metrics`` meets the target, and its confirmation
        batches too when the schedule asks for them (their pooled score is added to
        ``metrics`` as ``eval/confirmed_<score>@T<seq_len>``)."""
        schedule = self.schedule
        score = f"{self.task.score}@T{schedule.seq_len}"
        if schedule.target is None or not self.task.reached(metrics[f"eval/{score}"],
                                                             schedule.target):
            return False
        if not schedule.confirm_batches:
            return True
        pooled = confirmation_score(self.model, self.task, schedule.seq_len,
                                    schedule.confirm_batches, schedule.eval_batch_size,
                                    schedule.seed, self.device, schedule.amp).pooled
        metrics[f"eval/confirmed_{score}"] = pooled
        return self.task.reached(pooled, schedule.target)

    def _eval_line(self, metrics: Mapping[str, float]) -> str:
        evals = " ".join(f"{key[5:]}={value:.4f}" for key, value in metrics.items()
                         if key.startswith("eval/"))
        return f"[{self.task.name}] iteration {self.iteration}: {evals}"

    @staticmethod
    def _postfix(metrics: Mapping[str, float]) -> dict[str, str]:
        keys = ("train/loss", "train/accuracy", "train/mse")
        return {key.split("/")[1]: f"{metrics[key]:.4f}" for key in keys if key in metrics}
