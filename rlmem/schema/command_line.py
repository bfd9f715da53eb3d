"""The front door every CLI shares: ``--help``, a missing required key, and unknown keys, all
answered before Hydra composes the run's config.

Each CLI (``rlmem.train``, ``rlmem.supervised``, ``rlmem.evaluate``) describes itself once in
a :class:`CommandLine` and calls :func:`front_door` with its arguments before handing them to
its ``@hydra.main`` function:

- ``--help`` / ``-h``: rlmem's own page (:mod:`rlmem.schema.help_page`): every key with its
  description, the groups that apply, the cells and the envs. ``--hydra-help`` stays Hydra's.
- a key the program cannot run without (``run=`` for ``rlmem.evaluate``): a one-paragraph
  usage message and exit status 2, as a shell tool does, instead of Hydra's traceback.
- a key that no schema knows, with or without Hydra's ``+`` (``frams=100``,
  ``+iteratons=10``, ``+memory.hiden_size=128``): one message naming the nearest valid keys
  (:func:`~rlmem.schema.known_keys.check_known_keys`), exit status 1, nothing started. The
  overrides are composed once here, each key override forced (``++``) so that a misspelt key
  reaches the check instead of Hydra's advice to add ``+``. A command line whose every key is
  plainly one of the schema's (no ``+``; a field of the run's dataclass, or of some cell's or
  agent's for ``memory.<key>``, ``agent.<key>``) skips that composition, which Hydra does anyway:
  it costs a fraction of a second at every start.

Anything this cannot interpret (Hydra's flags that change the config source, an override Hydra
itself will refuse) is left to Hydra, which reports it as before.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import gc
import itertools
import sys
from collections.abc import Iterable, Sequence

from hydra import compose, initialize_config_dir
from hydra._internal.utils import get_args_parser
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Glob, Override, OverrideType
from omegaconf import DictConfig, OmegaConf

from rlmem.runs import reported_as_cli_errors
from rlmem.schema.hydra_keys import (
    RUN_DIR,
    SWEEP_SUBDIR,
    honour_hydra_keys,
    honour_keys_in_files,
)
from rlmem.schema.known_keys import UnknownKeyError, check_known_keys
from rlmem.schema.memory import CONF_DIR
from rlmem.schema.program import CommandLine

__all__ = ["USAGE_ERROR", "CommandLine", "check_command_line", "front_door"]

USAGE_ERROR = 2
"""Exit status of a command line that cannot run (a required key missing), as shells use it."""

MAX_VARIANTS = 16
"""At most this many compositions check the keys of a sweep over groups."""


def freeze_imported_objects() -> None:
    """Put every object made so far out of the cyclic garbage collector's reach
    (``gc.freeze``): a CLI's imports (torch's, Hydra's: most of its heap) live as long as the
    process, and at its exit Python's last collection would walk them all. On this project's
    2-core machine a finished training run took 0.53 s from the end of ``main`` to the end of
    the process, 0.13 s with them frozen (a throwaway timing). Garbage that the imports left in
    cycles stays for the process's life; refcounting frees the rest as before."""
    gc.freeze()


def front_door(line: CommandLine, argv: Sequence[str] | None = None) -> list[str]:
    """Answer ``--help``, a missing required key and unknown keys in ``argv`` (default:
    ``sys.argv[1:]``), and honour or refuse Hydra's keys that name a folder
    (:mod:`rlmem.schema.hydra_keys`); return the command line for Hydra to run.

    Raises:
        SystemExit: 0 after the help page, :data:`USAGE_ERROR` after the usage message, 1
            after an unknown key's message or a Hydra key it cannot honour.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = get_args_parser().parse_args(argv)
    except SystemExit:
        return argv  # Hydra's parser reports its own flags' errors
    if args.hydra_help or args.info or args.shell_completion or args.experimental_rerun:
        return argv
    if args.config_path or args.config_name or args.config_dir:
        return argv  # another config source: its keys are not ours to judge
    try:
        overrides = OverridesParser.create().parse_overrides(list(args.overrides))
    except Exception:  # Hydra reports a malformed override in its own words
        overrides = None
    if args.help:
        from rlmem.schema.help_page import help_page

        line.register()
        selected = [] if overrides is None else _first_variant(overrides, _groups())
        print(help_page(line, _composed(line, selected)))
        raise SystemExit(0)
    if overrides is None:
        return argv
    given = {override.key_or_group.lstrip("+") for override in overrides}
    if any(key not in given for key in line.required) and not args.cfg:
        print(line.usage(), file=sys.stderr, flush=True)
        raise SystemExit(USAGE_ERROR)
    with reported_as_cli_errors(line.program):
        honoured = honour_hydra_keys(line, argv, overrides, multirun=args.multirun)
    if honoured != argv:
        return front_door(line, honoured)  # the keys they became, checked as given
    line.register()
    with reported_as_cli_errors(line.program):
        from_files = _honour_keys_in_files(line, argv, overrides, multirun=args.multirun)
    if from_files != argv:
        return front_door(line, from_files)
    with reported_as_cli_errors(line.program):
        check_group_choices(overrides, line.groups)
        if all(_plainly_known(line, override) for override in overrides):
            return argv  # Hydra's composition is the check
        check_command_line(line, overrides)
    return argv


def _honour_keys_in_files(line: CommandLine, argv: list[str], overrides: list[Override], *,
                          multirun: bool) -> list[str]:
    """``argv`` with Hydra's folder keys that the config files it adds (``+recipe=``,
    ``+preset=``) set honoured (:func:`~rlmem.schema.hydra_keys.honour_keys_in_files`); read
    from one composition of the files (a sweep's first choices), only where there are any."""
    files = [override for override in overrides
             if override.type == OverrideType.ADD and "." not in override.key_or_group]
    if not files:
        return argv
    selected = [*(override.input_line for override in overrides if override.input_line
                  and override.key_or_group.startswith("hydra.searchpath")),
                *_first_variant(overrides, _groups())]
    try:
        with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
            hydra = compose(line.config_name, overrides=selected, return_hydra_config=True).hydra
    except Exception:
        return argv  # Hydra refuses these overrides itself, in its own words
    raw = OmegaConf.to_container(hydra, resolve=False)  # "lr${agent.lr}" as written
    assert isinstance(raw, dict)  # the hydra node is a mapping
    set_in_files = {RUN_DIR: str(raw["run"]["dir"]), SWEEP_SUBDIR: str(raw["sweep"]["subdir"])}
    return honour_keys_in_files(line, argv, overrides, set_in_files,
                                " and ".join(str(file.input_line) for file in files),
                                multirun=multirun)


def check_group_choices(overrides: list[Override], groups: Iterable[str]) -> None:
    """Refuse a value of a config group the user selects (``memory=relstmm``) that is none of
    its choices, naming the nearest and the rest, as a misspelt key is; the schemas must be
    registered. With ``hydra.searchpath`` set, other choices exist: Hydra judges them.

    Raises:
        UnknownKeyError: a value is no choice of its group.
    """
    if any(override.key_or_group.startswith("hydra.searchpath") for override in overrides):
        return  # choices from elsewhere (the suites' own presets): Hydra's composition judges
    selected = {group.lstrip("+") for group in groups}
    problems = []
    for override in overrides:
        group = override.key_or_group
        if group not in selected or override.type == OverrideType.DEL or isinstance(
                override.value(), Glob):
            continue  # a glob's choices are Hydra's to find
        options = _options(group)
        for value in _values(override):
            if options and value not in options:
                nearest = difflib.get_close_matches(value, options, n=2, cutoff=0.6)
                hint = f"did you mean {' or '.join(nearest)}? " if nearest else ""
                problems.append(f"{group}={value} is not a choice of {group} ({hint}the "
                                f"choices are {', '.join(options)})")
    if problems:
        raise UnknownKeyError("; ".join(problems) + ". Nothing was started.")


@functools.cache
def _options(group: str) -> tuple[str, ...]:
    """The choices of config group ``group`` (files and registered schemas), sorted."""
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        return tuple(sorted(loader.get_group_options(group)))


def _fields(kind: type) -> set[str]:
    return {item.name for item in dataclasses.fields(kind)} if dataclasses.is_dataclass(kind) \
        else set()


def _plainly_known(line: CommandLine, override: Override) -> bool:
    """Whether ``override`` selects a group or sets, without ``+``, a key that the schema has
    (``memory.<key>``: a key of some cell): Hydra's own composition then refuses the rest."""
    key = override.key_or_group
    if override.type != OverrideType.CHANGE:
        return False
    if key in {group.lstrip("+") for group in line.groups} or "/" in key \
            or key == "hydra" or key.startswith("hydra."):
        return True
    section, _, leaf = key.partition(".")
    if not leaf:
        return key in _fields(line.schema)
    choices = line.sections.get(section)
    return choices is not None and any(leaf in _fields(kind) for kind in choices())


@functools.cache
def _groups() -> frozenset[str]:
    """The top-level config groups of rlmem's config search path (``memory``, ``preset``)."""
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return frozenset(GlobalHydra.instance().config_loader().list_groups(""))


def _is_group(override: Override, groups: frozenset[str]) -> bool:
    """Whether ``override`` selects a group (``memory=relstm``, ``hydra/launcher=joblib``) or
    sets one of Hydra's own keys, rather than one of the run's keys."""
    key = override.key_or_group
    return key in groups or "/" in key or key == "hydra" or key.startswith("hydra.")


def _single(override: Override, value: str, *, force: bool) -> str:
    """``override`` with one ``value``; a key override forced to ``++`` when ``force``."""
    key = override.get_key_element()
    if force and override.type == OverrideType.CHANGE:
        key = f"++{key}"
    return f"{key}={value}"


def _values(override: Override) -> list[str]:
    if override.type == OverrideType.DEL:
        return []
    if override.is_sweep_override():
        return list(override.sweep_string_iterator())
    return [override.get_value_element_as_str()]


def _first_variant(overrides: list[Override], groups: frozenset[str]) -> list[str]:
    """The group choices of ``overrides`` (the first of a sweep's), for the help page."""
    return [_single(override, values[0], force=False) for override in overrides
            if _is_group(override, groups) and not override.key_or_group.startswith("hydra")
            and (values := _values(override))]


def variants(overrides: list[Override], groups: frozenset[str]) -> list[list[str]]:
    """Single-valued override lists that together select every choice of a sweep's groups;
    key overrides forced (``++``), at their first value (their values do not change which
    keys exist)."""
    keys: list[str] = []
    for override in overrides:
        if _is_group(override, groups):
            continue
        if override.type == OverrideType.DEL:
            keys.append(override.input_line or f"~{override.key_or_group}")
        elif values := _values(override):
            keys.append(_single(override, values[0], force=True))
    choices = [[_single(override, value, force=False) for value in _values(override)]
               for override in overrides if _is_group(override, groups)
               and not override.key_or_group.startswith("hydra") and _values(override)]
    combined = [list(combination) for combination in
                itertools.islice(itertools.product(*choices), MAX_VARIANTS)]
    return [[*combination, *keys] for combination in combined]


def _composed(line: CommandLine, overrides: list[str]) -> DictConfig:
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return compose(line.config_name, overrides=overrides)


def check_command_line(line: CommandLine, overrides: list[Override]) -> None:
    """Compose ``overrides`` (every choice of a swept group) and refuse keys that no schema
    knows; leave any other failure to compose to Hydra, which reports it as ever.

    Raises:
        UnknownKeyError: a key is unknown in every composition.
    """
    groups = _groups()
    errors = []
    for variant in variants(overrides, groups):
        try:
            cfg = _composed(line, variant)
        except Exception:
            return  # Hydra refuses these overrides itself, in its own words
        try:
            check_known_keys(cfg, line.program)
        except ValueError as error:
            errors.append(error)
            continue
        return  # the keys are known to at least one choice of the sweep
    if errors:
        raise errors[0]
