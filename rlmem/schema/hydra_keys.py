"""Hydra's own keys that name a run's folder, honoured or refused, never ignored.

rlmem makes its run directories itself (``run_dir``, created once the config is checked), so
Hydra's run and sweep folders are ``.`` and Hydra creates none. A Hydra user's
``hydra.run.dir=X`` and ``hydra.sweep.subdir=S`` would otherwise be silently ignored (or leave
empty folders behind); the front door (:func:`rlmem.schema.command_line.front_door`) rewrites
them, before Hydra starts, into what they mean for a program with a ``run_dir``:

- ``hydra.run.dir=X`` (one run): ``run_dir=X``;
- ``hydra.sweep.subdir=S`` (a sweep, ``-m``): ``run_dir=${hydra:sweep.dir}/S``, so each job's
  run is ``S`` (interpolations such as ``lr${agent.lr}`` resolved per job) under the sweep's
  folder.

and the key itself is set to ``.`` again (whatever a recipe set it to), so Hydra makes no
folder of its own.

Where they cannot mean that (``run_dir`` given too, the other mode, a program without a
``run_dir``, a sweep of folders) the command is refused with one paragraph, before any work.

A config file the command line adds (``+recipe=<name>``, ``+preset=<name>``) may set them too:
:func:`honour_keys_in_files` treats its values as if they had been given on the command line,
and a refusal names the files that set them. A key the command line sets itself wins over the
files, as in Hydra.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override

from rlmem.schema.program import CommandLine
from rlmem.schema.shell_override import hydra_quoted

RUN_DIR = "hydra.run.dir"
SWEEP_SUBDIR = "hydra.sweep.subdir"


class HydraKeyError(ValueError):
    """A Hydra key that names a folder this command cannot honour."""


def honour_hydra_keys(line: CommandLine, argv: Sequence[str], overrides: Sequence[Override],
                      *, multirun: bool) -> list[str]:
    """``argv`` (whose overrides are ``overrides``) with :data:`RUN_DIR` and
    :data:`SWEEP_SUBDIR` rewritten as the module docstring says; ``argv`` as it is where
    neither names a folder (given as ``.``, they are what rlmem sets them to).

    Raises:
        HydraKeyError: one of them cannot be honoured (one paragraph, naming ``run_dir=``).
    """
    replaced: dict[str, list[str]] = {}
    for given in overrides:
        key = given.key_or_group.lstrip("+")
        # "." is rlmem's own setting: Hydra's folder is the current one, and makes none.
        if (key in (RUN_DIR, SWEEP_SUBDIR) and given.input_line is not None
                and given.value() != "."):
            replaced[given.input_line] = [
                _run_dir_override(line, given, key, overrides, multirun=multirun), f"{key}=."]
    return [new for argument in argv for new in replaced.get(argument, [argument])]


def honour_keys_in_files(line: CommandLine, argv: Sequence[str], overrides: Sequence[Override],
                         set_in_files: Mapping[str, str], files: str, *,
                         multirun: bool) -> list[str]:
    """``argv`` with the value ``set_in_files`` gives the key of this mode (:data:`RUN_DIR`
    for one run, :data:`SWEEP_SUBDIR` for a sweep, as the config files named ``files`` set
    them, uninterpolated) honoured as :func:`honour_hydra_keys` honours it on the command line;
    ``argv`` as it is where it names no folder or the command line sets the key itself. (The
    other mode's key Hydra does not read, so a file may set both.)

    Raises:
        HydraKeyError: one of them cannot be honoured: the message names ``files``.
    """
    given = {override.key_or_group.lstrip("+") for override in overrides}
    key = SWEEP_SUBDIR if multirun else RUN_DIR  # Hydra reads the other key in the other mode
    value = set_in_files.get(key, ".")
    extra = [f"{key}={hydra_quoted(value)}"] if key not in given and value != "." else []
    if not extra:
        return list(argv)
    try:
        return honour_hydra_keys(line, [*argv, *extra],
                                 [*overrides, *OverridesParser.create().parse_overrides(extra)],
                                 multirun=multirun)
    except HydraKeyError as error:
        raise HydraKeyError(f"{files} sets {' and '.join(extra)}, so: {error}") from None


def _run_dir_override(line: CommandLine, given: Override, key: str,
                      overrides: Sequence[Override], *, multirun: bool) -> str:
    """The ``run_dir=...`` that ``key=<value>`` (the override ``given``) means."""
    value = given.value()
    if not any(field.name == "run_dir" for field in dataclasses.fields(line.schema)):
        raise HydraKeyError(
            f"{line.command} makes no folder of its own, so {key}={value} would name nothing: "
            f"it writes into the folder of the run it reads ({', '.join(line.required)}=...). "
            f"Drop {key}.")
    if given.is_sweep_override() or not isinstance(value, (str, int, float)):
        raise HydraKeyError(f"{key} takes one folder, got {given.input_line}; sweep over "
                            "run_dir=... instead, or name each job's folder with "
                            f"{SWEEP_SUBDIR}=<name> under -m.")
    if any(other.key_or_group.lstrip("+") == "run_dir" for other in overrides):
        raise HydraKeyError(f"{key}={value} and run_dir= both name the run's folder: "
                            f"{line.command} writes its run into run_dir only. Give one of "
                            "them.")
    if key == RUN_DIR and not multirun:
        return f"run_dir={hydra_quoted(str(value))}"
    if key == SWEEP_SUBDIR and multirun:
        return f"run_dir={hydra_quoted('${hydra:sweep.dir}/' + str(value))}"
    if key == RUN_DIR:
        raise HydraKeyError(
            f"{RUN_DIR} names the folder of one run, and this is a sweep (-m), whose runs go "
            f"under hydra.sweep.dir: name each job's run with {SWEEP_SUBDIR}=<name> (e.g. "
            f"{SWEEP_SUBDIR}=lr${{agent.lr}}) or run_dir=<folder>, or drop -m.")
    raise HydraKeyError(
        f"{SWEEP_SUBDIR} names the runs of a sweep (-m), and this is one run: give its folder "
        f"as run_dir={value} (or {RUN_DIR}={value}), or add -m.")
