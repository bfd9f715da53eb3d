"""Issue 53, "where files land": nothing rlmem writes lands where it should not. Each test drives
the real CLI in a temporary folder and asserts the files (what exists, contents, modes) and the
one-paragraph message."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cli_runner import TINY_PPO, run_cli
from fault_runs import (
    TINY_SUPERVISED,
    copy_run,
    files,
    fill,
    mode,
    one_paragraph,
    remount_read_only,
    small_file_system,
    train_tiny,
    with_umask,
)
from omegaconf import DictConfig, OmegaConf

import rlmem.evaluate as evaluate_module
from rlmem.evaluate import evaluate_run, report_path
from rlmem.runs import load_checkpoint
from rlmem.runs.device import resolve_device
from rlmem.runs.directory import MARKER, PREVIOUS, claim_run_dir, move_aside
from rlmem.runs.errors import RunDirectoryError
from rlmem.runs.lock import RunLock
from rlmem.runs.multirun import SWEEP_MARKER, claim_sweep_dir
from rlmem.schema.evaluate import EvaluateConfig

EVAL = ["env=DoorKey-5x5", "episodes=1", "num_envs=1", "progress_bar=false"]
"""A quick evaluation: one episode of the training env."""

SWEEP = [*TINY_PPO, "memory.hidden_size=8", "frames=32", "seed=0"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train_tiny(tmp_path_factory.mktemp("trained"))


# --- a sweep's root ---------------------------------------------------------------------------

def test_a_sweep_never_replaces_a_users_multirun_yaml(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "multirun.yaml").write_text("my: notes\n")
    result = run_cli("rlmem.train", "-m", *SWEEP, f"hydra.sweep.dir={mine}",
                     f"run_dir={tmp_path / 'runs'}/s${{seed}}", cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert (f"rlmem.train: error: hydra.sweep.dir={mine} holds multirun.yaml, which is not one "
            "rlmem wrote") in result.stderr
    assert "no job was started" in result.stderr and "force=true" in result.stderr
    assert sorted(path.name for path in mine.iterdir()) == ["multirun.yaml"]
    assert (mine / "multirun.yaml").read_text() == "my: notes\n"
    assert not (tmp_path / "runs").exists()


def test_a_sweep_marks_its_root_and_takes_it_again(tmp_path: Path) -> None:
    root = tmp_path / "sweep"
    result = run_cli("rlmem.train", "-m", *SWEEP, f"hydra.sweep.dir={root}",
                     f"run_dir={root}/s${{seed}}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (root / SWEEP_MARKER).is_file() and (root / "multirun.yaml").is_file()
    assert load_checkpoint(root / "s0" / "checkpoint.pt").count("frames") == 32
    (root / SWEEP_MARKER).unlink()  # a root of an rlmem before the marker: its record is known
    claim_sweep_dir(sweep_config(root))
    assert (root / SWEEP_MARKER).is_file()
    (root / "multirun.yaml").unlink()
    (root / "multirun.yaml").symlink_to(tmp_path / "elsewhere.yaml")
    with pytest.raises(SystemExit):  # a link is refused whatever the force
        claim_sweep_dir(sweep_config(root, force=True))
    assert not (tmp_path / "elsewhere.yaml").exists()


def sweep_config(root: Path, force: bool = False) -> DictConfig:
    """What :func:`claim_sweep_dir` reads of a sweep's config."""
    return OmegaConf.create({"force": force, "hydra": {"sweep": {"dir": str(root)},
                                                       "job": {"name": "train"}}})


# --- resume=false while something works below the run ----------------------------------------

@pytest.mark.parametrize("below", ["inner", "eval"], ids=["a nested run", "an evaluation"])
def test_resume_false_refuses_while_a_process_holds_a_lock_below(trained: Path, tmp_path: Path,
                                                                 below: str) -> None:
    """A run nested in the run folder, or an evaluation writing the run's report (its lock in
    ``eval/``), is held by a live process (this test's): ``resume=false`` moves nothing from
    under it, so the report lands where the evaluation read, and the inner run goes on."""
    run = copy_run(trained, tmp_path / "run")
    name = ".lock" if below == "inner" else ".DoorKey-16x16_sampled_100ep_seed0.lock"
    before = files(run)
    with RunLock(run / below, name=name):
        result = run_cli("rlmem.train", *TINY_PPO, "memory.hidden_size=8", f"run_dir={run}",
                         "resume=false", cwd=tmp_path)
    one_paragraph(result, "rlmem.train", "resume=false would move the earlier run",
                  f"{below}/{name} (PID {os.getpid()}) is held", "Nothing was moved")
    assert files(run) == before and not (run / PREVIOUS).exists()


def test_an_evaluation_writes_only_into_the_run_it_read(trained: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """``resume=false`` moved the run aside after the evaluation read its checkpoint and before
    it took its report's lock: the report is printed, not written into the new run."""
    run = copy_run(trained, tmp_path / "run")
    read = evaluate_module.load_run

    def read_then_moved(*args: object, **kwargs: object) -> object:
        checkpoint = read(*args, **kwargs)  # type: ignore[arg-type]
        move_aside(run)  # as rlmem.train resume=false does, between the two
        return checkpoint

    monkeypatch.setattr(evaluate_module, "load_run", read_then_moved)
    name, result, written = evaluate_run(EvaluateConfig(run=str(run), env="DoorKey-5x5",
                                                        episodes=1, num_envs=1,
                                                        progress_bar=False))
    assert written is None and result.episodes == 1
    assert "was started afresh while it was evaluated" in capsys.readouterr().err
    report = report_path(run, name, episodes=1)
    assert not report.exists() and not list((run / "eval").glob("*.json"))
    assert not list(run.glob(f"{PREVIOUS}/*/eval/*.json"))


def test_resume_false_moves_aside_when_nothing_below_is_held(tmp_path: Path) -> None:
    claim_run_dir(tmp_path / "run")
    (tmp_path / "run" / "inner").mkdir()
    (tmp_path / "run" / "inner" / ".lock").write_text("4242\n")  # a lock nobody holds
    moved = move_aside(tmp_path / "run")
    assert moved is not None and (moved / "inner" / ".lock").is_file()
    with RunLock(tmp_path / "run" / "again"), pytest.raises(RunDirectoryError,
                                                            match=r"again/\.lock"):
        move_aside(tmp_path / "run")


# --- a device, a path: checked before a folder is made -----------------------------------------

def test_a_device_this_machine_lacks_is_refused_before_a_folder_is_made(tmp_path: Path) -> None:
    result = run_cli("rlmem.train", *TINY_PPO, "device=cuda:7", f"run_dir={tmp_path / 'run'}",
                     cwd=tmp_path)
    one_paragraph(result, "rlmem.train", "device='cuda:7' was asked for, but")
    assert not (tmp_path / "run").exists()
    for device, says in (("tpu", "is not a device"), ("meta", "a meta device, which rlmem "
                                                              "does not run on")):
        with pytest.raises(ValueError, match=says):
            resolve_device(device)


def test_a_quoted_tilde_is_refused_and_makes_no_folder(tmp_path: Path) -> None:
    result = run_cli("rlmem.train", *TINY_PPO, "run_dir='~/x'", cwd=tmp_path)
    one_paragraph(result, "rlmem.train", "run_dir=~/x cannot be a run directory",
                  "which only a shell expands", "Nothing was written")
    assert list(tmp_path.iterdir()) == []


# --- temporaries ------------------------------------------------------------------------------

def test_a_resume_removes_the_temporaries_of_a_killed_write(trained: Path, tmp_path: Path) -> None:
    """kill -9 inside a checkpoint write leaves ``.checkpoint.pt.<8>.tmp``: the next run of the
    folder removes rlmem's own, and nothing else."""
    run = copy_run(trained, tmp_path / "run")
    stale = [run / ".checkpoint.pt.k1ll3d_9.tmp", run / ".config.yaml.abcdefgh.tmp",
             run / ".progress.csv.x1y2z3w4.tmp"]
    for path in stale:
        path.write_bytes(b"PK\x03\x04 half a checkpoint" * 1000)
    mine = [run / ".checkpoint.pt.tmp", run / "notes.tmp"]
    for path in mine:
        path.write_text("mine")
    result = run_cli("rlmem.train", *TINY_PPO, "memory.hidden_size=8", "frames=96",
                     f"run_dir={run}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert not any(path.exists() for path in stale)
    assert all(path.read_text() == "mine" for path in mine)
    assert load_checkpoint(run / "checkpoint.pt").count("frames") == 96


# --- permissions ------------------------------------------------------------------------------

def test_files_honour_the_umask_and_force_keeps_a_users_mode(tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "config.yaml").write_text("mine: 1\n")
    (folder / "config.yaml").chmod(0o604)
    result = with_umask(0o027, "rlmem.train", *TINY_PPO, "memory.hidden_size=8", "frames=32",
                        f"run_dir={folder}", "force=true", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert mode(folder / "config.yaml") == 0o604  # the user's file: its mode kept
    for name in ("checkpoint.pt", "progress.csv", MARKER, ".lock"):
        assert mode(folder / name) == 0o640, name
    evaluated = with_umask(0o002, "rlmem.evaluate", f"run={folder}", *EVAL, cwd=tmp_path)
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    (report,) = (folder / "eval").glob("*.json")
    assert mode(report) == 0o664
    supervised = with_umask(0o022, "rlmem.supervised", *TINY_SUPERVISED,
                            f"run_dir={tmp_path / 'sup'}", cwd=tmp_path)
    assert supervised.returncode == 0, supervised.stderr[-3000:]
    for name in ("results.json", "config.yaml", "progress.csv", "checkpoint.pt"):
        assert mode(tmp_path / "sup" / name) == 0o644, name


# --- evaluating on a full or read-only disk ---------------------------------------------------

def assert_evaluated_not_written(run: Path, cwd: Path, reason: str) -> None:
    """The CLI evaluates ``run``, prints the result and says that nothing could be written (for
    ``reason``), in status 1 and no traceback."""
    result = run_cli("rlmem.evaluate", f"run={run}", *EVAL, cwd=cwd)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert f"({reason}): the evaluation runs and prints its result, but nothing of it can be " \
        "written" in result.stderr
    assert "DoorKey-5x5: " in result.stdout and "not written" in result.stdout


def test_evaluate_on_a_full_disk_prints_its_result_and_leaves_nothing(trained: Path,
                                                                      tmp_path: Path) -> None:
    with small_file_system(tmp_path / "disk") as disk:
        run = copy_run(trained, disk / "run")
        before = files(run)
        fill(disk)
        assert_evaluated_not_written(run, tmp_path, "No space left on device")
        assert files(run) == before and not (run / "eval").exists()  # no lock file, no folder


def test_evaluate_on_a_read_only_mount_prints_its_result(trained: Path, tmp_path: Path) -> None:
    with small_file_system(tmp_path / "disk", size="4m") as disk:
        run = copy_run(trained, disk / "run")
        first = run_cli("rlmem.evaluate", f"run={run}", *EVAL, cwd=tmp_path)
        assert first.returncode == 0, first.stderr[-3000:]
        before = files(run)
        remount_read_only(disk)
        assert_evaluated_not_written(run, tmp_path, "Read-only file system")
        assert files(run) == before  # the earlier report too
