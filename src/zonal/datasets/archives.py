"""Read one member straight out of an archive: wheels and zips, Debian packages (ar + tar), nesting.

A member is named by a path of names, outermost first: ``("river/datasets/banana.zip",
"banana.all.txt")`` is the file ``banana.all.txt`` inside the zip that is itself a member of the
wheel. The empty path names the artifact file itself. The outer archive's kind is told by its
file name (``.deb`` is a Debian package, anything else is opened as a zip); inner archives must
be zips.
"""

from __future__ import annotations

import io
import os
import tarfile
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

from zonal.datasets.errors import CorruptArtifactError

AR_MAGIC = b"!<arch>\n"
AR_HEADER_SIZE = 60


def iter_ar_members(stream: BinaryIO) -> Iterator[tuple[str, int, int]]:
    """Yield ``(name, offset, size)`` of each member of a Unix ``ar`` archive (the .deb container).

    Each member is a 60-byte header (name 16, mtime 12, uid 6, gid 6, mode 8, size 10, magic
    "`\\n") followed by its data, padded to an even offset. GNU names end in "/"; BSD long names
    ("#1/LEN") put the name at the start of the data.
    """
    if stream.read(len(AR_MAGIC)) != AR_MAGIC:
        raise CorruptArtifactError("not an ar archive (bad magic)")
    while True:
        header = stream.read(AR_HEADER_SIZE)
        if not header:
            return
        if len(header) != AR_HEADER_SIZE or header[58:60] != b"`\n":
            raise CorruptArtifactError("truncated or malformed ar member header")
        raw_name = header[:16].decode("ascii", "replace").rstrip()
        try:
            size = int(header[48:58].decode("ascii").strip())
        except ValueError as error:
            raise CorruptArtifactError(f"bad ar member size {header[48:58]!r}") from error
        offset = stream.tell()
        name = raw_name
        if raw_name.startswith("#1/"):
            name_length = int(raw_name[3:])
            name = stream.read(name_length).decode("utf-8", "replace").rstrip("\0")
            offset, size = offset + name_length, size - name_length
        elif raw_name.endswith("/") and raw_name not in ("/", "//"):
            name = raw_name[:-1]
        yield name, offset, size
        stream.seek(offset + size + (offset + size) % 2)


def read_ar_member(stream: BinaryIO, name: str) -> bytes:
    """The bytes of member ``name`` of the ``ar`` archive in ``stream``."""
    for member, offset, size in iter_ar_members(stream):
        if member == name:
            stream.seek(offset)
            data = stream.read(size)
            if len(data) != size:
                raise CorruptArtifactError(f"ar member {name!r} is truncated")
            return data
    raise CorruptArtifactError(f"no member {name!r} in the ar archive")


def _normal_tar_name(name: str) -> str:
    return name[2:] if name.startswith("./") else name.lstrip("/")


def read_deb_members(stream: BinaryIO, members: Sequence[str]) -> dict[str, bytes]:
    """The files ``members`` (e.g. ``usr/share/...``) of the data tarball of a Debian package.

    The tarball (``data.tar.xz`` / ``.gz`` / ``.bz2`` / plain) is decompressed once for all of them.
    """
    names = [name for name, _, _ in iter_ar_members(stream)]
    data_names = [name for name in names if name.startswith("data.tar")]
    if not data_names:
        raise CorruptArtifactError(f"no data.tar.* in the Debian package (members: {names})")
    if data_names[0].endswith(".zst"):
        raise CorruptArtifactError("data.tar.zst needs zstd support, which this Python lacks")
    stream.seek(0)
    tarball = read_ar_member(stream, data_names[0])
    wanted = {_normal_tar_name(member): member for member in members}
    found: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:*") as archive:
            for info in archive:
                member = wanted.get(_normal_tar_name(info.name))
                if member is not None and info.isfile():
                    extracted = archive.extractfile(info)
                    assert extracted is not None  # a regular file always has a stream
                    found[member] = extracted.read()
    except (tarfile.TarError, EOFError, OSError) as error:
        raise CorruptArtifactError(f"cannot read {data_names[0]}: {error}") from error
    missing = [member for member in members if member not in found]
    if missing:
        raise CorruptArtifactError(
            f"no member {missing[0]!r} in the Debian package's {data_names[0]}"
        )
    return found


def read_zip_members(
    source: str | os.PathLike[str] | BinaryIO, members: Sequence[str]
) -> dict[str, bytes]:
    """The bytes of ``members`` of the zip (or wheel) ``source``; CRCs checked by ``zipfile``."""
    try:
        with zipfile.ZipFile(source) as archive:
            return {member: archive.read(member) for member in members}
    except KeyError as error:
        raise CorruptArtifactError(f"no member {error.args[0]} in the zip archive") from error
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError) as error:
        raise CorruptArtifactError(f"cannot read the zip archive: {error}") from error


def read_members(
    path: str | os.PathLike[str], member_paths: Sequence[Sequence[str]]
) -> list[bytes]:
    """The bytes of each (possibly nested) member path of the archive at ``path``, in order.

    The outer archive is opened (and a .deb's tarball decompressed) once. Raises
    ``CorruptArtifactError``, naming the file, when the archive cannot be read or lacks a member.
    """
    path = Path(path)
    try:
        outer_names = sorted({p[0] for p in member_paths if p})
        outer: dict[str, bytes] = {}
        if outer_names:
            with open(path, "rb") as stream:
                reader = read_deb_members if path.suffix == ".deb" else read_zip_members
                outer = reader(stream, outer_names)
        results = []
        for member_path in member_paths:
            if not member_path:
                results.append(path.read_bytes())
                continue
            data = outer[member_path[0]]
            for name in member_path[1:]:
                data = read_zip_members(io.BytesIO(data), [name])[name]
            results.append(data)
        return results
    except CorruptArtifactError as error:
        raise CorruptArtifactError(f"{path}: {error}") from error
    except OSError as error:
        raise CorruptArtifactError(f"cannot read {path}: {error}") from error


def read_member(path: str | os.PathLike[str], member_path: Sequence[str]) -> bytes:
    """The bytes of one (possibly nested) member of the archive at ``path`` (see ``read_members``)."""
    return read_members(path, [member_path])[0]
