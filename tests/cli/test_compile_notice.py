"""Issue 31, item 5: the first-use compile of the C++ time loops is announced before it starts
(the CLIs show INFO messages), not met as a silent pause of a minute."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from torch.utils import cpp_extension

from rlmem.cells._engines import compiled


@pytest.fixture
def fresh_build() -> Iterator[None]:
    compiled.forget_build()
    yield
    compiled.forget_build()  # the next user builds (or loads) it for real


def test_the_build_is_announced_before_it_starts(
        fresh_build: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))  # nothing built there yet
    announced: list[bool] = []

    def load(*args: Any, **kwargs: Any) -> None:
        announced.append(any("compiling the C++ time loops" in record.getMessage()
                             for record in caplog.records))
        raise RuntimeError("stub compiler: error")

    monkeypatch.setattr(cpp_extension, "load", load)
    with caplog.at_level(logging.INFO, logger=compiled.__name__), \
            pytest.warns(RuntimeWarning, match="could not be built"):
        assert compiled._build() is None
    assert announced == [True]
    assert str(tmp_path) in caplog.text


def test_without_logging_the_build_is_announced_on_stderr(
        fresh_build: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A script that configured no logging (Python drops its INFO records) still gets the
    line, on stderr, before the build starts; and only once."""
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    monkeypatch.setattr(logging.getLogger(compiled.__name__), "isEnabledFor",
                        lambda level: level >= logging.WARNING)  # Python's default: WARNING
    said: list[str] = []

    def load(*args: Any, **kwargs: Any) -> None:
        said.append(capsys.readouterr().err)
        raise RuntimeError("stub compiler: error")

    monkeypatch.setattr(cpp_extension, "load", load)
    with pytest.warns(RuntimeWarning, match="could not be built"):
        assert compiled._build() is None
    assert len(said) == 1
    assert said[0].count("compiling the C++ time loops") == 1
    assert "first run only" in said[0] and str(tmp_path) in said[0]


def test_a_library_is_loaded_directly_only_once_its_build_is_marked_whole(
        fresh_build: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A library file alone (another process may still be writing it) goes through torch's
    build, which waits for that process; the marker, written after a build that loaded, lets
    the next processes load it directly."""
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    name = compiled.build_name(compiled.compile_flags())
    directory = tmp_path / name
    directory.mkdir()
    (directory / f"{name}.so").write_bytes(b"half a library")
    torch_builds: list[str] = []
    loaded: list[str] = []
    monkeypatch.setattr(cpp_extension, "load",
                        lambda built, *args, **kwargs: torch_builds.append(built))
    monkeypatch.setattr(compiled.torch.ops, "load_library", loaded.append)
    monkeypatch.setattr(compiled.torch.ops, compiled.LIBRARY, object(), raising=False)
    assert compiled._build() is not None
    assert torch_builds == [name] and loaded == []
    assert (directory / f"{name}{compiled.BUILT_SUFFIX}").exists()
    compiled.forget_build()
    assert compiled._build() is not None
    assert torch_builds == [name] and loaded == [str(directory / f"{name}.so")]
