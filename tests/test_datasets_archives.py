"""Archive readers of zonal.datasets: ar / Debian packages (built here with our own ar writer),
zips and wheels, nested members, and broken archives."""

from __future__ import annotations

import io
import tarfile
import zipfile
from pathlib import Path

import pytest

from zonal.datasets.archives import iter_ar_members, read_ar_member, read_member, read_members
from zonal.datasets.errors import CorruptArtifactError


def write_ar(members: list[tuple[str, bytes]]) -> bytes:
    """A Unix ar archive (GNU style, as dpkg-deb writes) holding ``members`` in order."""
    out = io.BytesIO()
    out.write(b"!<arch>\n")
    for name, data in members:
        header = (
            f"{name + '/':<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(data):<10}".encode("ascii")
            + b"`\n"
        )
        assert len(header) == 60
        out.write(header + data + (b"\n" if len(data) % 2 else b""))
    return out.getvalue()


def write_tar(files: dict[str, bytes], compression: str = "xz") -> bytes:
    """A tarball (``./``-prefixed names, like a .deb's data.tar) of ``files``."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode=f"w:{compression}") as archive:
        directory = tarfile.TarInfo("./usr/")
        directory.type = tarfile.DIRTYPE
        archive.addfile(directory)
        for name, data in files.items():
            info = tarfile.TarInfo("./" + name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return out.getvalue()


def write_deb(files: dict[str, bytes], compression: str = "xz") -> bytes:
    """A minimal Debian package: debian-binary, control.tar.<c>, data.tar.<c> holding ``files``."""
    control = write_tar({"control": b"Package: fake\n"}, compression)
    return write_ar(
        [
            ("debian-binary", b"2.0\n"),
            (f"control.tar.{compression}", control),
            (f"data.tar.{compression}", write_tar(files, compression)),
        ]
    )


def write_zip(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return out.getvalue()


def test_ar_members_listed_with_odd_sizes_padded() -> None:
    archive = write_ar([("odd", b"abc"), ("even", b"abcd"), ("empty", b"")])
    members = list(iter_ar_members(io.BytesIO(archive)))
    assert [(name, size) for name, _, size in members] == [("odd", 3), ("even", 4), ("empty", 0)]
    stream = io.BytesIO(archive)
    assert read_ar_member(stream, "even") == b"abcd"
    assert read_ar_member(io.BytesIO(archive), "odd") == b"abc"


def test_ar_bsd_long_name() -> None:
    name, data = "a-rather-long-member-name.txt", b"payload"
    header = (
        f"{'#1/' + str(len(name)):<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(name) + len(data):<10}"
    )
    archive = b"!<arch>\n" + header.encode() + b"`\n" + name.encode() + data + b"\n"
    assert read_ar_member(io.BytesIO(archive), name) == data


@pytest.mark.parametrize(
    "archive", [b"not an archive", b"!<arch>\n" + b"x" * 30, b"!<arch>\nshort-header-without-magic"]
)
def test_ar_rejects_malformed(archive: bytes) -> None:
    with pytest.raises(CorruptArtifactError):
        list(iter_ar_members(io.BytesIO(archive)))


@pytest.mark.parametrize("compression", ["xz", "gz", "bz2"])
def test_deb_member_read_from_data_tar(tmp_path: Path, compression: str) -> None:
    files = {
        "usr/share/datasets/x/a.gz": b"first member",
        "usr/share/datasets/x/b.gz": b"second member",
        "usr/share/doc/x/copyright": b"not wanted",
    }
    path = tmp_path / "fake_1.0_all.deb"
    path.write_bytes(write_deb(files, compression))
    assert read_member(path, ["usr/share/datasets/x/b.gz"]) == b"second member"
    both = read_members(path, [["usr/share/datasets/x/a.gz"], ["./usr/share/datasets/x/b.gz"]])
    assert both == [b"first member", b"second member"]


def test_deb_missing_member_and_missing_data_tar(tmp_path: Path) -> None:
    path = tmp_path / "fake.deb"
    path.write_bytes(write_deb({"usr/share/a": b"a"}))
    with pytest.raises(CorruptArtifactError, match="no member 'usr/share/b'"):
        read_member(path, ["usr/share/b"])
    path.write_bytes(write_ar([("debian-binary", b"2.0\n")]))
    with pytest.raises(CorruptArtifactError, match=r"no data\.tar"):
        read_member(path, ["usr/share/a"])


def test_zip_member_nested_and_whole_file(tmp_path: Path) -> None:
    inner = write_zip(
        {"banana.all.txt": b"-1 1:0.5 2:0.25\n", "__MACOSX/._banana.all.txt": b"junk"}
    )
    path = tmp_path / "river-0.26.1-cp311-cp311-linux_x86_64.whl"
    path.write_bytes(write_zip({"river/datasets/banana.zip": inner, "river/other.py": b""}))
    assert read_member(path, ["river/datasets/banana.zip", "banana.all.txt"]).startswith(b"-1 1:")
    assert read_member(path, []) == path.read_bytes()


def test_zip_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "x.whl"
    path.write_bytes(write_zip({"a": b"a"}))
    with pytest.raises(CorruptArtifactError, match=r"x\.whl.*no member"):
        read_member(path, ["b"])
    path.write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(CorruptArtifactError, match=r"x\.whl"):
        read_member(path, ["a"])
