"""Find a cited file and symbol in an installed distribution, without importing it.

The distribution is found with :mod:`importlib.metadata` (importing ``megatron.core`` would take
seconds and print warnings); its file list (the wheel's ``RECORD``) decides which files belong to it, and
a cited file must still have the sha256 ``RECORD`` gives it (PEP 376/627): a file changed since it was
installed confirms nothing. The symbol is found with ``ast`` (:mod:`pytest_distcheck.citations.symbols`).
"""

from __future__ import annotations

import base64
import difflib
import hashlib
import importlib.metadata as metadata
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath, PureWindowsPath

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from pytest_distcheck.citations.quote import normalise
from pytest_distcheck.citations.symbols import SourceFile, Span
from pytest_distcheck.citations.syntax import url_hint
from pytest_distcheck.i18n import N_, _

CHANGED_SOURCE = N_("{rel} of {name} {version} is not the file that was installed (its sha256 differs from the "
                    "distribution's RECORD): citations of it are unverifiable; reinstall it: "
                    "pip install --force-reinstall --no-deps '{name}=={version}'")
NOT_INSTALLED = N_("distribution {package!r} is not installed")
NOT_A_NAME = N_("{package!r} is not a distribution name")
NO_FILE_LIST = N_("distribution {package!r} has no file list (RECORD) to check against")
ABSOLUTE = N_("{path!r} is absolute; give the path relative to {name}'s root")
ESCAPES = N_("{path!r} escapes the package with '..'")
OTHER_PACKAGE = N_("{rel} belongs to {owner}, not to {name}")
NOT_IN_PACKAGE = N_("{rel} is not a file of {name} {version}")
NOT_PYTHON = N_("{rel} is not Python source; symbols are looked up in .py files")
UNREADABLE = N_("{rel} of {name} cannot be read: {error}")
NOT_PYTHON_TEXT = N_("{path} cannot be read as Python: {error}")
DID_YOU_MEAN = N_("; did you mean {names}?")
NOT_DEFINED = N_("{symbol} is not defined in {rel}{hint}")
IMPORTED_DEFINED = N_("; it is imported there from {module}: defined in {file}::{symbol} (lines {start}-{end})")
IMPORTED = N_("; it is imported there from {module}")
OR = N_(" or ")
NOT_SHIPPED = N_(": no file of it is under {folder}/ (it installs {listed}); the path may be from the project's source "
                 "repository, which holds more than this distribution")
# Folders of test code: a citation into one does not count, so no hint points there either.
TEST_FOLDERS = frozenset({"test", "tests", "testing"})
NOT_SUGGESTED = TEST_FOLDERS | {"fixtures"}


def is_test_code(rel: str) -> bool:
    """``rel`` (a path inside a distribution) lies under a test folder (:data:`TEST_FOLDERS`)."""
    return bool(TEST_FOLDERS & set(PurePosixPath(rel).parts[:-1]))


def suggestible(rel: str) -> bool:
    """``rel`` may be named as a file to cite instead: not test code nor test data (``fixtures/``)."""
    return not NOT_SUGGESTED & set(PurePosixPath(rel).parts[:-1])


class Problem(Exception):
    """A citation does not resolve. ``code`` is stable (tests and the DoD check read it); the message
    is for a person and says what was expected and what was found."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Installed:
    """An installed distribution: its name as its metadata spells it, its version, root and files."""

    name: str
    version: str
    root: Path
    files: frozenset[str]
    hashes: dict[str, str] = field(default_factory=dict, compare=False)  # file -> RECORD's sha256, urlsafe base64

    @property
    def key(self) -> str:
        """The name normalised as PEP 503 does (``Megatron_Core`` -> ``megatron-core``)."""
        return canonicalize_name(self.name)

    @property
    def public_version(self) -> str:
        """The version without a local label (``2.13.0+cpu`` -> ``2.13.0``): the source is the same."""
        return public_version(self.version)


def public_version(version: str) -> str:
    """``version`` without its PEP 440 local label; unchanged when it is not a valid PEP 440 version."""
    try:
        return Version(version).public
    except InvalidVersion:
        return version


class Resolver:
    """Resolves ``package path::symbol`` against what is installed; caches distributions and parsed files."""

    def __init__(self) -> None:
        self._dists: dict[str, Installed] = {}
        self._sources: dict[Path, SourceFile] = {}
        self._owners: dict[str, str] | None = None  # file -> "name version", built on first need
        self._texts: dict[str, dict[str, str]] = {}  # distribution -> its .py files' text, on first need
        self._normalised: dict[tuple[str, str], str] = {}  # (distribution, file) -> normalised text, on first need
        self._verified: set[tuple[str, str]] = set()  # (distribution, file) whose RECORD hash matched

    def distribution(self, package: str) -> Installed:
        """The installed distribution called ``package`` (any spelling pip accepts).

        Raises:
            Problem: ``not-installed``, or ``no-file-list`` when it has no RECORD.
        """
        key = canonicalize_name(package)
        if key not in self._dists:
            try:
                dist = metadata.distribution(package)
            except metadata.PackageNotFoundError:
                # No "pip install NAME": NAME may be a typo that is some unrelated project on PyPI.
                raise Problem("not-installed", _(NOT_INSTALLED).format(package=package)) from None
            except ValueError:  # importlib.metadata's answer to an empty name
                raise Problem("not-installed", _(NOT_A_NAME).format(package=package)) from None
            files = dist.files  # parses RECORD at every access (torch's lists ~20,000 files)
            if files is None:
                raise Problem("no-file-list", _(NO_FILE_LIST).format(package=package))
            paths = [(str(PurePosixPath(*f.parts)), f) for f in files]
            self._dists[key] = Installed(
                name=dist.metadata["Name"],
                version=dist.version,
                root=Path(dist.locate_file("")).resolve(),
                files=frozenset(path for path, _f in paths),
                hashes={path: f.hash.value for path, f in paths if f.hash is not None and f.hash.mode == "sha256"},
            )
        return self._dists[key]

    def file(self, package: str, path: str) -> tuple[Installed, Path]:
        """The absolute path of ``path`` inside ``package``'s install root, checked to belong to it.

        ``path`` is normalised: ``./`` and repeated ``/`` make no other file.

        Raises:
            Problem: ``url`` (a web address, e.g. GitHub's), ``absolute-path``, ``escapes-package``
                (a ``..`` part), ``other-package`` (the file
                belongs to another installed distribution, named), ``not-in-package`` (with the
                nearest paths), ``not-python``, or those of :meth:`distribution`.
        """
        dist = self.distribution(package)
        if "://" in path or path.startswith(("github.com/", "www.")):
            raise Problem("url", url_hint(path))
        if path.startswith(("/", "\\", "~")) or PureWindowsPath(path).drive:
            raise Problem("absolute-path", _(ABSOLUTE).format(path=path, name=dist.name))
        parts = PurePosixPath(path.replace("\\", "/")).parts
        if ".." in parts:
            raise Problem("escapes-package", _(ESCAPES).format(path=path))
        rel = str(PurePosixPath(*parts))
        if rel not in dist.files:
            owner = self.owner(rel)
            if owner and not owner.lower().startswith(dist.name.lower() + " "):
                raise Problem("other-package", _(OTHER_PACKAGE).format(rel=rel, owner=owner, name=dist.name))
            raise Problem(
                "not-in-package",
                _(NOT_IN_PACKAGE).format(rel=rel, name=dist.name, version=dist.version)
                + (_not_shipped(rel, dist) or _suggest(rel, dist)),
            )
        if not rel.endswith(".py"):
            raise Problem("not-python", _(NOT_PYTHON).format(rel=rel))
        self._verify(dist, rel)
        return dist, dist.root / rel

    def _verify(self, dist: Installed, rel: str) -> None:
        """Raise Problem ``changed-source`` when ``rel`` no longer has the sha256 its ``RECORD`` gives it (a file
        without one, as an editable install's, is read as it is)."""
        want = dist.hashes.get(rel)
        if want is None or (dist.key, rel) in self._verified:
            return
        try:
            got = base64.urlsafe_b64encode(hashlib.sha256((dist.root / rel).read_bytes()).digest()).rstrip(b"=")
        except OSError as exc:
            error = exc.strerror or exc
            raise Problem("unparsable", _(UNREADABLE).format(rel=rel, name=dist.name, error=error)) from None
        if got.decode() != want.rstrip("="):
            raise Problem("changed-source", _(CHANGED_SOURCE).format(rel=rel, name=dist.name, version=dist.version))
        self._verified.add((dist.key, rel))

    def source(self, path: Path) -> SourceFile:
        """The parsed file. Raises Problem ``unparsable`` when ``ast`` cannot read it."""
        if path not in self._sources:
            try:
                self._sources[path] = SourceFile(path)
            except (SyntaxError, OSError, UnicodeDecodeError) as exc:
                raise Problem("unparsable", _(NOT_PYTHON_TEXT).format(path=path, error=exc)) from None
        return self._sources[path]

    def symbol(self, package: str, path: str, symbol: str) -> tuple[Installed, SourceFile, list[Span]]:
        """Every definition of ``symbol`` in the file (usually one).

        Raises:
            Problem: ``symbol-not-found`` (with the nearest names defined in the file), or those of
                :meth:`file` and :meth:`source`.
        """
        dist, abspath = self.file(package, path)
        src = self.source(abspath)
        if symbol not in src.spans:
            rel = abspath.relative_to(dist.root).as_posix()
            hint = self._imported(dist, rel, src, symbol)
            if not hint:
                close = difflib.get_close_matches(symbol, list(src.spans), n=3, cutoff=0.6)
                hint = _(DID_YOU_MEAN).format(names=", ".join(close)) if close else ""
            raise Problem("symbol-not-found", _(NOT_DEFINED).format(symbol=symbol, rel=rel, hint=hint))
        # The implementation first: hints then quote it, not an @overload stub.
        return dist, src, sorted(src.spans[symbol], key=lambda span: span.overload)

    def _imported(self, dist: Installed, rel: str, src: SourceFile, symbol: str, depth: int = 0) -> str:
        """``"; it is imported there from M: defined in FILE::SYMBOL (lines a-b)"`` when the first part
        of ``symbol`` is imported into the file (re-exports followed up to 3 steps); else ``""``."""
        head, _dot, rest = symbol.partition(".")
        if head not in src.imports or depth > 3:
            return ""
        module, name, level = src.imports[head]
        folder = PurePosixPath(rel).parent.parts
        parts = (list(folder[: len(folder) - level + 1]) if level else []) + [p for p in module.split(".") if p]
        tries: list[tuple[list[str], str]] = []  # (module as path parts, symbol inside it)
        if name:
            tries.append((parts, ".".join(filter(None, [name, rest]))))
            if rest:
                tries.append((parts + [name], rest))  # ``from pkg import submodule``
        elif rest:
            tries.append((parts, rest))
        for mod, inner in tries:
            for cand in ("/".join(mod) + ".py", "/".join(mod) + "/__init__.py"):
                if cand not in dist.files:
                    continue
                try:
                    other = self.source(dist.root / cand)
                except Problem:
                    continue
                if inner in other.spans:
                    span = sorted(other.spans[inner], key=lambda s: s.overload)[0]
                    return _(IMPORTED_DEFINED).format(module="." * level + module, file=cand, symbol=inner,
                                                      start=span.start, end=span.end)
                deeper = self._imported(dist, cand, other, inner, depth + 1)
                if deeper:
                    return deeper
        return _(IMPORTED).format(module="." * level + module)

    def texts(self, dist: Installed) -> dict[str, str]:
        """Every ``.py`` file of ``dist`` as text, by path (read once: ~46 MB for torch)."""
        if dist.key not in self._texts:
            out = {}
            for rel in sorted(f for f in dist.files if f.endswith(".py")):
                try:
                    out[rel] = (dist.root / rel).read_text(encoding="utf-8", errors="replace")
                except OSError:
                    continue
            self._texts[dist.key] = out
        return self._texts[dist.key]

    def normalised(self, dist: Installed, rel: str) -> str:
        """The text of ``dist``'s file ``rel`` (from :meth:`texts`) with its whitespace normalised
        (:func:`~pytest_distcheck.citations.quote.normalise`), made once: every quote of a note is looked
        for in the same files."""
        key = (dist.key, rel)
        if key not in self._normalised:
            self._normalised[key] = normalise(self.texts(dist)[rel])
        return self._normalised[key]

    def owner(self, rel: str) -> str | None:
        """``"name version"`` of the installed distribution whose RECORD lists ``rel``, or None.

        The index of every distribution's files is built once (a few tenths of a second), only when
        a citation names a file outside its package.
        """
        if self._owners is None:
            self._owners = {}
            for dist in metadata.distributions():
                label = f"{dist.metadata['Name']} {dist.version}"  # parsed once per distribution
                for f in dist.files or ():
                    self._owners.setdefault(str(PurePosixPath(*f.parts)), label)
        return self._owners.get(rel)


def _not_shipped(rel: str, dist: Installed) -> str:
    """``": it installs only megatron/core/ ..."`` when no file of ``dist`` is under the folder of
    ``rel`` although the distribution has files under its first folder: the path is then likely
    from the project's source repository, which ships more than the distribution (Megatron-LM's
    ``megatron/training/`` is not in the ``megatron-core`` wheel)."""
    parts = PurePosixPath(rel).parts
    if len(parts) < 3:
        return ""
    shipped = sorted({
        "/".join(PurePosixPath(f).parts[:2]) + "/"
        for f in dist.files
        if f.endswith(".py") and PurePosixPath(f).parts[0] == parts[0] and len(PurePosixPath(f).parts) > 2
    })
    if not shipped or "/".join(parts[:2]) + "/" in shipped:
        return ""
    listed = ", ".join(shipped[:4]) + (", ..." if len(shipped) > 4 else "")
    return _(NOT_SHIPPED).format(folder="/".join(parts[:2]), listed=listed)


def _suggest(rel: str, dist: Installed) -> str:
    """``"; did you mean X?"`` for the closest files: the same file name elsewhere, else a close path; never
    a file of test code or test data (:func:`suggestible`), which a citation could not count."""
    name = PurePosixPath(rel).name
    files = [f for f in dist.files if suggestible(f)]
    same_name = sorted(f for f in files if PurePosixPath(f).name == name)
    pool = same_name or [f for f in files if f.endswith(".py")]
    close = difflib.get_close_matches(rel, pool, n=2, cutoff=0.75) or same_name[:2]
    return _(DID_YOU_MEAN).format(names=_(OR).join(close)) if close else ""
