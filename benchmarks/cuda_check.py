"""Our PPO and the supervised trainer on CUDA against the CPU, and against cuDNN's LSTM.

    python benchmarks/cuda_check.py --out cuda.md          # on a machine with a CUDA GPU

Three measurements, printed as markdown tables (and written to ``--out``):

- **PPO frames/s**, MiniGrid DoorKey-5x5, library defaults (the minigrid preset,
  ``frames_per_env = 128``, ``vectorization=sync``), for each cell and number of envs: whole
  updates (rollout and PPO update) with the model on the CPU and on CUDA, timed in turn, one
  update each, after one warm-up update each. Torch runs on one CPU thread in both columns.
- **Host synchronisations** of one CUDA update, counted with
  :func:`torch.cuda.set_sync_debug_mode` and split into the rollout and the PPO update, with
  the lines that cause them (the rollout needs one per step: the envs take the actions on the
  CPU).
- **Supervised copy iterations/s** at T = 100, hidden 128, batch 128 and 10 (``--batches``;
  the trainer's step: sample, forward, loss, backward, clip, finiteness check, Adam step): our
  cells through :class:`rlmem.tasks.model.SequenceModel` on one CPU thread, on CUDA eagerly and
  from a CUDA graph (:mod:`rlmem.tasks.cuda_graph`), and ``torch.nn.LSTM`` (cuDNN on CUDA) with
  the same one-hot input and read-out, all in the same run.

``--profile`` also writes the torch profiler's table of one CUDA PPO update and one supervised
iteration per cell.
"""

from __future__ import annotations

import argparse
import collections
import copy
import dataclasses
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
import torch.nn.functional as F
from omegaconf import OmegaConf
from torch import Tensor, nn

from rlmem.agents.ppo import PPOConfig
from rlmem.agents.ppo.collector import RolloutCollector
from rlmem.agents.ppo.model import ActorCritic
from rlmem.agents.ppo.presets import Preset, agent_values
from rlmem.agents.ppo.update import PPO
from rlmem.cells import cell_config, make_cell
from rlmem.cells.base import Aux
from rlmem.envs import make_vector_env
from rlmem.tasks.base import SequenceTask
from rlmem.tasks.cuda_graph import Computed, GraphedLoss, compute
from rlmem.tasks.model import SequenceModel
from rlmem.tasks.registry import make_task

ENV = "DoorKey-5x5"
SEQ_LEN, HIDDEN = 100, 128
"""The supervised measurement's copy T and hidden size (the batch is ``--batches``)."""


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclasses.dataclass
class Trainer:
    """One PPO run's pieces: ``collect`` then ``update`` make one update."""
    collect: Callable[[], object]
    update: Callable[[object], object]
    frames: int
    close: Callable[[], None]

    def step(self) -> int:
        self.update(self.collect())
        return self.frames


def ppo_trainer(memory: str, num_envs: int, device: torch.device) -> Trainer:
    torch.manual_seed(0)
    config = OmegaConf.structured(PPOConfig(**agent_values(Preset.minigrid)))
    envs = make_vector_env(ENV, num_envs)
    model = ActorCritic(envs.single_observation_space, envs.single_action_space,
                        OmegaConf.structured(cell_config(memory))).to(device)
    ppo = PPO(model, config)
    collector = RolloutCollector(envs, model, device, seed=0)
    return Trainer(lambda: collector.collect(config.frames_per_env, config.recurrence),
                   ppo.update,  # type: ignore[arg-type]
                   num_envs * config.frames_per_env, envs.close)


def ppo_rates(memory: str, num_envs: int, rounds: int,
              devices: list[torch.device]) -> dict[str, float]:
    """Frames/s of whole updates on each device, timed in turn after one warm-up each."""
    trainers = {str(device): (device, ppo_trainer(memory, num_envs, device))
                for device in devices}
    frames = dict.fromkeys(trainers, 0)
    seconds = dict.fromkeys(trainers, 0.0)
    try:
        for device, trainer in trainers.values():
            trainer.step()
            synchronize(device)
        for _ in range(rounds):
            for name, (device, trainer) in trainers.items():
                start = time.perf_counter()
                frames[name] += trainer.step()
                synchronize(device)
                seconds[name] += time.perf_counter() - start
    finally:
        for _, trainer in trainers.values():
            trainer.close()
    return {name: frames[name] / seconds[name] for name in trainers}


@contextmanager
def counted_syncs(counter: collections.Counter[str]) -> Iterator[None]:
    """Count the host synchronisations inside, by the Python line that caused each."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            yield
        finally:
            torch.cuda.set_sync_debug_mode("default")
    for warning in caught:
        if "synchroniz" in str(warning.message):
            counter[f"{Path(warning.filename).name}:{warning.lineno}"] += 1


def sync_report(memory: str, num_envs: int, device: torch.device) -> list[str]:
    trainer = ppo_trainer(memory, num_envs, device)
    try:
        trainer.step()  # warm-up
        rollout_syncs: collections.Counter[str] = collections.Counter()
        update_syncs: collections.Counter[str] = collections.Counter()
        with counted_syncs(rollout_syncs):
            rollout = trainer.collect()
        with counted_syncs(update_syncs):
            trainer.update(rollout)
    finally:
        trainer.close()
    lines = [f"### Host synchronisations, {memory}, {num_envs} envs, one update "
             f"({trainer.frames // num_envs} steps)", ""]
    for phase, counter in (("rollout", rollout_syncs), ("update", update_syncs)):
        lines.append(f"- {phase}: {sum(counter.values())} in all")
        lines += [f"  - {where}: {count}" for where, count in counter.most_common(12)]
    return lines


class CudnnSequence(nn.Module):
    """``torch.nn.LSTM`` (cuDNN on CUDA) with :class:`SequenceModel`'s one-hot input and
    read-out."""

    def __init__(self, input_size: int, hidden_size: int, output_size: int) -> None:
        super().__init__()
        self.input_size = input_size
        self.lstm = nn.LSTM(input_size, hidden_size)
        self.readout = nn.Linear(hidden_size, output_size)

    def forward(self, inputs: Tensor) -> Tensor:
        x = F.one_hot(inputs, self.input_size).to(self.readout.weight.dtype)
        return self.readout(self.lstm(x)[0])


def supervised_step(model: nn.Module, task: SequenceTask, device: torch.device, batch_size: int,
                    graph: bool = False, seq_len: int = SEQ_LEN) -> Callable[[], None]:
    """The supervised trainer's step (``SupervisedTrainer.train_step``, less its metrics):
    sample, forward, loss, backward, clipping, the finiteness check, Adam; with ``graph``,
    the forward to clipping replayed from a CUDA graph (:mod:`rlmem.tasks.cuda_graph`)."""
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-4)
    generator = torch.Generator(device=device).manual_seed(0)
    graphed: list[GraphedLoss] = []

    def step() -> None:
        batch = task.sample(batch_size, seq_len, generator)
        if isinstance(model, SequenceModel) and graph and not graphed:
            recorded, computed = GraphedLoss.capture(model, task, batch, 1.0)
            if recorded is None:
                raise RuntimeError("the CUDA graph could not be used")
            graphed.append(recorded)
        elif graphed:
            computed = graphed[0](batch)
        elif isinstance(model, SequenceModel):
            optimizer.zero_grad(set_to_none=True)
            computed = compute(model, task, batch, 1.0)
        else:  # cuDNN
            optimizer.zero_grad(set_to_none=True)
            outputs = model(batch.inputs)
            loss = task.loss(outputs, batch)
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            computed = Computed(loss.detach(), grad_norm, outputs.detach(), Aux())
        if not bool(torch.isfinite(computed.loss) & torch.isfinite(computed.grad_norm)):
            raise FloatingPointError("non-finite loss")
        optimizer.step()

    return step


def supervised_models(task: SequenceTask, cells: list[str]) -> dict[str, nn.Module]:
    torch.manual_seed(0)
    models: dict[str, nn.Module] = {
        name: SequenceModel(make_cell(name, input_size=task.input_size, hidden_size=HIDDEN),
                            task.output_size, task.categorical) for name in cells}
    models["torch.nn.LSTM"] = CudnnSequence(task.input_size, HIDDEN, task.output_size)
    return models


def supervised_rates(cells: list[str], batch_size: int, rounds: int,
                     per_round: int) -> dict[str, float]:
    """Iterations/s of each model's step: on one CPU thread, on CUDA eagerly, and (ours) on
    CUDA from a CUDA graph; timed in turn (``per_round`` steps each)."""
    task = make_task("copy")
    steps: dict[str, Callable[[], None]] = {}
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    for name, net in supervised_models(task, cells).items():
        steps[f"{name}, cpu"] = supervised_step(copy.deepcopy(net), task, cpu, batch_size)
        steps[name] = supervised_step(net.to(cuda), task, cuda, batch_size)
        if isinstance(net, SequenceModel):
            twin = copy.deepcopy(net)
            steps[f"{name}, CUDA graph"] = supervised_step(twin, task, cuda, batch_size,
                                                           graph=True)
    seconds = dict.fromkeys(steps, 0.0)
    for step in steps.values():
        for _ in range(3):
            step()
    synchronize(cuda)
    for _ in range(rounds):
        for name, step in steps.items():
            start = time.perf_counter()
            for _ in range(per_round):
                step()
            synchronize(cuda)
            seconds[name] += time.perf_counter() - start
    return {name: rounds * per_round / seconds[name] for name in steps}


def profile_tables(cells: list[str], device: torch.device) -> list[str]:
    from torch.profiler import ProfilerActivity, profile

    lines = []
    task = make_task("copy")
    models = supervised_models(task, cells)
    for name in cells:
        trainer = ppo_trainer(name, 16, device)
        try:
            trainer.step()
            rollout = trainer.collect()
            synchronize(device)
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                trainer.update(rollout)
                synchronize(device)
        finally:
            trainer.close()
        lines += [f"### PPO update (no rollout), {name}, 16 envs", "```",
                  prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=20),
                  "```"]
        step = supervised_step(models[name].to(device), task, device, 128)
        step()
        synchronize(device)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            step()
            synchronize(device)
        lines += [f"### Supervised copy step, {name}, batch 128", "```",
                  prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=20),
                  "```"]
    return lines


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(row) + " |" for row in rows)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cells", nargs="+", default=["lstm", "relstm"])
    parser.add_argument("--num-envs", nargs="+", type=int, default=[16, 64])
    parser.add_argument("--rounds", type=int, default=4, help="timed PPO updates per column")
    parser.add_argument("--batches", nargs="+", type=int, default=[128, 10],
                        help="supervised batch sizes (128: Table 5's; 10: the authors' script)")
    parser.add_argument("--supervised-rounds", type=int, default=5)
    parser.add_argument("--supervised-per-round", type=int, default=10)
    parser.add_argument("--no-ppo", action="store_true", help="the supervised tables only")
    parser.add_argument("--profile", type=Path, help="write profiler tables to this file")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        parser.error("no CUDA device: this benchmark compares the CPU with CUDA")
    torch.set_num_threads(1)
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    lines: list[str] = []

    def emit(new: list[str]) -> None:
        lines.extend(new)
        print("\n".join(new), flush=True)
        if args.out is not None:
            args.out.write_text("\n".join(lines) + "\n")

    emit([f"# {torch.cuda.get_device_name(cuda)}, torch {torch.__version__}, torch on 1 CPU "
          "thread"])
    for batch_size in args.batches:
        emit(["", f"## Supervised copy T={SEQ_LEN}, hidden {HIDDEN}, batch {batch_size}: "
              "iterations/s", ""])
        rates = supervised_rates(args.cells, batch_size, args.supervised_rounds,
                                 args.supervised_per_round)
        cudnn = rates["torch.nn.LSTM"]
        emit(table(["model", "it/s", "÷ cuDNN on CUDA"],
                   [[name, f"{rate:.1f}", f"{rate / cudnn:.2f}"]
                    for name, rate in rates.items()]))
    if args.no_ppo:
        return
    emit(["", "## PPO frames/s, DoorKey-5x5, library defaults, sync", ""])
    rows = []
    for memory in args.cells:
        for num_envs in args.num_envs:
            rate = ppo_rates(memory, num_envs, args.rounds, [cpu, cuda])
            rows.append([memory, str(num_envs), f"{rate['cpu']:.0f}", f"{rate['cuda']:.0f}",
                         f"{rate['cuda'] / rate['cpu']:.2f}"])
            print(rows[-1], flush=True)
    emit(table(["cell", "envs", "cpu", "cuda", "cuda ÷ cpu"], rows))
    for memory in args.cells:
        emit(["", *sync_report(memory, 16, cuda)])
    if args.profile is not None:
        args.profile.write_text("\n".join(profile_tables(args.cells, cuda)) + "\n")


if __name__ == "__main__":
    main()
