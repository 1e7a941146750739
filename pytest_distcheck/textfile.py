"""Read a text file a person wrote: UTF-8, bounded in size, a file and not a folder, or a clean error.

:func:`read_text` is the one place the kit opens such files (workspace file, ledger, diagram page,
reading note); every failure is a :class:`~pytest_distcheck.errors.ConfigError` naming the file.
"""

from __future__ import annotations

import os
from pathlib import Path

from pytest_distcheck.errors import ConfigError, at_line
from pytest_distcheck.i18n import N_, _

MAX_BYTES = 8 * 2**20  # 8 MiB: far above any config or ledger a person writes
PAGE_BYTES = 256 * 2**10  # 256 KiB: a Markdown page (a note, a diagram page); the kit's longest is 30 KiB
NOT_FOUND = N_("no such {what}")
NOT_A_FILE = N_("is a folder, not a {what}: name the file inside it")
TOO_LARGE = N_("is {size:,} bytes, above the {limit:,} bytes a {what} may have (is it the right file?)")
NOT_UTF8 = N_("not UTF-8 text: byte 0x{byte:02x} at byte offset {offset}; save the {what} as UTF-8 (most editors: "
              "File > Save with Encoding > UTF-8)")
CANNOT_READ = N_("cannot be read as a {what}: {reason}")
# What a file is, as callers pass it (``what``); read_text speaks it in the language in use.
FILE, WORKSPACE_FILE, LEDGER = N_("file"), N_("workspace file"), N_("ledger")
NOTE, DIAGRAM_PAGE = N_("note"), N_("diagram page")


def read_text(path: Path | str, what: str = FILE, *, limit: int = MAX_BYTES, encoding: str = "utf-8") -> str:
    """The text of ``path``, decoded as UTF-8 (``encoding="utf-8-sig"`` also drops a byte-order mark).

    Args:
        what: what the file is, for messages: one of this module's nouns (:data:`WORKSPACE_FILE`,
            :data:`LEDGER`, :data:`NOTE`...), an English msgid spoken in the language in use.
        limit: the most bytes it may have; larger files are refused before they are read whole.

    Raises:
        ConfigError: naming the file: missing, a folder, larger than ``limit``, unreadable, or not UTF-8
            (with the line and byte offset of the first bad byte).
    """
    path, what = Path(path), _(what) if what else what  # _("") is the catalog's header
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > limit:
                raise ConfigError(path, "", _(TOO_LARGE).format(size=size, limit=limit, what=what))
            data = fh.read(limit + 1)
    except FileNotFoundError:
        raise ConfigError(path, "", _(NOT_FOUND).format(what=what)) from None
    except IsADirectoryError:
        raise ConfigError(path, "", _(NOT_A_FILE).format(what=what)) from None
    except OSError as exc:
        raise ConfigError(path, "", _(CANNOT_READ).format(what=what, reason=exc.strerror or exc)) from None
    if len(data) > limit:  # it grew while being read, or a special file with no size
        raise ConfigError(path, "", _(TOO_LARGE).format(size=len(data), limit=limit, what=what))
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        problem = _(NOT_UTF8).format(byte=data[exc.start], offset=exc.start, what=what)
        raise ConfigError(path, at_line(line), problem) from None
