"""A run directory is data, never code, and nothing rlmem writes can destroy a user's files.

Each test plants a real condition (a crafted checkpoint written with ``torch.save`` of a plain
dict, a module beside the run, symlinks, a foreign folder) and asserts the message and that no
file outside the run was touched.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from cli_runner import TINY_PPO, run_cli

from rlmem.agents.sb3.train import load_model
from rlmem.envs import UntrustedCodeError
from rlmem.runs import load_checkpoint
from rlmem.runs.directory import MARKER, PREVIOUS, claim_run_dir, move_aside
from rlmem.runs.errors import RunDirectoryError
from rlmem.runs.files import append_text, write_atomic
from rlmem.runs.lock import RunLock
from rlmem.runs.logger import CorruptProgressError, RunLogger

PAYLOAD = "open('PWNED', 'w').write('owned')"
"""What the gadgets try to run: a file appears in the working directory if they succeed."""

GADGET = ["builtins:vars", "code:InteractiveInterpreter",
          {"target": "code:InteractiveInterpreter.runsource", "kwargs": {"source": PAYLOAD}}]
"""Issue 28's S1: a plain list of strings and a mapping that ran code through
``WrapperSpec.resolve`` on evaluate."""

EVIL_MODULE = "import pathlib\npathlib.Path('PWNED').write_text('imported')\n"
"""Issue 28's S2: a module shipped beside a run, imported by ``env=evil_env:Evil-v0``."""


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real run of two tiny updates, copied by each test that alters it."""
    root = tmp_path_factory.mktemp("trained")
    result = run_cli("rlmem.train", *TINY_PPO, "memory.hidden_size=8", f"run_dir={root / 'run'}",
                     cwd=root)
    assert result.returncode == 0, result.stderr[-3000:]
    return root / "run"


@pytest.fixture
def run(trained: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(trained, copy)
    return copy


def rewrite_config(run_dir: Path, **changes: Any) -> None:
    """Re-save the run's checkpoint as a plain dict with ``changes`` in its config, as an
    attacker (or an older tool) would write it."""
    path = run_dir / "checkpoint.pt"
    payload = torch.load(path, weights_only=True)
    payload["config"].update(changes)
    torch.save(payload, path)


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every regular file under ``folder`` but the run lock (which holds its last holder's
    PID)."""
    return {str(path.relative_to(folder)): path.read_bytes()
            for path in sorted(folder.rglob("*"))
            if path.is_file() and not path.is_symlink() and path.name != ".lock"}


def assert_one_paragraph(stderr: str, *fragments: str) -> None:
    assert "Traceback" not in stderr, stderr[-3000:]
    for fragment in fragments:
        assert fragment in stderr, stderr[-3000:]


# --- S1, S2: a run's config names no code ------------------------------------------------------

def test_the_wrapper_gadget_never_runs_on_evaluate_with_or_without_trust(run: Path,
                                                                        tmp_path: Path) -> None:
    rewrite_config(run, wrappers=GADGET)
    refused = run_cli("rlmem.evaluate", f"run={run}", "episodes=1", cwd=tmp_path)
    assert refused.returncode == 1
    assert_one_paragraph(refused.stderr, "wrappers[0]='builtins:vars'", "trust_run_config=true",
                         "nothing was imported")
    trusted = run_cli("rlmem.evaluate", f"run={run}", "episodes=1", "trust_run_config=true",
                      cwd=tmp_path)
    assert trusted.returncode == 1
    assert_one_paragraph(trusted.stderr, "not a gymnasium.Wrapper subclass")
    assert not (tmp_path / "PWNED").exists()
    assert not (run / "eval").exists()


def test_a_module_beside_a_run_is_never_imported_by_evaluate_or_resume(run: Path,
                                                                       tmp_path: Path) -> None:
    (tmp_path / "evil_env.py").write_text(EVIL_MODULE)
    rewrite_config(run, env="evil_env:Evil-v0")
    before = snapshot(run)
    evaluated = run_cli("rlmem.evaluate", f"run={run}", "episodes=1", cwd=tmp_path)
    assert evaluated.returncode == 1
    assert_one_paragraph(evaluated.stderr, "env='evil_env:Evil-v0'", "'evil_env'",
                         "trust_run_config=true")
    resumed = run_cli("rlmem.train", *TINY_PPO, "memory.hidden_size=8", "frames=96",
                      f"run_dir={run}", cwd=tmp_path)
    assert resumed.returncode == 1
    assert_one_paragraph(resumed.stderr, "env='evil_env:Evil-v0'", "trust_run_config=true")
    assert not (tmp_path / "PWNED").exists()
    assert snapshot(run) == before


def test_the_sb3_loader_refuses_a_run_that_names_code(run: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "evil_env.py").write_text(EVIL_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    config = load_checkpoint(run / "checkpoint.pt").config
    rewrite_config(run, env="evil_env:Evil-v0", agent={**config["agent"], "name": "sb3"})
    with pytest.raises(UntrustedCodeError, match="trust_run_config"):
        load_model(run)
    rewrite_config(run, env="DoorKey-5x5", wrappers=GADGET)
    with pytest.raises(UntrustedCodeError, match=r"wrappers\[0\]='builtins:vars'"):
        load_model(run)
    assert not (tmp_path / "PWNED").exists()


def test_the_experiment_scripts_refuse_a_run_that_names_code(run: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    from experiments.memory import start_positions

    (tmp_path / "evil_env.py").write_text(EVIL_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    for changes in ({"wrappers": GADGET}, {"env": "evil_env:Evil-v0"}):
        rewrite_config(run, **changes)
        with pytest.raises(UntrustedCodeError, match="trust_run_config"):
            start_positions.load_for(run, "DoorKey-5x5")
    assert not (tmp_path / "PWNED").exists()


def test_a_run_of_gymnasium_wrappers_evaluates_without_trust(run: Path, tmp_path: Path) -> None:
    rewrite_config(run, wrappers=[{"target": "gymnasium.wrappers:TimeLimit",
                                   "kwargs": {"max_episode_steps": 5}}])
    result = run_cli("rlmem.evaluate", f"run={run}", "episodes=2", "num_envs=2", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "length 5.0" in result.stdout


# --- S3: no write follows a symlink ------------------------------------------------------------

@pytest.mark.parametrize("entry", [".lock", "config.yaml", "progress.csv"])
def test_a_symlink_planted_in_a_run_is_refused_and_its_target_untouched(
        run: Path, tmp_path: Path, entry: str) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (run / entry).unlink()
    (run / entry).symlink_to(victim)
    result = run_cli("rlmem.train", *TINY_PPO, "memory.hidden_size=8", "frames=96",
                     f"run_dir={run}", cwd=tmp_path)
    assert result.returncode == 1
    assert_one_paragraph(result.stderr, "holds symlinks", entry, "nothing was written")
    assert victim.read_text() == "precious\n"


def test_evaluate_refuses_a_symlinked_report_and_leaves_its_target(run: Path,
                                                                   tmp_path: Path) -> None:
    victim = tmp_path / "victim.json"
    victim.write_text("precious\n")
    (run / "eval").mkdir()
    (run / "eval" / "DoorKey-16x16.json").symlink_to(victim)
    result = run_cli("rlmem.evaluate", f"run={run}", "episodes=1", cwd=tmp_path)
    assert result.returncode == 1
    assert_one_paragraph(result.stderr, "holds symlinks", "eval/DoorKey-16x16.json")
    assert victim.read_text() == "precious\n"


def test_the_lock_never_truncates_a_symlinks_target(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / ".lock").symlink_to(victim)
    with pytest.raises(RunDirectoryError, match="is a symlink"), RunLock(tmp_path / "run"):
        pass
    assert victim.read_text() == "precious\n"


def test_writes_replace_a_symlink_instead_of_following_it(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (tmp_path / "link").symlink_to(victim)
    write_atomic(tmp_path / "link", "new\n")
    assert victim.read_text() == "precious\n" and not (tmp_path / "link").is_symlink()
    (tmp_path / "appended").symlink_to(victim)
    with pytest.raises(OSError):
        append_text(tmp_path / "appended", "row\n")
    assert victim.read_text() == "precious\n"


# --- D1, D2: a run dir is rlmem's, and resume=false deletes nothing ----------------------------

@pytest.mark.slow  # a long CLI check: run with -m slow
def test_a_foreign_folder_is_refused_unless_forced(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    for name, text in (("config.yaml", "my: settings\n"), ("progress.csv", "a,b\n1,2\n"),
                       ("notes.txt", "thesis\n"), ("checkpoint.pt", "not a checkpoint")):
        (mine / name).write_text(text)
    before = snapshot(mine)
    refused = run_cli("rlmem.train", *TINY_PPO, f"run_dir={mine}", cwd=tmp_path)
    assert refused.returncode == 1
    assert_one_paragraph(refused.stderr, "rlmem did not make", "force=true", "Nothing was written")
    assert snapshot(mine) == before and not (mine / MARKER).exists()
    # With force and resume=false the folder is taken, and its files are moved, not deleted.
    forced = run_cli("rlmem.train", *TINY_PPO, f"run_dir={mine}", "force=true", "resume=false",
                     cwd=tmp_path)
    assert forced.returncode == 0, forced.stderr[-3000:]
    (previous,) = (mine / PREVIOUS).iterdir()
    assert snapshot(previous) == before
    assert load_checkpoint(mine / "checkpoint.pt").count("frames") == 64


def test_a_fresh_run_dir_is_marked_and_an_unmarked_older_run_resumes(run: Path,
                                                                     tmp_path: Path) -> None:
    assert (run / MARKER).is_file()
    (run / MARKER).unlink()  # as every run written before the marker existed
    resumed = run_cli("rlmem.train", *TINY_PPO, "memory.hidden_size=8", "frames=96",
                      f"run_dir={run}", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert (run / MARKER).is_file()


def test_resume_false_checks_everything_before_it_moves_the_old_run_aside(
        run: Path, tmp_path: Path) -> None:
    before = snapshot(run)
    bad = run_cli("rlmem.train", *TINY_PPO, "memory.hidden_size=0", "resume=false",
                  f"run_dir={run}", cwd=tmp_path)
    assert bad.returncode == 1
    assert_one_paragraph(bad.stderr, "hidden_size")
    assert snapshot(run) == before
    fresh = run_cli("rlmem.train", *TINY_PPO, "memory.hidden_size=8", "resume=false",
                    f"run_dir={run}", cwd=tmp_path)
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    assert "was moved to" in fresh.stdout
    (previous,) = (run / PREVIOUS).iterdir()
    kept = {name: data for name, data in before.items() if name != MARKER}
    assert snapshot(previous) == kept  # the TensorBoard events too: curves never mix


@pytest.mark.slow  # a long CLI check: run with -m slow
def test_a_checkpoint_that_is_a_folder_is_named_and_resume_false_moves_it(
        run: Path, tmp_path: Path) -> None:
    (run / "checkpoint.pt").unlink()
    (run / "checkpoint.pt").mkdir()
    resumed = run_cli("rlmem.train", *TINY_PPO, "memory.hidden_size=8", f"run_dir={run}",
                      cwd=tmp_path)
    assert resumed.returncode == 1
    assert_one_paragraph(resumed.stderr, "checkpoint.pt is not a file", "resume=false")
    fresh = run_cli("rlmem.train", *TINY_PPO, "memory.hidden_size=8", "resume=false",
                    f"run_dir={run}", cwd=tmp_path)
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    (previous,) = (run / PREVIOUS).iterdir()
    assert (previous / "checkpoint.pt").is_dir()


# --- the path itself: reported by the run, before Hydra or anything else creates a folder ------

def path_cases(tmp_path: Path) -> Iterator[tuple[str, str]]:
    (tmp_path / "a_file").write_text("x")
    yield str(tmp_path / "a_file"), "is a file"
    yield str(tmp_path / "a_file" / "run"), "a folder above it, is a file"
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    yield str(tmp_path / "loop" / "run"), "cannot be resolved"
    yield str(tmp_path / ("n" * 300)), "more than the 255"
    yield "/sys/rlmem_cannot_be_here/run", "cannot create run_dir"


def test_a_run_dir_that_can_never_be_one_is_named_before_any_work(tmp_path: Path) -> None:
    for run_dir, reason in path_cases(tmp_path):
        with pytest.raises(RunDirectoryError, match=f"{reason}.*Nothing was written"):
            claim_run_dir(Path(run_dir))
    # Through the CLI: the same paragraph, and no traceback from Hydra making the folder first.
    result = run_cli("rlmem.train", *TINY_PPO, f"run_dir={tmp_path / 'a_file' / 'run'}",
                     cwd=tmp_path)
    assert result.returncode == 1
    assert_one_paragraph(result.stderr, "a folder above it, is a file", "Nothing was written")


def test_bad_names_create_no_folder_anywhere(tmp_path: Path) -> None:
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    for override in ("env=../../x", "memory.hidden_size=-1"):
        result = run_cli("rlmem.train", *TINY_PPO, override, cwd=work)
        assert result.returncode == 1, override
        assert "Traceback" not in result.stderr
    assert sorted(path.name for path in tmp_path.rglob("*")) == ["a", "b"]


def test_claim_and_move_aside_directly(tmp_path: Path) -> None:
    claim_run_dir(tmp_path / "new")
    assert (tmp_path / "new" / MARKER).is_file()
    assert move_aside(tmp_path / "new") is None  # nothing but the marker to move
    (tmp_path / "new" / "config.yaml").write_text("x")
    moved = move_aside(tmp_path / "new")
    assert moved is not None and (moved / "config.yaml").read_text() == "x"


# --- D3: resume keeps whole rows of progress.csv only ------------------------------------------

def test_resume_drops_a_cut_row_blank_fields_and_steps_going_back(tmp_path: Path) -> None:
    csv = tmp_path / "progress.csv"
    csv.write_text("frames,loss\r\n32.0,0.5\r\n64.0,\r\n48.0,0.1\r\n64.0,0.4\r\n96.0,0.3\r\n"
                   "128.0,0.2\r\nx,y,z\r\n160.0,0.0")
    with RunLogger(tmp_path, "frames", resume_step=128) as logger:
        assert csv.read_bytes().decode() == ("frames,loss\r\n32.0,0.5\r\n64.0,\r\n96.0,0.3\r\n"
                                   "128.0,0.2\r\n")
        logger.log({"frames": 160, "loss": 0.1, "new": 1.0})
    assert csv.read_text().splitlines() == ["frames,loss,new", "32.0,0.5,", "64.0,,",
                                            "96.0,0.3,", "128.0,0.2,", "160.0,0.1,1.0"]


def test_a_progress_csv_of_something_else_is_named_on_resume(tmp_path: Path) -> None:
    (tmp_path / "progress.csv").write_text("name,grade\r\nada,A\r\n")
    with pytest.raises(CorruptProgressError, match=r"progress.csv has no 'frames' column"):
        RunLogger(tmp_path, "frames", resume_step=32)


def test_a_full_disk_at_the_tensorboard_writer_is_one_paragraph(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import rlmem.runs.logger as logger_module

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(28, os.strerror(28))

    monkeypatch.setattr(logger_module, "SummaryWriter", full)
    with pytest.raises(RunDirectoryError, match=r"No space left on device.*resume"):
        RunLogger(tmp_path, "frames")


# --- D4: evaluation reports are whole, and two evaluations of one report do not race -----------

@pytest.mark.slow  # a long CLI check: run with -m slow
def test_an_evaluation_already_running_on_the_same_env_is_refused(run: Path,
                                                                  tmp_path: Path) -> None:
    (run / "eval").mkdir()
    with RunLock(run / "eval", name=".DoorKey-16x16_sampled_1ep_seed0.lock"):
        result = run_cli("rlmem.evaluate", f"run={run}", "episodes=1", cwd=tmp_path)
    assert result.returncode == 1
    assert_one_paragraph(result.stderr, f"the evaluation of {run} on DoorKey-16x16 is in use")
    again = run_cli("rlmem.evaluate", f"run={run}", "episodes=1", cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    third = run_cli("rlmem.evaluate", f"run={run}", "episodes=1", "num_envs=2", "seed=0",
                    cwd=tmp_path)
    assert "replaces an earlier evaluation (episodes=1" in third.stdout
    assert [path.name for path in (run / "eval").iterdir() if path.name.endswith(".tmp")] == []


def test_a_failed_report_write_leaves_the_earlier_report_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "report.json"
    target.write_text('{"earlier": true}\n')

    def killed(*args: object) -> None:
        raise OSError(28, os.strerror(28))

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(OSError):
        write_atomic(target, '{"later": true}\n')
    assert target.read_text() == '{"earlier": true}\n'
    assert list(tmp_path.iterdir()) == [target]


def test_claiming_a_foreign_folder_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    """The fast form of the foreign-folder check (the CLI form is ``slow``)."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "config.yaml").write_text("my: settings\n")
    (mine / "notes.txt").write_text("thesis\n")
    before = snapshot(mine)
    with pytest.raises(RunDirectoryError, match=r"rlmem did not make.*force=true"):
        claim_run_dir(mine)
    assert snapshot(mine) == before and not (mine / MARKER).exists()
    claim_run_dir(mine, force=True)
    assert (mine / MARKER).is_file() and (mine / "notes.txt").read_text() == "thesis\n"


def test_two_processes_claiming_one_new_folder_both_get_it(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Two runs (two suites) started at once on the same new run_dir: the second finds the
    folder the first made, holding only the first's unfinished write of the marker, and claims
    it too (their lock then decides which one trains), where it refused it as a foreign
    folder."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / f".{MARKER}.k3x9.tmp").write_text("")  # the first claim, mid-write
    claim_run_dir(run_dir)
    assert (run_dir / MARKER).is_file()
    # The folder made between the second's check and its mkdir.
    racing = tmp_path / "racing"
    exists = Path.exists
    monkeypatch.setattr(Path, "exists", lambda path: False if path == racing else exists(path))
    racing.mkdir()
    claim_run_dir(racing)
    assert (racing / MARKER).is_file()
    # A folder with anything else in it is still the user's.
    (tmp_path / "theirs").mkdir()
    (tmp_path / "theirs" / f".{MARKER}.k3x9.tmp").write_text("")
    (tmp_path / "theirs" / "notes.txt").write_text("thesis\n")
    with pytest.raises(RunDirectoryError, match="rlmem did not make"):
        claim_run_dir(tmp_path / "theirs")
