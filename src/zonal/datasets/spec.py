"""The registry's record types: a member inside an artifact, a source, a dataset's specification."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from zonal.datasets.dataset import Dataset, DatasetInfo, Task
from zonal.datasets.sources import Artifact


@dataclass(frozen=True)
class Member:
    """A file inside an artifact: its (possibly nested) path and, where known, its sha256.

    ``path`` is a sequence of names, outermost first (see ``archives.read_member``); the empty path
    is the artifact file itself.
    """

    path: tuple[str, ...]
    sha256: str | None = None

    def describe(self) -> str:
        """The path written ``outer -> inner``, or ``(the file itself)``."""
        return " -> ".join(self.path) if self.path else "(the file itself)"


@dataclass(frozen=True)
class Source:
    """One way to obtain a dataset: an artifact, the members to read from it, and the loader."""

    artifact: Artifact
    members: Mapping[str, Member]
    load: Callable[[Mapping[str, bytes]], Dataset]

    def describe(self) -> str:
        """``artifact: member`` (or ``artifact: N members``)."""
        if len(self.members) == 1:
            (member,) = self.members.values()
            if not member.path:
                return self.artifact.describe()
            return f"{self.artifact.describe()}: {member.describe()}"
        return (
            f"{self.artifact.describe()}: {', '.join(m.describe() for m in self.members.values())}"
        )

    @property
    def verifiable(self) -> bool:
        """Whether the registry records a sha256 for the artifact or for every member."""
        return self.artifact.sha256 is not None or all(
            member.sha256 is not None for member in self.members.values()
        )


@dataclass(frozen=True)
class DatasetSpec:
    """A named dataset: its task, full shape, sources in order of preference, description."""

    name: str
    task: Task
    shape: tuple[int, int]
    sources: tuple[Source, ...]
    description: str = ""

    def info(self) -> DatasetInfo:
        """The ``DatasetInfo`` summary that ``list_datasets`` returns."""
        return DatasetInfo(
            name=self.name,
            task=self.task,
            shape=self.shape,
            source=self.sources[0].describe(),
            fallbacks=tuple(source.describe() for source in self.sources[1:]),
            description=self.description,
        )
