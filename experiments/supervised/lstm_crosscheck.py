"""Is rlmem's LSTM slow to learn copy, or is copy slow for any LSTM? A cross-check.

    OMP_NUM_THREADS=1 python -m experiments.supervised.lstm_crosscheck            # 3,000 its
    OMP_NUM_THREADS=1 python -m experiments.supervised.lstm_crosscheck --iterations 6000

rlmem's ``lstm`` learns copy slowly: the curriculum's first stage
(``kerg2020_table1_transfer_copy_lstm_curriculum_T20``: T = 20, lr 1e-3) recalls 39–44% after
12,000 iterations, where relstm recalls 98.5–100%. This script trains a plain ``torch.nn.LSTM``
with a linear read-out on copy data it makes itself, written from the task's definition
(Arjovsky et al., 2016) without any of rlmem's code, at that preset's settings (composed from
the preset, so they cannot drift from it): the delay, batch size, hidden size, Adam and its lr,
the global gradient-norm clip, and the cross-entropy over every step. Every ``--every``
iterations it prints its cross-entropy and recall on a held-out batch of its own, beside what
the preset's committed seed-0 run logged at the same iteration (``progress.csv``).

The two use different random streams and initial weights, so they agree only as curves: a
bug in rlmem's task, loss or cell would show as a plain LSTM that learns much faster. Nothing
is written.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig
from torch import Tensor, nn

from experiments.supervised.rows import searchpath
from rlmem.runs.progress import read_progress
from rlmem.schema.memory import CONF_DIR
from rlmem.schema.supervised import register_supervised_configs

PRESET = "kerg2020_table1_transfer_copy_lstm_curriculum_T20"
RUN = Path(__file__).resolve().parent / "runs" / PRESET / "seed0" / "progress.csv"
SYMBOLS, BLANK, DELIMITER, RECALL = 8, 8, 9, 10
"""Copy as its papers define it: 10 symbols from 0–7, blanks (8), one delimiter (9)."""
HELD_OUT = 256


def copy_batch(batch: int, delay: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """Inputs and targets ``(delay + 20, batch)``: the symbols, ``delay - 1`` blanks, the
    delimiter, 10 blanks; the targets are blanks, then the symbols in order."""
    length = delay + 2 * RECALL
    data = torch.randint(0, SYMBOLS, (RECALL, batch), generator=generator)
    inputs = torch.full((length, batch), BLANK)
    inputs[:RECALL] = data
    inputs[delay + RECALL - 1] = DELIMITER
    targets = torch.full((length, batch), BLANK)
    targets[-RECALL:] = data
    return inputs, targets


class PlainLSTM(nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.lstm = nn.LSTM(DELIMITER + 1, hidden)
        self.readout = nn.Linear(hidden, SYMBOLS + 1)

    def forward(self, inputs: Tensor) -> Tensor:
        return self.readout(self.lstm(F.one_hot(inputs, DELIMITER + 1).float())[0])


def measure(model: PlainLSTM, batch: tuple[Tensor, Tensor]) -> tuple[float, float]:
    """Cross-entropy per step, and the share of the recalled symbols predicted right."""
    inputs, targets = batch
    with torch.no_grad():
        logits = model(inputs)
    ce = F.cross_entropy(logits.flatten(0, 1), targets.flatten()).item()
    recall = (logits[-RECALL:].argmax(-1) == targets[-RECALL:]).float().mean().item()
    return ce, recall


def preset_config() -> DictConfig:
    register_supervised_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="supervised", overrides=[searchpath(), f"+preset={PRESET}"])


def logged(path: Path, delay: int) -> dict[int, tuple[float, float]]:
    """The committed run's held-out cross-entropy and recall at ``delay`` by iteration."""
    if not path.exists():
        return {}
    return {int(row.number("iteration")): (row.number(f"eval/ce@T{delay}"),
                                           row.number(f"eval/accuracy@T{delay}"))
            for row in read_progress(path) if row.has(f"eval/accuracy@T{delay}")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=3000)
    parser.add_argument("--every", type=int, default=250)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    cfg = preset_config()
    if str(cfg.optimizer).rpartition(".")[2] != "adam" or cfg.memory.forget_bias != 0.0:
        raise SystemExit(f"{PRESET} no longer trains with Adam at forget-gate bias 0, as "
                         f"torch's nn.LSTM starts; update this cross-check")
    torch.manual_seed(args.seed)
    generator = torch.Generator().manual_seed(args.seed)
    held_out = copy_batch(HELD_OUT, cfg.seq_len, torch.Generator().manual_seed(10_000 + args.seed))
    model = PlainLSTM(cfg.memory.hidden_size)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    theirs = logged(RUN, cfg.seq_len)
    memoryless = RECALL * math.log(SYMBOLS) / (cfg.seq_len + 2 * RECALL)
    print(f"{PRESET}: T = {cfg.seq_len}, batch {cfg.batch_size}, hidden "
          f"{cfg.memory.hidden_size}, Adam lr {cfg.lr:g}, clip {cfg.grad_clip}; memoryless CE "
          f"{memoryless:.4f}")
    print("| iteration | plain nn.LSTM: CE | recall | rlmem lstm (seed 0 run): CE | recall |")
    print("|---:|---:|---:|---:|---:|")
    start = time.process_time()
    for iteration in range(1, args.iterations + 1):
        inputs, targets = copy_batch(cfg.batch_size, cfg.seq_len, generator)
        loss = F.cross_entropy(model(inputs).flatten(0, 1), targets.flatten())
        optimizer.zero_grad()
        loss.backward()
        if cfg.grad_clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        optimizer.step()
        if iteration % args.every == 0:
            ce, recall = measure(model, held_out)
            logged_ce, logged_recall = (f"{theirs[iteration][0]:.4f}",
                                        f"{theirs[iteration][1]:.1%}") \
                if iteration in theirs else ("—", "—")
            print(f"| {iteration} | {ce:.4f} | {recall:.1%} | {logged_ce} | {logged_recall} |",
                  flush=True)
    print(f"CPU {time.process_time() - start:.0f} s")


if __name__ == "__main__":
    main()
