"""Hydra's own keys that name a run's folder are honoured or refused, never ignored (issue 52):
``hydra.run.dir=X`` trains into ``X`` as ``run_dir=X`` would, ``hydra.sweep.subdir=S`` names
each job's run of a sweep, and what cannot be honoured is refused in one paragraph before any
work; no empty folder is left behind. The real CLIs, in a subprocess, in ``tmp_path``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cli_runner import TINY_PPO, run_cli

from rlmem.runs import load_checkpoint

TINY = [*TINY_PPO, "frames=32", "memory.hidden_size=8"]
"""One update of 32 frames."""


def _files(folder: Path) -> list[str]:
    """Every file and folder under ``folder``, relative to it."""
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*"))


def test_hydra_run_dir_is_the_run_folder(tmp_path: Path) -> None:
    done = run_cli("rlmem.train", *TINY, "hydra.run.dir=there/run", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    run_dir = tmp_path / "there" / "run"
    assert load_checkpoint(run_dir / "checkpoint.pt").count("frames") == 32
    assert "there/run" in done.stdout  # the summary names it
    assert os.listdir(tmp_path) == ["there"]  # no runs/, no folder of Hydra's
    assert os.listdir(tmp_path / "there") == ["run"]


def test_hydra_sweep_subdir_names_each_jobs_run(tmp_path: Path) -> None:
    done = run_cli("rlmem.train", "-m", "seed=0,1", *TINY, "hydra.sweep.dir=sweep",
                   "hydra.sweep.subdir=s${seed}", "hydra/launcher=basic", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    # Hydra records the sweep in multirun.yaml, as in every sweep, and rlmem marks the root as
    # its own (.rlmem-sweep); a folder per job.
    assert sorted(os.listdir(tmp_path / "sweep")) == [".rlmem-sweep", "multirun.yaml", "s0", "s1"]
    for seed in (0, 1):
        checkpoint = load_checkpoint(tmp_path / "sweep" / f"s{seed}" / "checkpoint.pt")
        assert checkpoint.config["seed"] == seed
    assert os.listdir(tmp_path) == ["sweep"]


@pytest.mark.parametrize(("module", "args", "says"), [
    ("rlmem.train", ["hydra.run.dir=x", "run_dir=y"], "both name the run's folder"),
    ("rlmem.train", ["-m", "seed=0,1", "hydra.run.dir=x"], "name each job's run with"),
    ("rlmem.train", ["hydra.sweep.subdir=x"], "give its folder as run_dir=x"),
    ("rlmem.supervised", ["hydra.run.dir=x,y"], "takes one folder"),
    ("rlmem.evaluate", ["run=somewhere", "hydra.run.dir=x"], "makes no folder of its own"),
])
def test_what_cannot_be_honoured_is_refused_before_any_work(
        tmp_path: Path, module: str, args: list[str], says: str) -> None:
    done = run_cli(module, *args, cwd=tmp_path)
    assert done.returncode == 1, done.stderr[-3000:]
    message = done.stderr.strip()
    assert message.startswith(f"{module}: error: ") and says in message, message
    assert len(message.splitlines()) == 1  # one paragraph
    assert _files(tmp_path) == []


def test_supervised_takes_hydra_run_dir_too(tmp_path: Path) -> None:
    done = run_cli("rlmem.supervised", "hydra.run.dir=sup", "iterations=2", "seq_len=4",
                   "batch_size=2", "memory.hidden_size=8", "eval_every=1",
                   "eval_batch_size=2", "eval_seq_lens=[]", "transfer_every=null",
                   "progress_bar=false", "figures=false", "device=cpu", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "sup" / "checkpoint.pt").is_file()
    assert os.listdir(tmp_path) == ["sup"]


@pytest.mark.parametrize(("argv", "multirun", "honoured"), [
    (["hydra.run.dir=a b", "seed=1"], False, ["run_dir='a b'", "hydra.run.dir=.", "seed=1"]),
    (["hydra.sweep.subdir=lr${agent.lr}"], True,
     ["run_dir='${hydra:sweep.dir}/lr${agent.lr}'", "hydra.sweep.subdir=."]),
    (["hydra.run.dir=.", "seed=1"], False, ["hydra.run.dir=.", "seed=1"]),
])
def test_the_keys_become_run_dir_and_hydra_makes_no_folder(
        argv: list[str], multirun: bool, honoured: list[str]) -> None:
    """In-process: what the front door hands Hydra; handing it back changes nothing (a recipe's
    ``hydra.sweep.subdir`` is overridden with ``.``, so Hydra makes no folder of its own)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from rlmem.schema.hydra_keys import honour_hydra_keys
    from rlmem.train import LINE

    def honour(args: list[str]) -> list[str]:
        overrides = OverridesParser.create().parse_overrides(args)
        return honour_hydra_keys(LINE, args, overrides, multirun=multirun)

    assert honour(argv) == honoured
    assert honour(honoured) == honoured


def _recipe(root: Path, **hydra_keys: str) -> str:
    """A recipe ``+recipe=mine`` under ``root/conf`` that sets Hydra's keys ``run.dir``,
    ``sweep.subdir`` (given as ``run_dir``, ``subdir``); the override that finds it."""
    folder = root / "conf" / "recipe"
    folder.mkdir(parents=True)
    lines = ["# @package _global_", "hydra:"]
    if "run_dir" in hydra_keys:
        lines += ["  run:", f"    dir: {hydra_keys['run_dir']}"]
    if "subdir" in hydra_keys:
        lines += ["  sweep:", f"    subdir: {hydra_keys['subdir']}"]
    (folder / "mine.yaml").write_text("\n".join(lines) + "\n")
    return f"hydra.searchpath=[file://{root / 'conf'}]"


def test_a_recipes_hydra_run_dir_is_the_run_folder(tmp_path: Path) -> None:
    """A recipe (``+recipe=``) that sets ``hydra.run.dir`` trains there, as the command line's
    key does; Hydra makes no folder of its own."""
    searchpath = _recipe(tmp_path, run_dir="from_recipe")
    done = run_cli("rlmem.train", *TINY, searchpath, "+recipe=mine", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert load_checkpoint(tmp_path / "from_recipe" / "checkpoint.pt").count("frames") == 32
    assert sorted(os.listdir(tmp_path)) == ["conf", "from_recipe"]


def test_a_recipes_hydra_keys_are_honoured_or_refused_as_the_command_lines(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """In-process: what the front door makes of a recipe's keys. One run takes its
    ``hydra.run.dir``, a sweep its ``hydra.sweep.subdir`` (each mode reads its own key, so a
    recipe may set both); the command line's own key wins; what cannot be honoured is refused
    in one paragraph that names the recipe."""
    from rlmem.schema.command_line import front_door
    from rlmem.train import LINE

    searchpath = _recipe(tmp_path, run_dir="from_recipe", subdir="s${seed}")
    assert front_door(LINE, [searchpath, "+recipe=mine"]) == [
        searchpath, "+recipe=mine", "run_dir='from_recipe'", "hydra.run.dir=."]
    assert front_door(LINE, ["-m", searchpath, "+recipe=mine", "seed=0,1"]) == [
        "-m", searchpath, "+recipe=mine", "seed=0,1", "run_dir='${hydra:sweep.dir}/s${seed}'",
        "hydra.sweep.subdir=."]
    assert front_door(LINE, [searchpath, "+recipe=mine", "hydra.run.dir=mine"]) == [
        searchpath, "+recipe=mine", "run_dir='mine'", "hydra.run.dir=."]
    with pytest.raises(SystemExit) as refused:
        front_door(LINE, [searchpath, "+recipe=mine", "run_dir=elsewhere"])
    message = capsys.readouterr().err.strip()
    assert refused.value.code == 1 and len(message.splitlines()) == 1
    assert "+recipe=mine sets hydra.run.dir='from_recipe'" in message
    assert "both name the run's folder" in message
    assert _files(tmp_path) == ["conf", "conf/recipe", "conf/recipe/mine.yaml"]
