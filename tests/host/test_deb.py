"""The Debian package (`./dev deb`, debian/): what it holds, what it needs, and lintian's word.

The host tier: ./dev builds the package before it (build/deb/, dpkg-buildpackage with
dh-virtualenv). Installing it on hosts with systemd is the hosts' lab's.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from remirror import __version__
from remirror.cli.app import VERBS

REPO = Path(__file__).resolve().parents[2]
DEB_DIR = REPO / "build/deb"  # ./dev makes it


@pytest.fixture(scope="module")
def deb() -> Path:
    debs = list(DEB_DIR.glob("remirror_*.deb"))
    assert len(debs) == 1, f"{DEB_DIR}: no package, or more than one: run ./dev host, which makes it"
    return debs[0]


def test_the_package_is_named_for_remirrors_version_and_needs_the_stack_it_drives(deb: Path) -> None:
    # Debian's ordering: a development release sorts before the release (~).
    assert deb.name == f"remirror_{__version__.replace('.dev', '~dev')}_amd64.deb"
    fields = subprocess.run(["dpkg-deb", "-f", deb], capture_output=True, text=True, check=True).stdout
    depends = next(line for line in fields.splitlines() if line.startswith("Depends:"))
    for package in ("mdadm", "open-iscsi", "python3-rtslib-fb", "thin-provisioning-tools", "openssh-client"):
        assert f" {package}" in depends, depends
    assert "python3 (>= 3.11), python3 (<< 3.12)" in depends  # the venv's site-packages are 3.11's


def test_the_package_holds_the_command_units_cron_file_docs_examples_pages_and_completions(
    deb: Path, tmp_path: Path
) -> None:
    subprocess.run(["dpkg-deb", "-x", deb, tmp_path], check=True)
    listing = subprocess.run(["dpkg-deb", "-c", deb], capture_output=True, text=True, check=True).stdout
    assert "./usr/bin/remirror -> /opt/venvs/remirror/bin/remirror" in listing
    units = sorted(p.name for p in (tmp_path / "lib/systemd/system").iterdir())
    assert units == sorted(p.name for p in (REPO / "contrib/systemd").iterdir())
    for unit in (tmp_path / "lib/systemd/system").iterdir():
        text = unit.read_text()
        assert "/usr/local/bin" not in text, unit.name
        if unit.suffix == ".service":
            assert "ExecStart=/usr/bin/remirror " in text, unit.name
    modules = (tmp_path / "usr/lib/modules-load.d/remirror.conf").read_text()
    assert modules == (REPO / "contrib/modules-load.d/remirror.conf").read_text()
    cron = (tmp_path / "etc/cron.d/remirror").read_text()
    assert [line for line in cron.splitlines() if line and not line.startswith(("#", "SHELL", "PATH"))] == []
    doc = tmp_path / "usr/share/doc/remirror"
    for name in ("README.md.gz", "CHANGELOG.md.gz", "copyright", "changelog.gz", "docs/safety.md.gz"):
        assert (doc / name).exists(), name
    assert (doc / "examples/single-mirror.yaml").exists()
    pages = {p.name for p in (tmp_path / "usr/share/man/man8").iterdir()}
    assert pages == {"remirror.8.gz", *(f"remirror-{verb}.8.gz" for verb in VERBS)}
    assert (
        (tmp_path / "usr/share/bash-completion/completions/remirror")
        .read_text()
        .startswith("_remirror_completion()")
    )
    assert "#compdef remirror" in (tmp_path / "usr/share/zsh/vendor-completions/_remirror").read_text()
    # The venv runs remirror and nothing else: no pip (installing reaches no network), no
    # byte-code (postinst compiles it).
    venv = tmp_path / "opt/venvs/remirror"
    assert sorted(p.name for p in (venv / "bin").iterdir() if not p.name.startswith("python")) == ["remirror"]
    assert not list((venv / "lib").glob("python3.11/site-packages/pip"))
    assert not list(venv.rglob("__pycache__"))
    # It runs from where it was unpacked, with nothing of the checkout in reach.
    done = subprocess.run(
        [venv / "bin/python", "-B", "-m", "remirror", "--version"],
        cwd=tmp_path, env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert done.stdout.strip() == f"remirror, version {__version__}"


def test_lintian_finds_nothing_but_what_the_package_explains(deb: Path) -> None:
    # debian/remirror.lintian-overrides says why a venv in /opt is as it is.
    done = subprocess.run(
        ["lintian", "--fail-on", "error,warning", "--tag-display-limit", "0", deb],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    said = [line for line in done.stdout.splitlines() if line[:2] in ("E:", "W:")]
    assert (done.returncode, said) == (0, []), done.stdout + done.stderr
