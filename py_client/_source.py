"""Upload sources: bytes in memory or a file on disk, cut into chunks without needless copies."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import BinaryIO

Buffer = bytes | bytearray | memoryview


class UploadSource:
    """What to upload: `data` (kept as a memoryview, sliced per chunk) or the file at `path`."""

    def __init__(self, data: Buffer | None, path: str | os.PathLike[str] | None) -> None:
        if (data is None) == (path is None):
            raise ValueError("upload needs exactly one of data or path")
        self._view: memoryview | None = None
        self._file: BinaryIO | None = None
        if data is not None:
            view = memoryview(data)
            if view.ndim != 1 or view.format not in ("B", "b", "c"):
                view = view.cast("B")
            self._view = view
            self.size = view.nbytes
        else:
            assert path is not None
            self._file = open(path, "rb")  # closed by close()
            self.size = os.fstat(self._file.fileno()).st_size

    def chunks(self, chunk_size: int) -> Iterator[tuple[int, Buffer]]:
        """(offset, data) for each chunk, in order."""
        if chunk_size <= 0:
            raise ValueError(f"chunk size {chunk_size} must be positive")
        if self._view is not None:
            for off in range(0, self.size, chunk_size):
                yield off, self._view[off : off + chunk_size]
            return
        assert self._file is not None
        for off in range(0, self.size, chunk_size):
            want = min(chunk_size, self.size - off)
            data = self._file.read(want)
            if len(data) != want:
                raise OSError(f"{self._file.name}: file shrank during upload "
                              f"(read {off + len(data)} of {self.size} bytes)")
            yield off, data

    def close(self) -> None:
        if self._file is not None:
            self._file.close()

    def __enter__(self) -> UploadSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
