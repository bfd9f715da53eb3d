"""Typed config of ``python -m rlmem.supervised``: the run's keys and the ``task`` group.

``rlmem/conf/supervised.yaml`` starts from ``supervised_schema``; ``rlmem/conf/task/<name>.yaml``
from ``schema/task/<name>`` (outside the ``task`` group, so it is never itself selectable). A
misspelt key or a value of the wrong type fails when Hydra composes the config, before anything
is built.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf

from rlmem.schema.known_keys import check_known_keys
from rlmem.schema.memory import register_memory_configs
from rlmem.schema.ranges import check_seed
from rlmem.schema.run_folder import RunFolderConfig
from rlmem.schema.run_names import (
    RunNaming,
    cell_defaults,
    folder_settings,
    label_and_differences,
    labelled,
    schema_defaults,
    task_choice,
    task_file_defaults,
)
from rlmem.schema.runs_root import register_runs_root
from rlmem.tasks.held_out import MAX_CONFIRM_BATCHES


class OptimizerName(Enum):
    """The optimizers the supervised CLI offers (the papers use Adam and RMSprop)."""

    adam = "adam"
    rmsprop = "rmsprop"
    sgd = "sgd"


@dataclass
class TaskConfig:
    """The config of a registered task (``task=<name>``, ``conf/task/<name>.yaml``): its name
    and the keyword arguments of its constructor."""

    name: str = MISSING
    """Registered task name."""


@dataclass
class RecallTaskConfig(TaskConfig):
    """Copy or denoise."""

    alphabet: int = 8
    """Number of data symbols (8 in Arjovsky et al., 2016); blank and delimiter come on top."""
    recall: int = 10
    """Number of symbols to remember and reproduce (10 in the papers)."""


@dataclass
class CopyTaskConfig(RecallTaskConfig):
    """The copy task (and transfer-copy, via ``eval_seq_lens``)."""

    name: str = "copy"
    """Registered task name."""


@dataclass
class DenoiseTaskConfig(RecallTaskConfig):
    """The denoise task of Jing et al. (2019)."""

    name: str = "denoise"
    """Registered task name."""


@dataclass
class AddingTaskConfig(TaskConfig):
    """The adding problem; it has no hyperparameters besides ``seq_len``."""

    name: str = "adding"
    """Registered task name."""


TASK_SCHEMAS: dict[str, type[TaskConfig]] = {
    "copy": CopyTaskConfig,
    "denoise": DenoiseTaskConfig,
    "adding": AddingTaskConfig,
}
"""The typed config of each registered task."""


@dataclass
class SupervisedConfig(RunFolderConfig):
    """``python -m rlmem.supervised task=copy seq_len=100 memory=relstm``.

    The run folder's keys (``run_dir``, ``resume``, ``force``) come from
    :class:`~rlmem.schema.run_folder.RunFolderConfig`, which the training commands share."""

    task: Any = MISSING
    """The task: ``copy``, ``transfer_copy``, ``denoise`` or ``adding`` (``conf/task/``)."""
    memory: Any = MISSING
    """The memory cell and its hyperparameters (any registered cell,
    :mod:`rlmem.schema.memory`), e.g. ``memory=relstm``."""
    seq_len: int = 100
    """The delay ``T`` the model trains at (copy/denoise feed ``T + 20`` steps)."""
    seq_len_min: int | None = None
    """Train each batch at a delay drawn uniformly from [seq_len_min, seq_len] (one ``T`` per
    batch, from the training stream) instead of at seq_len alone; null: seq_len. Evaluation
    and the target stay at seq_len. Not in the papers: an ablation for a model that learns
    the training delay itself (see ``experiments/supervised/RESULTS.md``)."""
    batch_size: int = 128
    """Sequences per update."""
    iterations: int = 2000
    """Total updates (the maximum when a target is set); a resumed run continues up to it."""
    target: float | None = None
    """Stop at the first evaluation whose score at seq_len meets this: recall accuracy >= target
    (copy, denoise), MSE <= target (adding). null trains all iterations."""
    confirm_batches: int = 0
    """When the evaluation batch meets the target, stop only if the pooled score of this many
    fresh batches at seq_len (eval_batch_size each, drawn from generators no evaluation uses)
    meets it too; else train on. Stopping at the first of many noisy evaluations to cross the
    line biases the reported score upward; the fresh batches do not share that bias. 0: the
    evaluation batch alone decides. At most 100. May change when a run resumes."""
    lr: float = 2e-4
    """Learning rate (the ReLSTM paper's copy/denoise setting)."""
    optimizer: OptimizerName = OptimizerName.adam
    """adam, rmsprop or sgd."""
    weight_decay: float = 0.0
    """L2 regularisation, as the optimizer's weight_decay (TARNN's Table 4)."""
    grad_clip: float | None = 1.0
    """Max global gradient norm; null disables clipping."""
    seed: int = 0
    """Seeds the weights, the training stream and the evaluation batches."""
    device: str = "auto"
    """auto, cpu, cuda or cuda:N; the data is generated on this device."""
    amp: bool = False
    """bf16 autocast for the forward pass."""
    flush_denormal: bool = False
    """Flush subnormal floats (below 1.2e-38 in float32) to zero in the CPU's arithmetic
    (torch.set_flush_denormal). A state that decays towards zero over a long sequence can fill
    the computation with them, which most x86 CPUs compute many times slower: TARNN on adding
    at T = 750 ran 2 to 6 times faster flushed late in training (docs/performance.md). It
    changes the arithmetic, so a run resumes only with the value it started with. false: IEEE
    arithmetic, PyTorch's default. No effect on a CUDA device."""
    eval_seq_lens: list[int] = field(default_factory=list)
    """Further delays ``T`` to evaluate at (transfer-copy: 200, 400, 2000, 5000)."""
    eval_memory: dict[str, Any] = field(default_factory=dict)
    """Memory hyperparameters overridden for the evaluations at eval_seq_lens, which must not
    change the weights. A cell's :attr:`~rlmem.cells.base.Cell.episode_bound` left out here is
    raised to the longest of those sequences where it is shorter (MemLSTM's capacity: 2020 at
    T = 2000 on transfer-copy, full attention), said and recorded in the run's config; e.g.
    ``+eval_memory.capacity=120`` keeps the training window instead."""
    eval_batch_size: int = 256
    """Sequences in the fixed evaluation batch of each ``T``."""
    eval_every: int = 100
    """Evaluate at seq_len every this many updates, and at the end (the target is checked
    there)."""
    transfer_every: int | None = None
    """Evaluate at eval_seq_lens every this many updates (a multiple of eval_every), and at the
    end; null: only at the end. Long transfer lengths (T=5000) cost far more than training
    steps, so the papers' curves are drawn at seq_len."""
    log_every: int = 10
    """Write a row of progress.csv / TensorBoard every this many updates."""
    checkpoint_every: int = 100
    """Checkpoint every this many updates, and at the end."""
    warm_start: str | None = None
    """A finished or unfinished run's directory (or its checkpoint file) whose model weights
    this run starts from, for a curriculum: train at a short T, then continue at a longer one.
    Only the weights come over; the optimizer, data stream and iteration count start afresh.
    Its task and memory must equal this run's. Ignored when this run resumes its own
    checkpoint."""
    run: str | None = None
    """A copy run's directory to evaluate instead of training (task=transfer_copy): its model
    at its own T and at eval_seq_lens, on the evaluation batches a run of its seed uses; nothing
    is trained, and nothing is written, into that run or elsewhere."""
    figures: bool = True
    """Write the PNG figures into the run directory at the end."""
    progress_bar: bool = True
    """Show a tqdm progress bar."""


RUN_NAME = "supervised_run_name"
"""The resolver of the default run directory: ``${runs_root:runs/supervised}/
${supervised_run_name:}``."""

NAMING = RunNaming(
    keys=("task", "memory", "seq_len_min", "batch_size", "lr", "optimizer", "weight_decay",
          "grad_clip", "amp", "flush_denormal", "eval_seq_lens", "eval_memory", "target",
          "warm_start"),
    in_path=frozenset({"task.name", "memory.name"}))
"""What tells two supervised runs of one task, delay and seed apart: every key a checkpoint
must share to be resumed (``rlmem.supervised.RESUME_SECTIONS`` but ``seq_len`` and ``seed``,
which the path shows) and what changes the run's results (the evaluated delays and memory,
the target, a warm start)."""


def supervised_run_name(label: str | None = None, *, _root_: DictConfig) -> str:
    """``<task>/<label>_T<seq_len>[+<key>-<value>...]_seed<seed>``: the default run directory
    below the runs root (:mod:`rlmem.schema.run_names`); ``<task>`` is the ``task=`` chosen
    (``transfer_copy``), outside a Hydra application the task's name."""
    task = str(_root_.task.name)
    choice = task_choice(task)
    defaults = {**schema_defaults(SupervisedConfig), **cell_defaults(_root_),
                **task_file_defaults(choice)}
    if task in TASK_SCHEMAS:
        defaults.update(schema_defaults(TASK_SCHEMAS[task], "task."))
    name, shown = label_and_differences(_root_, NAMING, defaults, label or None)
    label = labelled(f"{name}_T{_root_.seq_len}", folder_settings(shown))
    return f"{choice}/{label}_seed{_root_.seed}"


def register_supervised_configs() -> None:
    """Store ``supervised_schema``, ``schema/task/<name>`` and ``memory/<cell>``, and register
    the ``runs_root`` and ``supervised_run_name`` resolvers of the default ``run_dir``."""
    register_memory_configs()
    register_runs_root()
    if not OmegaConf.has_resolver(RUN_NAME):
        OmegaConf.register_new_resolver(RUN_NAME, supervised_run_name)
    store = ConfigStore.instance()
    store.store(name="supervised_schema", node=SupervisedConfig)
    for name, schema in TASK_SCHEMAS.items():
        store.store(group="schema/task", name=name, node=schema)


def check_supervised_config(cfg: DictConfig) -> None:
    """Raise a :class:`ValueError` naming the key when a value is out of range.

    Types are checked by the schema; this checks what a type cannot say (positive sizes, ...).
    The task checks ``seq_len`` and ``eval_seq_lens`` against its own minimum. A key that no
    schema knows (added with ``+``) is refused first
    (:func:`~rlmem.schema.known_keys.check_known_keys`).
    """
    check_known_keys(cfg, "rlmem.supervised")
    positive = ("batch_size", "iterations", "eval_batch_size", "eval_every", "log_every",
                "checkpoint_every")
    for key in positive:
        if cfg[key] <= 0:
            raise ValueError(f"{key} must be positive, got {cfg[key]}")
    check_seed(cfg.seed)
    if not cfg.lr > 0:
        raise ValueError(f"lr must be positive, got {cfg.lr}")
    if not cfg.weight_decay >= 0:
        raise ValueError(f"weight_decay must be non-negative, got {cfg.weight_decay}")
    transfer_every = cfg.get("transfer_every")
    if transfer_every is not None and (transfer_every <= 0 or transfer_every % cfg.eval_every):
        raise ValueError(f"transfer_every must be a positive multiple of eval_every "
                         f"({cfg.eval_every}) or null, got {transfer_every}")
    if cfg.grad_clip is not None and not cfg.grad_clip > 0:
        raise ValueError(f"grad_clip must be positive or null, got {cfg.grad_clip}")
    confirm_batches = cfg.get("confirm_batches", 0)
    if not 0 <= confirm_batches <= MAX_CONFIRM_BATCHES:
        raise ValueError(f"confirm_batches must be in [0, {MAX_CONFIRM_BATCHES}], got "
                         f"{confirm_batches}")
    seq_len_min = cfg.get("seq_len_min")
    if seq_len_min is not None and not 0 < seq_len_min <= cfg.seq_len:
        raise ValueError(f"seq_len_min must be null or in [1, seq_len={cfg.seq_len}] (the "
                         f"training delays are drawn from [seq_len_min, seq_len]), got "
                         f"{seq_len_min}")
