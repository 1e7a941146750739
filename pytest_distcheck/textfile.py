"""Read a text file a person wrote: UTF-8, bounded in size, a file and not a folder, or a clean error.

:func:`read_text` is the one place the kit opens such files (workspace file, ledger, diagram page,
reading note); every failure is a :class:`~pytest_distcheck.errors.ConfigError` naming the file.
"""

from __future__ import annotations

import os
from pathlib import Path

from pytest_distcheck.errors import ConfigError

MAX_BYTES = 8 * 2**20  # 8 MiB: far above any config or ledger a person writes
PAGE_BYTES = 256 * 2**10  # 256 KiB: a Markdown page (a note, a diagram page); the kit's longest is 30 KiB
NOT_FOUND = "no such {what}"
NOT_A_FILE = "is a folder, not a {what}: name the file inside it"
TOO_LARGE = "is {size:,} bytes, above the {limit:,} bytes a {what} may have (is it the right file?)"
NOT_UTF8 = ("not UTF-8 text: byte 0x{byte:02x} at byte offset {offset}; save the {what} as UTF-8 (most editors: "
            "File > Save with Encoding > UTF-8)")
CANNOT_READ = "cannot be read as a {what}: {reason}"


def read_text(path: Path | str, what: str = "file", *, limit: int = MAX_BYTES, encoding: str = "utf-8") -> str:
    """The text of ``path``, decoded as UTF-8 (``encoding="utf-8-sig"`` also drops a byte-order mark).

    Args:
        what: what the file is, for messages ("workspace file", "ledger", "note").
        limit: the most bytes it may have; larger files are refused before they are read whole.

    Raises:
        ConfigError: naming the file: missing, a folder, larger than ``limit``, unreadable, or not UTF-8
            (with the line and byte offset of the first bad byte).
    """
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > limit:
                raise ConfigError(path, "", TOO_LARGE.format(size=size, limit=limit, what=what))
            data = fh.read(limit + 1)
    except FileNotFoundError:
        raise ConfigError(path, "", NOT_FOUND.format(what=what)) from None
    except IsADirectoryError:
        raise ConfigError(path, "", NOT_A_FILE.format(what=what)) from None
    except OSError as exc:
        raise ConfigError(path, "", CANNOT_READ.format(what=what, reason=exc.strerror or exc)) from None
    if len(data) > limit:  # it grew while being read, or a special file with no size
        raise ConfigError(path, "", TOO_LARGE.format(size=len(data), limit=limit, what=what))
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        problem = NOT_UTF8.format(byte=data[exc.start], offset=exc.start, what=what)
        raise ConfigError(path, f"line {line}", problem) from None
