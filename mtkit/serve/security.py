"""API keys for `mtkit serve --api-keys FILE`, each with an optional limit of requests per minute.

The file has one key a line, optionally followed by the number of translation requests the key may
make per minute (``mykey 120``); blank lines and ``#`` comments are skipped. Without a file every
request is served; with one, a translation request must carry a listed key (the ``api_key`` field
as in LibreTranslate, an ``X-API-Key`` header, or ``Authorization: Bearer KEY``).
"""

from __future__ import annotations

import collections
import threading
import time
from pathlib import Path

from mtkit.errors import DataError


class KeyRing:
    """The keys and their per-minute limits (None = no limit); empty = keys are not required."""

    def __init__(self, limits: dict[str, int | None] | None = None, window: float = 60.0):
        self.limits = dict(limits or {})
        self.window = window
        self._calls: dict[str, collections.deque[float]] = {}
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return bool(self.limits)

    @classmethod
    def from_file(cls, path: Path) -> KeyRing:
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise DataError(f"--api-keys {path}: cannot read it ({exc})") from None
        limits: dict[str, int | None] = {}
        for number, line in enumerate(lines, start=1):
            fields = line.split("#", 1)[0].split()
            if not fields:
                continue
            if len(fields) > 2 or (len(fields) == 2 and not (fields[1].isdigit() and int(fields[1]) > 0)):
                raise DataError(f"{path}:{number}: expected a key and an optional positive number of "
                                f"requests per minute, got {line.strip()!r}")
            if fields[0] in limits:
                raise DataError(f"{path}:{number}: key {fields[0]!r} is listed twice")
            limits[fields[0]] = int(fields[1]) if len(fields) == 2 else None
        if not limits:
            raise DataError(f"{path}: holds no API key")
        return cls(limits)

    def check(self, key: str | None, cost: int = 1) -> tuple[int, str, int | None] | None:
        """None when ``key`` may make a request now (and counts it, as ``cost`` requests: a file counts
        by its size, as in LibreTranslate); else (status, message, seconds to wait or None): 403 for a
        missing or unknown key, 429 past its limit (without a wait where ``cost`` is over the limit
        itself: no wait would do)."""
        if not self.enabled:
            return None
        if not key or key not in self.limits:
            return 403, "Invalid API key", None
        limit = self.limits[key]
        if limit is None:
            return None
        if cost > limit:
            return 429, (f"Slowdown: this request counts as {cost} requests, over this key's limit of "
                         f"{limit} per minute"), None
        now = time.monotonic()
        with self._lock:
            calls = self._calls.setdefault(key, collections.deque())
            while calls and calls[0] <= now - self.window:
                calls.popleft()
            if len(calls) + cost > limit:
                wait = int(calls[len(calls) + cost - limit - 1] + self.window - now) + 1
                return 429, f"Slowdown: {limit} requests per minute for this key", wait
            calls.extend([now] * cost)
        return None
