"""Which of a run's stored evaluations the suites' tables count.

``python -m rlmem.evaluate`` names each report by its settings (``eval/<env>_sampled_100ep_seed0
.json``, ...; runs from before rlmem 0.2 hold ``eval/<env>.json``), so a run can hold several
evaluations on one env: the suite's, a greedy look, a quick two-episode check. The tables count
one per env, chosen here once for every suite: sampled actions (the papers' protocol; greedy is
another measure), of the model at the given frames, the most episodes. Two candidates of as many
episodes (e.g. with and without ``eval_memory``) would give a seed two scores, so they are
refused by name. Evaluations counted the way rl-starter-files counts them (``first_to_end``, a
sample biased toward short episodes) are another measure too, read only where asked for.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from experiments.common.run_config import read_report


def suite_evaluations(run: Path, frames: float | None = None,
                      first_to_end: bool = False) -> dict[str, dict[str, Any]]:
    """Per env, the report of ``run`` the tables count (module docstring); only reports of the
    model at ``frames`` when it is given; with ``first_to_end``, those counted so instead.

    Raises:
        ValueError: two sampled reports of as many episodes on one env.
        UnreadableRecordError: a report is not one rlmem wrote (cut short, altered).
    """
    chosen: dict[str, tuple[Path, dict[str, Any]]] = {}
    for found in sorted((run / "eval").glob("*.json")):
        data = read_report(found, ("env",))
        if data.get("argmax", False) or (frames is not None and data["frames"] != frames) \
                or data.get("first_to_end", False) != first_to_end:
            continue
        held = chosen.get(data["env"])
        if held is not None and held[1]["episodes"] == data["episodes"]:
            raise ValueError(f"{run}: two evaluations of {data['episodes']} episodes on "
                             f"{data['env']} ({held[0].name}, {found.name}); move one aside")
        if held is None or data["episodes"] > held[1]["episodes"]:
            chosen[data["env"]] = (found, data)
    return {env: data for env, (_, data) in chosen.items()}


def suite_evaluation(run: Path, env: str) -> dict[str, Any] | None:
    """The report of ``run`` on ``env`` the tables count, or None when it has none."""
    return suite_evaluations(run).get(env)
