"""Every RESULTS.md says what its committed run data say.

Two checks per suite:

- the aggregator, run in memory on the committed data, writes the committed RESULTS.md byte
  for byte (a hand edit, or data changed without rerunning the aggregator, fails);
- the headline numbers, recomputed here from the raw run files without the aggregators or
  :mod:`experiments.common.report` (per-seed values, the IQM as ``scipy.stats.trim_mean`` would
  take it, "k of n"), each rounded once from the exact stored number, are the ones the file
  prints.
"""

from __future__ import annotations

import json
from decimal import ROUND_HALF_EVEN, Decimal

import pytest
from locations import REPO

EXPERIMENTS = REPO / "experiments"


def exact(value: float, digits: int, scale: int = 0) -> str:
    """``value · 10**scale`` rounded once to ``digits`` decimals, half to even, in exact
    decimal arithmetic (independent of the aggregators' float formatting)."""
    quantum = Decimal(1).scaleb(-digits)
    return str(Decimal(value).scaleb(scale).quantize(quantum, rounding=ROUND_HALF_EVEN))


def pct(value: float) -> str:
    return exact(value, 1, 2) + "%"


def interquartile_mean(values: list[float]) -> float:
    """The mean after cutting ``floor(n / 4)`` values at each end (scipy's trim_mean(x, 0.25))."""
    ordered = sorted(values)
    cut = len(ordered) // 4
    kept = ordered[cut:len(ordered) - cut]
    return sum(kept) / len(kept)


def rows(text: str, header: str) -> dict[str, list[str]]:
    """The Markdown table whose header line starts with ``header``: its cells by the first
    column."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    found = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        found[cells[0]] = cells
    return found


# --- byte for byte ---------------------------------------------------------------------------

def test_memory_results_are_regenerated_byte_for_byte() -> None:
    from experiments.memory import aggregate
    assert aggregate.render(aggregate.collect()) == \
        (EXPERIMENTS / "memory" / "RESULTS.md").read_text()


def test_transfer_results_are_regenerated_byte_for_byte() -> None:
    from experiments.transfer import aggregate
    assert aggregate.render() == (EXPERIMENTS / "transfer" / "RESULTS.md").read_text()


def test_supervised_results_are_regenerated_byte_for_byte() -> None:
    from experiments.supervised import aggregate
    out = EXPERIMENTS / "supervised" / "RESULTS.md"
    assert aggregate.render(aggregate.collect(aggregate.RUNS), out) == out.read_text()


def test_doorkey_results_are_regenerated_byte_for_byte() -> None:
    from experiments.doorkey import summarize
    here = EXPERIMENTS / "doorkey"
    summaries = json.loads((here / "summary.json").read_text())
    assert summarize.render(summaries) == (here / "RESULTS.md").read_text()


# --- the headline numbers, recomputed --------------------------------------------------------

def memory_eval(label: str, env: str) -> list[dict[str, float]]:
    """The final-checkpoint evaluations of a memory-suite label, in seed order."""
    found = []
    for run in sorted((EXPERIMENTS / "memory" / "runs" / "MemoryS7" / label).glob("seed*")):
        frames = [line.split(",") for line in (run / "progress.csv").read_text().splitlines()]
        header = frames[0]
        last = [row for row in frames[1:] if row[header.index("return_recent")] not in ("", "nan")]
        final = float(last[-1][header.index("frames")])
        # eval/<env>.json from before the files were named by their settings, else the
        # suite's own: <env>_sampled_<n>ep_seed0.json (",capacity=<n>" with eval_memory)
        paths = [run / "eval" / f"{env}.json",
                 *sorted((run / "eval").glob(f"{env}_sampled_*ep_seed0*.json"))]
        reports = [json.loads(path.read_text()) for path in paths if path.exists()]
        final_reports = [report for report in reports if report["frames"] == final]
        assert len(final_reports) <= 1, f"{run}: several evaluations of {env}"
        found += final_reports
    return found


@pytest.mark.parametrize("label", ["lstm", "gru", "memlstm", "relstm"])
def test_memory_headline_rows(label: str) -> None:
    text = (EXPERIMENTS / "memory" / "RESULTS.md").read_text()
    row = rows(text, "| cell | seeds | frames to 0.9")[label]
    s7 = [report["return_mean"] for report in memory_eval(label, "MemoryS7")]
    s13 = [report["return_mean"] for report in memory_eval(label, "MemoryS13")]
    assert row[4] == ", ".join(exact(value, 2) for value in s7)
    assert row[5].split(" [")[0] == exact(interquartile_mean(s7), 2)
    assert row[7] == f"{sum(value >= 0.9 for value in s7)} of {len(s7)}"
    assert row[8] == ", ".join(exact(value, 2) for value in s13)
    assert row[9].split(" [")[0] == exact(interquartile_mean(s13), 2)


def test_transfer_doorkey16_row() -> None:
    """The paper's key claim: zero-shot DoorKey-16x16, each cell's IQM over its seeds."""
    text = (EXPERIMENTS / "transfer" / "RESULTS.md").read_text()
    row = rows(text, "| Environment | lstm")["DoorKey-16x16"]
    for column, memory in enumerate(("lstm", "memlstm", "relstm"), start=1):
        runs = sorted((EXPERIMENTS / "transfer" / "runs" / "DoorKey-5x5" / memory).glob("seed*"))
        values = [json.loads((run / "eval" / "DoorKey-16x16.json").read_text())["return_mean"]
                  for run in runs]
        assert row[column].split(" [")[0] == exact(interquartile_mean(values), 2), memory


SUPERVISED = EXPERIMENTS / "supervised"


def fresh(preset: str, seed: int) -> float | None:
    """A run's pooled fresh-batch score, if its check is current."""
    checks = json.loads((SUPERVISED / "fresh_eval.json").read_text())["runs"]
    check = checks.get(f"{preset}/seed{seed}")
    results = SUPERVISED / "runs" / preset / f"seed{seed}" / "results.json"
    if check is None or not results.exists() or \
            check["iterations"] != json.loads(results.read_text())["iterations"]:
        return None
    return float(check["pooled"])


def finished(preset: str) -> dict[int, dict]:
    """The results.json of each seed of ``preset`` that met its target or spent its budget."""
    found = {}
    for path in sorted((SUPERVISED / "runs" / preset).glob("seed*/results.json")):
        results = json.loads(path.read_text())
        config = (path.parent / "config.yaml").read_text()
        budget = int(next(line.split(":")[1] for line in config.splitlines()
                          if line.startswith("iterations:")))
        if results.get("converged_at") is not None or results.get("diverged") or \
                results["iterations"] >= budget:
            found[int(path.parent.name.removeprefix("seed"))] = results
    return found


@pytest.mark.parametrize("preset", ["kerg2020_table1_transfer_copy_relstm_script",
                                    "kerg2020_table1_transfer_copy_lstm_chrono_script"])
def test_supervised_headline_seed_tables(preset: str) -> None:
    """Each finished seed's recall at every T (T = 100 on fresh batches), and whether it meets
    99% at every T; the claim's k of n."""
    text = (SUPERVISED / "RESULTS.md").read_text()
    runs = finished(preset)
    marker = "relstm at the script's settings" if "relstm" in preset else \
        "The LSTM at T = 100 with the chrono"
    table = rows(text[text.index(marker):], "| seed | state |")
    met = 0
    for seed, results in runs.items():
        row = table[str(seed)]
        scores = [fresh(preset, seed)] + [results["eval"][f"accuracy@T{T}"]
                                          for T in (200, 400, 2000, 5000)]
        assert scores[0] is not None, f"seed {seed} has no fresh-batch check"
        assert row[5:10] == [pct(score) for score in scores], seed
        meets = all(score >= 0.99 for score in scores)
        assert row[12] == ("yes" if meets else "no"), seed
        met += meets
    for seed in range(10):
        if seed not in runs:
            assert table[str(seed)][1] in ("not run", "in progress"), seed
    claims = rows(text, "| claim | the paper |")
    key = next(name for name in claims
               if name.startswith("ReLLSTM transfer-copy" if "relstm" in preset else "LSTM at"))
    assert claims[key][3].startswith(f"{met} of {len(runs)} seeds run") or \
        "chrono" in preset, claims[key][3]


def test_the_lstm_claim_is_on_fresh_batches() -> None:
    """The LSTM row's T = 100 figures are the fresh-batch ones, and its k of n counts them."""
    preset = "kerg2020_table1_transfer_copy_lstm_chrono_script"
    runs = finished(preset)
    scores = [fresh(preset, seed) for seed in runs]
    assert None not in scores
    text = (SUPERVISED / "RESULTS.md").read_text()
    row = rows(text, "| claim | the paper |")["LSTM at T = 100"]
    assert f"T = 100 (fresh batches): {', '.join(pct(s) for s in scores if s is not None)}" \
        in row[2]
    met = sum(s is not None and s >= 0.99 for s in scores)
    assert row[3].startswith(f"{met} of {len(runs)} seeds run")
    t5000 = [runs[seed]["eval"]["accuracy@T5000"] for seed in runs]
    assert f"T = 5000: {', '.join(pct(s) for s in t5000)}" in row[2]


def test_doorkey_rows() -> None:
    here = EXPERIMENTS / "doorkey"
    summaries = json.loads((here / "summary.json").read_text())
    table = rows((here / "RESULTS.md").read_text(), "| memory | seeds |")
    for memory in ("lstm", "relstm"):
        values = [s["transfer"]["return_mean"] for s in summaries if s["memory"] == memory]
        assert table[memory][5] == ", ".join(exact(v, 3) for v in values)
        assert table[memory][6].split(" [")[0] == exact(interquartile_mean(values), 3)
