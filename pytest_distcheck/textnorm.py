"""Text as a reader sees it, for comparing a learner's text with the kit's: look-alike letters made one.

:func:`skeleton` is the skeleton of Unicode TR39 (UTS #39, sec. 4 "Confusable Detection"): NFD, each
character replaced by its prototype from ``confusables.txt``, NFD again; two strings that look alike
(Latin ``a`` and Cyrillic ``а``) have the same skeleton. The data is the ``confusables.txt`` that the
``confusables`` package ships (Unicode 13.0); that package has no skeleton function of its own, and
``confusable-homoglyphs`` keeps only undirected groups, not the prototypes a skeleton needs.
:func:`comparable` is what the kit compares: NFKC, format characters dropped, the skeleton case folded,
combining marks dropped. :func:`words` splits that into words; :func:`windows` and :func:`held` measure how
much of one text another holds, a word dropped, added or changed aside.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import re
import unicodedata

_WORD = re.compile(r"\w+")


@functools.cache
def _prototypes() -> dict[str, str]:
    """``confusables.txt`` as source character -> prototype string (read without importing the package,
    whose import loads a 2.7 MB table the kit does not use)."""
    path = importlib.metadata.distribution("confusables").locate_file("confusables/assets/confusables.txt")
    table = {}
    for line in open(path, encoding="utf-8-sig"):  # noqa: SIM115 (read once, closed at exit of the loop)
        fields = line.split("#", 1)[0].split(";")
        if len(fields) >= 2 and fields[0].strip():
            table[chr(int(fields[0], 16))] = "".join(chr(int(c, 16)) for c in fields[1].split())
    return table


def skeleton(text: str) -> str:
    """The TR39 skeleton of ``text``: ``NFD(map(NFD(text)))``, each character mapped to its prototype."""
    table = _prototypes()
    return unicodedata.normalize("NFD", "".join(table.get(c, c) for c in unicodedata.normalize("NFD", text)))


def comparable(text: str) -> str:
    """``text`` with what a reader does not see undone: Unicode NFKC, format characters (category Cf, e.g.
    zero-width spaces) dropped, :func:`skeleton` of it case folded, combining marks (Mn) dropped."""
    visible = "".join(c for c in unicodedata.normalize("NFKC", text) if unicodedata.category(c) != "Cf")
    # Skeleton, case fold, skeleton: prototypes are case-sensitive (Cyrillic "Т" -> "T", Latin "m" -> "rn").
    return "".join(c for c in skeleton(skeleton(visible).casefold()) if unicodedata.category(c) != "Mn")


def words(text: str) -> list[str]:
    """The words of ``text`` (``\\w+``, found before the skeleton, which maps ``|`` to ``l``), each made
    :func:`comparable`."""
    return _WORD.findall(" ".join(comparable(w) for w in _WORD.findall(unicodedata.normalize("NFKC", text))))


# Words per window of :func:`windows`.
WINDOW = 5


def _hash(words: list[str]) -> int:
    return int.from_bytes(hashlib.sha256(" ".join(words).encode()).digest()[:4], "little")


def windows(words: list[str]) -> list[tuple[int, ...]]:
    """Each :data:`WINDOW`-word window of ``words`` as the 32-bit hashes of its subsequences with one word dropped:
    two windows share a hash when they differ by one word dropped, added or changed."""
    return [tuple(_hash(words[i:i + j] + words[i + j + 1:i + WINDOW]) for j in range(WINDOW))
            for i in range(len(words) - WINDOW + 1)]


def held(text: list[tuple[int, ...]], source: list[tuple[int, ...]] | tuple[tuple[int, ...], ...]) -> int:
    """How many of the ``source`` windows the ``text`` windows hold (:func:`windows` of each)."""
    have = {h for win in text for h in win}
    return sum(not have.isdisjoint(w) for w in source)

