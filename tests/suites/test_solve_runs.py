"""experiments/fast_trainer/solve_runs.py with relative paths, as a command line gives them:
the run starts in another folder, so every path it is given must name the same place there."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from experiments.fast_trainer import solve_runs


def test_a_relative_run_folder_and_code_reach_the_run_as_absolute_paths(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    seen: dict[str, Any] = {}

    def run_child(command: list[str], **options: Any) -> int:
        seen.update(command=command, **options)
        run_dir = Path(next(arg for arg in command if arg.startswith("run_dir="))
                       .removeprefix("run_dir="))
        run_dir.mkdir(parents=True)
        (run_dir / "progress.csv").write_text("frames\n2048\n4096\n")
        return 0

    monkeypatch.setattr(solve_runs, "run_child", run_child)
    solve = solve_runs.train_to_threshold(["env=DoorKey-5x5"], Path("runs/seed3"),
                                          code=Path("reference_code/package"))
    assert seen["cwd"] != str(tmp_path)  # the run starts elsewhere
    assert f"run_dir={tmp_path / 'runs' / 'seed3'}" in seen["command"]
    assert seen["env"]["PYTHONPATH"] == str(tmp_path / "reference_code" / "package")
    assert solve.frames == 4096 and (tmp_path / "runs" / "seed3" / solve_runs.OUTCOME).exists()


def test_a_packaged_commit_in_a_relative_folder_links_to_its_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repository = tmp_path / "repository"
    for folder in ("rlmem", "agents", "envs"):
        (repository / folder).mkdir(parents=True)
        (repository / folder / "__init__.py").write_text(f"NAME = {folder!r}\n")
    git = ["git", "-C", str(repository), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git[:3], "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "code"], check=True)
    monkeypatch.chdir(tmp_path)
    package = solve_runs.packaged_commit(Path("repository"), "HEAD", Path("copies/HEAD"))
    assert package.is_absolute()
    for name in ("agents", "envs"):
        linked = package / "rlmem" / name / "__init__.py"
        assert linked.read_text() == f"NAME = {name!r}\n"
    assert (package / "rlmem" / "__init__.py").read_text() == "NAME = 'rlmem'\n"
