"""What a CLI says about itself (:class:`CommandLine`): read by the front door every CLI
shares (:mod:`rlmem.schema.command_line`) and by its help page
(:mod:`rlmem.schema.help_page`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class CommandLine:
    """What a CLI says about itself: its name, config, purpose and examples."""

    program: str
    """``rlmem.train``: run as ``python -m <program>``."""
    config_name: str
    """Its primary config in ``rlmem/conf`` (``train``)."""
    purpose: str
    """One paragraph: what the program does, what it writes, how it resumes."""
    examples: tuple[str, ...]
    """Command lines that show its common uses (without ``python -m <program>``)."""
    register: Callable[[], None]
    """Stores its schemas in Hydra's ConfigStore."""
    schema: type
    """The dataclass of its config's top level."""
    sections: Mapping[str, Callable[[], Iterable[type]]] = field(default_factory=dict)
    """For each group with keys of its own (``memory``), the dataclasses of its choices."""
    groups: tuple[str, ...] = ()
    """The config groups a user selects (``memory``, ``agent``; ``+preset``, ``+recipe``)."""
    required: tuple[str, ...] = ()
    """Keys without which it cannot run (``run``): their absence gets :meth:`usage`."""
    shows_envs: bool = False
    """Its help lists the env short names."""
    notes: tuple[str, ...] = field(default_factory=tuple)
    """Further paragraphs of its help page."""

    @property
    def command(self) -> str:
        return f"python -m {self.program}"

    def usage(self) -> str:
        """The one-paragraph answer to a command line without a required key."""
        needed = " ".join(f"{key}=..." for key in self.required)
        return (f"usage: {self.command} {needed} [key=value ...]\n{self.purpose} For example:\n"
                + "\n".join(f"  {self.command} {example}" for example in self.examples)
                + f"\n`{self.command} --help` lists every key with its meaning.")
