"""The CLIs' front door (issue 31, items 3 and 10): ``--help`` that lists the keys with their
meaning, the groups that apply, the cells and the envs; a usage message for ``rlmem.evaluate``
without ``run=``; unknown keys refused even with ``+``, naming the nearest valid ones. All
in-process: :func:`front_door` answers before Hydra runs anything."""

from __future__ import annotations

from typing import Any

import pytest
from hydra import compose, initialize_config_dir

from rlmem import evaluate, supervised, train
from rlmem.agents.ppo.presets import PRESETS, Preset
from rlmem.cells import CELLS
from rlmem.schema.command_line import USAGE_ERROR, CommandLine, front_door
from rlmem.schema.known_keys import UnknownKeyError, check_known_keys
from rlmem.schema.memory import CONF_DIR
from rlmem.schema.train import register_train_configs


def answer(line: CommandLine, *argv: str, capsys: pytest.CaptureFixture[str]
           ) -> tuple[int | str | None, str, str]:
    with pytest.raises(SystemExit) as caught:
        front_door(line, list(argv))
    out, err = capsys.readouterr()
    return caught.value.code, out, err


@pytest.mark.parametrize("argv, message", [
    (["+frams=100"], "frams is not a key of this config (did you mean frames?)"),
    (["frams=100"], "frams is not a key of this config (did you mean frames?)"),
    (["memory=relstm", "+memory.hiden_size=128"],
     "memory.hiden_size is not a key of this config (did you mean memory.hidden_size?)"),
    (["-m", "memory=lstm,gru", "agent.lrr=1e-3"], "did you mean agent.lr?"),
])
def test_train_refuses_unknown_keys_even_with_plus(argv: list[str], message: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = answer(train.LINE, *argv, capsys=capsys)
    assert code == 1 and err.startswith("rlmem.train: error: ") and message in err, err
    assert "Traceback" not in err and "Nothing was started" in err and len(err.splitlines()) == 1


def test_supervised_and_evaluate_refuse_unknown_keys(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = answer(supervised.LINE, "+iteratons=10", capsys=capsys)
    assert code == 1 and "iteratons is not a key of this config (did you mean iterations?)" in err
    code, _, err = answer(evaluate.LINE, "run=x", "+epsiodes=3", capsys=capsys)
    assert code == 1 and "did you mean episodes?" in err


def test_known_keys_presets_and_free_form_dicts_pass() -> None:
    front_door(supervised.LINE, ["+preset=kerg2020_table1_transfer_copy_relstm", "seed=1",
                                 "+eval_memory.capacity=2020"])
    front_door(train.LINE, ["+recipe=memory_transfer", "memory=relstm",
                            "memory.short_term=3", "+env_kwargs.max_steps=10"])
    front_door(train.LINE, ["-m", "memory=lstm,relstm", "memory.short_term=3"])  # relstm's key
    front_door(evaluate.LINE, ["run=x", "+eval_memory.capacity=2560"])


def test_the_check_of_a_composed_config_refuses_a_plus_key_too() -> None:
    register_train_configs()
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose("train", overrides=["+frams=100"])
    with pytest.raises(UnknownKeyError, match=r"frams .*did you mean frames\?"):
        check_known_keys(cfg, "rlmem.train")


def test_train_help_lists_keys_groups_cells_and_envs(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = answer(train.LINE, "--help", capsys=capsys)
    assert code == 0
    assert "frames=300000\n      Total env frames" in out
    assert "agent.lr=0.001\n      Adam learning rate." in out
    assert "memory.hidden_size=null" in out and "DoorKey-5x5 -> DoorKey-16x16" in out
    # what null means: each preset's size
    assert all(f"{preset.name} {PRESETS[preset].memory_size}" in " ".join(out.split())
               for preset in Preset)
    assert ", ".join(sorted(CELLS)) in " ".join(out.split()) and "+recipe=<name>" in out
    assert "kerg2020_table" not in out and "task=<name>" not in out  # supervised presets, tasks
    assert "kerg2020_code, kerg2020_code_lstm, memory_transfer" in out  # the recipes
    # The cell chosen on the command line is the one described.
    _, out, _ = answer(train.LINE, "memory=relstm", "--help", capsys=capsys)
    assert "memory.short_term=5\n      ν, the length of the short-term buffer" in out


def test_supervised_and_evaluate_help_show_only_their_groups(
        capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = answer(supervised.LINE, "--help", capsys=capsys)
    assert "kerg2020_table1_transfer_copy_relstm" in out and "transfer_copy" in out
    assert "iterations=2000\n      Total updates" in out and "agent=<name>" not in out
    assert "DoorKey-5x5" not in out
    _, out, _ = answer(evaluate.LINE, "-h", capsys=capsys)
    assert "run=???\n      The run directory of a trained agent" in out
    assert "Groups" not in out and "memory=<name>" not in out and "DoorKey-5x5 ->" in out


def test_evaluate_without_run_prints_its_usage(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in ([], ["episodes=3"]):
        code, out, err = answer(evaluate.LINE, *argv, capsys=capsys)
        assert code == USAGE_ERROR and not out
        assert err.startswith("usage: python -m rlmem.evaluate run=...") and "Traceback" not in err
        assert "python -m rlmem.evaluate run=runs/ppo/DoorKey-5x5/relstm/seed0" in err


def test_a_plainly_known_command_line_is_not_composed_twice(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Hydra composes every command line anyway: the front door composes only where a key may
    be unknown (a '+', or a key no schema has), so a CLI starts no slower."""
    from rlmem.schema import command_line

    calls: list[object] = []
    real = command_line._composed

    def composed(*args: Any) -> Any:
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(command_line, "_composed", composed)
    front_door(train.LINE, ["memory=relstm", "memory.short_term=3", "agent.lr=1e-3",
                            "frames=64", "hydra.sweep.dir=x", "hydra/launcher=joblib"])
    front_door(supervised.LINE, ["task=adding", "seq_len=20", "task.recall=3"])
    assert calls == []
    front_door(train.LINE, ["+frames=64"])  # a '+': composed, and known
    assert len(calls) == 1


def test_a_misspelt_choice_of_a_group_gets_the_nearest(
        capsys: pytest.CaptureFixture[str]) -> None:
    """``memory=relstmm`` (and in a sweep) is refused as a misspelt key is, before Hydra's
    dump of its search path; a suite's own search path keeps its presets."""
    code, _, err = answer(train.LINE, "memory=relstmm", capsys=capsys)
    assert code == 1 and err.startswith(
        "rlmem.train: error: memory=relstmm is not a choice of memory (did you mean relstm or "
        f"lstm? the choices are {', '.join(sorted(CELLS))}). Nothing was started.")
    code, _, err = answer(supervised.LINE, "-m", "task=copy,coppy", "+preset=nope",
                          capsys=capsys)
    assert code == 1 and "task=coppy is not a choice of task (did you mean copy?" in err
    assert "preset=nope is not a choice of preset (the choices are kag2020_" in err
    front_door(supervised.LINE, ["hydra.searchpath=[file://elsewhere]", "+preset=own"])
    front_door(train.LINE, ["memory=gru", "agent=sb3"])  # choices: Hydra's to run
    front_door(train.LINE, ["-m", "memory=glob(*)"])
