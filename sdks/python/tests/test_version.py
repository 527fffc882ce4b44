"""The SDK is versioned with the server: its version is the workspace version in /Cargo.toml."""

from __future__ import annotations

import re
import subprocess
import sys

import herald_client
from conftest import REPO_ROOT, SDK_ROOT, herald_bin

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = None


def workspace_version() -> str:
    text = (REPO_ROOT / "Cargo.toml").read_text(encoding="utf-8")
    section = text.split("[workspace.package]", 1)[1]
    match = re.search(r'^version\s*=\s*"([^"]+)"', section, re.MULTILINE)
    assert match, "no [workspace.package] version in Cargo.toml"
    return match.group(1)


def test_package_version_is_the_workspace_version() -> None:
    assert herald_client.__version__ == workspace_version()


def test_installed_metadata_has_the_same_version() -> None:
    from importlib.metadata import version

    assert version("herald-push-client") == workspace_version()


def test_pyproject_takes_its_version_from_the_package() -> None:
    assert tomllib is not None
    project = tomllib.loads((SDK_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["project"]["dynamic"] == ["version"]
    assert project["tool"]["hatch"]["version"]["path"] == "src/herald_client/_version.py"


def test_server_binary_reports_the_same_version() -> None:
    output = subprocess.run([herald_bin(), "--version"], capture_output=True, text=True, timeout=15)
    # `herald 0.1.0 (abc1234 2026-11-29)`: the version, then the commit it was built from.
    assert output.stdout.split()[:2] == ["herald", workspace_version()], output.stdout


def test_package_is_typed() -> None:
    from pathlib import Path

    assert (Path(herald_client.__file__).parent / "py.typed").exists()
