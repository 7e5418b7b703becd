"""Where `mtkit serve` keeps the translated files of ``POST /translate_file`` until they are downloaded:
a temporary directory of the server's own, made when it starts and removed when it stops.

A file is stored under a name the server makes, ``<uuid>.<name>`` (the upload's name made safe, as
LibreTranslate names them), and only a name the store made and still holds is ever served: a download
is a lookup in its index, never a path built from the request, so no name a client sends (``../``,
an absolute path, another uuid) can reach another file. Each file is written to a hidden temporary
file and renamed into place, so a reader never sees half a file and a failed write leaves nothing.
A file is kept ``keep_seconds`` (LibreTranslate keeps them 30 minutes), then removed by `sweep`, which
the server runs periodically; an expired file is not served even before the sweep has run.

The store also owns the threads that translate documents for it: a document job waits on the model's
batcher for minutes at a time, and would starve the event loop's small default pool.
"""

from __future__ import annotations

import concurrent.futures
import os
import re
import shutil
import tempfile
import threading
import time
import unicodedata
import uuid
from dataclasses import dataclass
from pathlib import Path

#: what a stored name looks like: a uuid4, a dot, a safe name (checked before the index is asked)
STORED_NAME = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"
                         r"\.[A-Za-z0-9._-]+")

#: documents translated at once; the others wait their turn. Each sends a chunk of its strings at a
#: time to its model's batcher, which batches them together: a few fill a batch, and a few chunks queued
#: ahead of a request keep its wait within the server's --timeout
DOCUMENT_WORKERS = 4


@dataclass(frozen=True)
class StoredFile:
    """A translated file: where it lies, the name its download gets, its format, when it was written."""

    path: Path
    download_name: str
    fmt: str
    created: float  # time.monotonic()


def safe_name(name: str) -> str:
    """``name`` as a file name that is safe anywhere (as werkzeug's secure_filename makes it): its last
    path component, accents dropped, every run of other characters than letters, digits, ``._-`` an
    underscore, no leading dots; "file" when nothing is left. The extension survives, so the format
    stays recognisable."""
    base = re.split(r"[/\\]", name)[-1]
    ascii_name = unicodedata.normalize("NFKD", base).encode("ascii", "ignore").decode("ascii")
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", ascii_name).lstrip("._")
    return cleaned[-200:] or "file"


def download_name(name: str) -> str:
    """The name a download is offered under: the upload's own last path component (Unicode kept), with
    control characters and quotes out; the safe name where nothing is left."""
    base = re.split(r"[/\\]", name)[-1]
    kept = "".join(c for c in base if unicodedata.category(c)[0] != "C" and c not in '"').strip()
    return kept[-200:] if kept.strip(".") else safe_name(name)


class FileStore:
    """The server's translated files (see the module's docstring). Thread-safe: the routes save from
    worker threads, the sweep runs on another."""

    def __init__(self, keep_seconds: float, root: Path | None = None,
                 workers: int = DOCUMENT_WORKERS):
        if keep_seconds <= 0:
            raise ValueError(f"keep_seconds must be positive, not {keep_seconds}")
        self.keep_seconds = keep_seconds
        self.root = Path(tempfile.mkdtemp(prefix="mtkit-serve-files-", dir=root))
        self.workers = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="mtkit-files")
        self._index: dict[str, StoredFile] = {}
        self._lock = threading.Lock()

    def save(self, name: str, fmt: str, data: bytes) -> str:
        """Store ``data``, the translation of the upload ``name`` (format ``fmt``); its stored name."""
        stored = f"{uuid.uuid4()}.{safe_name(name)}"
        path = self.root / stored
        handle, partial = tempfile.mkstemp(prefix=".partial-", dir=self.root)
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(data)
            os.replace(partial, path)
        except BaseException:
            Path(partial).unlink(missing_ok=True)
            raise
        with self._lock:
            self._index[stored] = StoredFile(path, download_name(name), fmt, time.monotonic())
        return stored

    def find(self, stored: str) -> StoredFile | None:
        """The file stored as ``stored``, if the store made that name and keeps it still (not expired)."""
        if not STORED_NAME.fullmatch(stored):
            return None
        with self._lock:
            found = self._index.get(stored)
        if found is None or time.monotonic() - found.created > self.keep_seconds:
            return None
        return found

    def read(self, stored: str) -> tuple[StoredFile, bytes] | None:
        """The file and its bytes; None where `find` has none or a sweep removed it meanwhile."""
        found = self.find(stored)
        if found is None:
            return None
        try:
            return found, found.path.read_bytes()
        except FileNotFoundError:
            return None

    def sweep(self, now: float | None = None) -> int:
        """Remove every file kept longer than ``keep_seconds`` (and temporary files left by a write
        that died with the process's thread); how many stored files went."""
        now = time.monotonic() if now is None else now
        with self._lock:
            expired = [k for k, f in self._index.items() if now - f.created > self.keep_seconds]
            gone = [self._index.pop(k) for k in expired]
        for stored in gone:
            stored.path.unlink(missing_ok=True)
        wall = time.time()
        for leftover in self.root.glob(".partial-*"):
            try:
                if wall - leftover.stat().st_mtime > self.keep_seconds:
                    leftover.unlink()
            except FileNotFoundError:
                pass
        return len(gone)

    def __len__(self) -> int:
        with self._lock:
            return len(self._index)

    def close(self) -> None:
        """Stop the workers (documents in translation finish) and remove the directory with its files."""
        self.workers.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            self._index.clear()
        shutil.rmtree(self.root, ignore_errors=True)
