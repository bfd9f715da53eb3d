"""The distribution as pip builds it: every package of rlmem, rlmem.agents and rlmem.envs is in
the wheel (found by setup.py, listed nowhere), with the package's data, and nothing of the
repository's lab notebook (experiments/, benchmarks/, tests/)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"rlmem": ROOT / "rlmem", "rlmem/agents": ROOT / "agents", "rlmem/envs": ROOT / "envs"}
"""Where each installed package's source lives in the repository."""


def _not_source(folder: str, names: list[str]) -> list[str]:
    """What the copy leaves out: the environment, build outputs and the experiments' run data
    (large, and by name never in a package)."""
    skipped = {".git", ".venv", "build", "__pycache__", ".mypy_cache", ".ruff_cache"}
    in_experiments = "experiments" in Path(folder).relative_to(ROOT).parts
    return [name for name in names if name in skipped or name.endswith(".egg-info")
            or (in_experiments and name.startswith("runs"))]


def test_the_wheel_holds_every_package_and_no_experiment_data(tmp_path: Path) -> None:
    # Built from a copy of the tree: setuptools writes build/ and *.egg-info beside the source.
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=_not_source)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(tmp_path), str(source)], check=True, capture_output=True,
                   timeout=300)
    (wheel,) = tmp_path.glob("rlmem-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    expected = {f"{prefix}/{init.parent.relative_to(folder)}/__init__.py".replace("/./", "/")
                for prefix, folder in FOLDERS.items() for init in folder.rglob("__init__.py")}
    assert expected <= set(names), sorted(expected - set(names))
    assert any(name.startswith("rlmem/conf/preset/") and name.endswith(".yaml")
               for name in names)
    assert not [name for name in names
                if name.split("/")[0] in ("experiments", "benchmarks", "tests")
                or name.endswith((".pt", ".log", ".csv"))]
