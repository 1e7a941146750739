"""The workspace: a TOML file that holds a phase's DoD items and the settings its checks read.

The plugin is generic; which items a phase has, the ledger path, the ceilings and so on are data in
this file (``checks/distcheck.toml`` here). :func:`find_workspace_file` says which file a run or a
command uses: the one named (``pytest --workspace FILE``, ini ``distcheck_config``, ``distcheck ...
--config FILE``), else the nearest ``checks/distcheck.toml`` walking up from the current folder, as git
finds its repository.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_distcheck.errors import ConfigError, at_line
from pytest_distcheck.i18n import N_, _, language
from pytest_distcheck.schemas import validate
from pytest_distcheck.textfile import WORKSPACE_FILE, read_text

# Where a workspace keeps its file unless pytest --workspace, the ini key distcheck_config or --config says otherwise.
DEFAULT_PATH = "checks/distcheck.toml"
# What to do when no workspace file is found; every "not found" message ends with it.
NOT_FOUND_HINT = N_("no checks/distcheck.toml in this folder or any folder above it; run from your workspace, name "
                    "the file (distcheck ... --config FILE, pytest --workspace FILE), or start one with "
                    "`distcheck init`")
EMPTY_WORKSPACE_OPTION = N_("is empty: name the workspace file (e.g. --workspace checks/distcheck.toml) or leave "
                            "the option out")
# A pytest run that found no workspace walking up from {start} and so collected nothing.
NO_WORKSPACE = N_("no workspace found: no checks/distcheck.toml in {start} or any folder above it, so there were no "
                  "DoD checks to collect; cd into your workspace (the folder that holds checks/distcheck.toml) and "
                  "run it again, or start one with `distcheck init DIR`")
# A workspace file named by --workspace or the ini key that is not there; {hint} is DID_YOU_MEAN or THERE_ARE.
NAMED_MISSING = N_("no such file (named by {source}, relative to {base}){hint}")
DID_YOU_MEAN = N_("; did you mean {path}?")
THERE_ARE = N_("; the .toml files there: {paths}")
NAME_ANOTHER = N_("; name an existing workspace file, or start one with `distcheck init DIR`")
# A workspace file given with --config (or found) that is not there, when no close name is there either.
FILE_NOT_FOUND = N_("workspace file not found")
NAME_IT = N_(" (name another with --config FILE, or start one with `distcheck init`)")
# After TOML's own words, when the line it stopped at holds a number written with a decimal comma.
DECIMAL_COMMA = N_("; TOML numbers take a point, not a comma: 5.0, not 5,0")
ABOVE_ROOTDIR = N_("found walking up from {start}, but pytest's rootdir is {rootdir} (no ini file at {root}): run "
                   "pytest from there, or add a pytest.ini there (distcheck init writes one)")


def find_workspace_file(start: Path) -> Path | None:
    """The nearest ``checks/distcheck.toml`` in ``start`` or a folder above it, or ``None``.

    Args:
        start: the folder to start from (usually the current working directory).
    """
    start = Path(start).resolve()
    for folder in (start, *start.parents):
        candidate = folder / DEFAULT_PATH
        if candidate.is_file():
            return candidate
    return None


def workspace_root(path: Path) -> Path:
    """The folder a workspace file's relative paths start from: the folder above ``checks/`` when the file
    sits in a folder named ``checks``, else the file's own folder."""
    path = Path(path)
    return path.parent.parent if path.parent.name == "checks" else path.parent


@dataclass(frozen=True)
class DodItem:
    """One item of a phase's Definition of Done.

    Attributes:
        id: stable identifier used by ``@pytest.mark.dod(id)``.
        title: what the learner must deliver.
        how: the one command or step that completes it.
        requires: ids of items that must be done before this one counts.
        checks: the checks registered for the item, as rootdir-relative node ids without parameters
            (``checks/test_x.py::test_y``); when given, each must be collected and run, and no other
            check may claim the item. Empty: any check under the checks folder marked for it counts.
        title_es, how_es: the title and the step in Spanish (``""``: none given; the English one is shown).
    """

    id: str
    title: str
    how: str
    requires: tuple[str, ...] = ()
    checks: tuple[str, ...] = ()
    title_es: str = ""
    how_es: str = ""

    def title_in(self, lang: str | None = None) -> str:
        """The title in ``lang`` (default: the language in use, :func:`pytest_distcheck.i18n.language`): the
        file's ``title_es`` for Spanish, else the English ``title``."""
        return (self.title_es if (lang or language()) == "es" else "") or self.title

    def how_in(self, lang: str | None = None) -> str:
        """The step in ``lang`` (default: the language in use): the file's ``how_es`` for Spanish, else ``how`` (a
        command reads the same in every language, so most items give none)."""
        return (self.how_es if (lang or language()) == "es" else "") or self.how


@dataclass(frozen=True)
class Workspace:
    """A loaded workspace file.

    Attributes:
        path: the TOML file.
        root: the folder paths in the file are relative to (the pytest rootdir).
        phase_id, phase_title: which phase this is.
        items: the DoD items in the order the file lists them.
        raw: the whole parsed file, for sections other parts of the kit read (``section``).
    """

    path: Path
    root: Path
    phase_id: str
    phase_title: str
    items: tuple[DodItem, ...]
    raw: dict[str, Any] = field(repr=False)

    def item(self, item_id: str) -> DodItem:
        """The item with this id; raises ``KeyError`` naming the known ids."""
        for it in self.items:
            if it.id == item_id:
                return it
        known = ", ".join(i.id for i in self.items)
        raise KeyError(_("no DoD item {item_id!r} in {path} (known: {known})").format(
            item_id=item_id, path=self.path, known=known))

    def section(self, name: str) -> dict[str, Any]:
        """The table ``[name]`` of the file, or ``{}`` when absent."""
        value = self.raw.get(name, {})
        if not isinstance(value, dict):
            raise ConfigError(self.path, name, _("must be a table, found {type}").format(type=type(value).__name__))
        return value

    @property
    def checks_dir(self) -> Path:
        """The folder of the workspace file: DoD checks must be defined under it to be trusted."""
        return self.path.parent

    def resolve(self, relpath: str, field: str = "") -> Path:
        """A path from the file, made absolute against the workspace root.

        The path is returned as named, with ``..`` folded but links not followed. The kit reads and writes
        these paths (the ledger, live logs, the diagram page), so they must stay inside the root: an
        absolute path or one that climbs out (``../..``, a symlink) is an
        error naming ``field``, unless the file sets ``allow_paths_outside_root = true`` at its top.

        Raises:
            ConfigError: the path leaves the root without that permission.
        """
        path = (self.root / relpath).resolve()
        root = self.root.resolve()
        if path != root and root not in path.parents and self.raw.get("allow_paths_outside_root") is not True:
            raise ConfigError(self.path, field or relpath, _(
                "{relpath!r} is outside the workspace root {root}; paths in this file are relative to it (set "
                "allow_paths_outside_root = true at the top of the file to allow this)").format(relpath=relpath,
                                                                                                root=root))
        # The path as named (``..`` folded, links inside the root kept): a learner's path linking into the
        # reference solutions must not read as the reference itself.
        return Path(os.path.normpath(root / relpath))


def load_workspace(path: Path, root: Path | None = None) -> Workspace:
    """Read and validate a workspace file.

    Args:
        path: the TOML file.
        root: folder its relative paths start from; defaults to the file's grandparent when the file
            sits in ``checks/``, else its parent.

    Raises:
        ConfigError: the file is missing, is not TOML (with the line), fails the schema (with the field
            path), has duplicate item ids, or an item requires an unknown or later-cycling item.
    """
    path = Path(path)
    if not path.is_file():
        close = _nearest_toml(str(path), Path.cwd())[0]
        raise ConfigError(path, "", _(FILE_NOT_FOUND) + (_(DID_YOU_MEAN).format(path=close) if close else _(NAME_IT)))
    text = read_text(path, WORKSPACE_FILE)
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # Python < 3.14 has no exc.lineno; the message ends "(at line N, column M)".
        where = re.search(r"at line (\d+)", str(exc))
        line = int(where.group(1)) if where else 0
        bad = text.splitlines()[line - 1] if 0 < line <= len(text.splitlines()) else ""
        comma = _(DECIMAL_COMMA) if re.search(r"=\s*-?\d+,\d", bad) else ""
        raise ConfigError(path, at_line(line) if line else "",
                          _("not valid TOML: {error}").format(error=exc) + comma) from None
    validate(raw, "workspace.schema.json", path)
    items = tuple(
        DodItem(id=i["id"], title=i["title"], how=i["how"], requires=tuple(i.get("requires", ())),
                checks=tuple(i.get("checks", ())), title_es=i.get("title_es", ""), how_es=i.get("how_es", ""))
        for i in raw["items"]
    )
    seen: set[str] = set()
    for n, it in enumerate(items):
        if it.id in seen:
            raise ConfigError(path, f"items[{n}].id", _("duplicate item id {id!r}").format(id=it.id))
        seen.add(it.id)
    for n, it in enumerate(items):
        for req in it.requires:
            if req not in seen:
                raise ConfigError(path, f"items[{n}].requires", _("unknown item {id!r}").format(id=req))
    _check_acyclic(path, items)
    if root is None:
        root = workspace_root(path)
    return Workspace(
        path=path,
        root=Path(root),
        phase_id=str(raw["phase"]["id"]),
        phase_title=raw["phase"]["title"],
        items=items,
        raw=raw,
    )


def _check_acyclic(path: Path, items: tuple[DodItem, ...]) -> None:
    graph = {it.id: it.requires for it in items}
    done: set[str] = set()

    def visit(node: str, stack: tuple[str, ...]) -> None:
        if node in stack:
            cycle = " -> ".join((*stack[stack.index(node):], node))
            raise ConfigError(path, "items", _("prerequisites form a cycle: {cycle}").format(cycle=cycle))
        if node in done:
            return
        for req in graph[node]:
            visit(req, (*stack, node))
        done.add(node)

    for node in graph:
        visit(node, ())


def with_prerequisites(ws: Workspace, item_ids: list[str]) -> list[str]:
    """The given items and, transitively, every item they require, in workspace order."""
    wanted: set[str] = set()
    todo = list(item_ids)
    while todo:
        cur = todo.pop()
        if cur not in wanted:
            wanted.add(cur)
            todo.extend(ws.item(cur).requires)
    return [it.id for it in ws.items if it.id in wanted]


def run_workspace_file(config: Any) -> Path:
    """The workspace file a pytest run uses (absolute; it may not exist).

    In order: ``--workspace FILE`` (relative to the folder pytest was started in); the ini key
    ``distcheck_config`` when the ini file sets it (relative to the rootdir); the nearest
    ``checks/distcheck.toml`` walking up from the folder pytest was started in; else the default
    place under the rootdir.

    Args:
        config: the ``pytest.Config`` of the run.

    Raises:
        ConfigError: a named file does not exist (with the nearest .toml names: :func:`missing_named`), or
            the file found walking up is not at pytest's rootdir (no ini file beside it).
    """
    start = Path(config.invocation_params.dir)
    option = config.getoption("distcheck_workspace", None)
    if option is not None:
        if not option.strip():
            raise ConfigError(Path(option), "--workspace", _(EMPTY_WORKSPACE_OPTION))
        return _named_file(option, start, "--workspace")
    ini = config.getini("distcheck_config")
    if ini:
        return _named_file(ini, Path(config.rootpath), f"distcheck_config in {config.inipath or 'the ini file'}")
    found = find_workspace_file(start)
    if found is None:
        return (config.rootpath / DEFAULT_PATH).resolve()
    if workspace_root(found) != Path(config.rootpath).resolve():
        # Its node ids and paths are relative to its root: checking it from another rootdir would be wrong.
        raise ConfigError(found, "", _(ABOVE_ROOTDIR).format(start=start, rootdir=config.rootpath,
                                                              root=workspace_root(found)))
    return found


# The run's workspace, loaded once per pytest.Config by get_workspace.
workspace_key = pytest.StashKey["Workspace | None"]()


def get_workspace(config: pytest.Config) -> Workspace | None:
    """The workspace of this run, loaded once; ``None`` when the configured file does not exist.

    Raises:
        pytest.UsageError: the file exists but is malformed (names the file and field).
    """
    if workspace_key in config.stash:
        return config.stash[workspace_key]
    ws = None
    try:
        path = run_workspace_file(config)
        if path.is_file():
            ws = load_workspace(path, root=config.rootpath)
    except ConfigError as exc:
        raise pytest.UsageError(f"distcheck: {exc}") from None
    config.stash[workspace_key] = ws
    return ws


def workspace_label(config: pytest.Config) -> str:
    """The run's workspace file as messages show it: relative to the rootdir when under it."""
    return display_path(run_workspace_file(config), config.rootpath)


def _named_file(named: str, base: Path, source: str) -> Path:
    path = (base / named).resolve()
    if not path.is_file():
        raise ConfigError(named, "", missing_named(named, base, source))
    return path


def missing_named(named: str, base: Path, source: str) -> str:
    """What to say when ``named`` (relative to ``base``, given by ``source``) is not a file: the closest
    ``.toml`` file beside it or one folder under ``base`` (difflib), else those beside it."""
    close, beside = _nearest_toml(named, base)
    hint = (_(DID_YOU_MEAN).format(path=close) if close
            else _(THERE_ARE).format(paths=", ".join(beside)) if beside else _(NAME_ANOTHER))
    return _(NAMED_MISSING).format(source=source, base=base, hint=hint)


def _nearest_toml(named: str, base: Path) -> tuple[str | None, list[str]]:
    """The ``.toml`` path closest to ``named`` (difflib) among those beside it and one folder under ``base``,
    written as ``named`` is; and those beside it."""
    import difflib

    parent = Path(named).parent
    found = {(parent / p.name).as_posix() for p in (base / parent).glob("*.toml") if p.is_file()}
    if not parent.is_absolute():
        found |= {p.relative_to(base).as_posix() for p in base.glob("*/*.toml") if p.is_file()}
    close = difflib.get_close_matches(Path(named).as_posix(), sorted(found), n=1, cutoff=0.8)
    return (close[0] if close else None), sorted(f for f in found if Path(f).parent == parent)


def display_path(path: Path, base: Path) -> str:
    """``path`` relative to ``base`` when it lies under it, else absolute; for messages."""
    try:
        return Path(path).resolve().relative_to(Path(base).resolve()).as_posix()
    except ValueError:
        return str(path)


def shell_folder(cwd: Path | str) -> Path:
    """The folder of the shell a person typed the command in: ``cwd``, or, in a git hook (git runs hooks at the
    top of the working tree, ``cwd``, and sets ``$GIT_PREFIX`` to the subfolder the commit was typed in; its
    ``!`` aliases do the same), ``cwd / $GIT_PREFIX``."""
    prefix = os.environ.get("GIT_PREFIX", "")
    cwd = Path(cwd)
    return cwd / prefix if prefix and (cwd / ".git").exists() and (cwd / prefix).is_dir() else cwd


def way_to_root(root: Path, here: Path | None = None) -> str | None:
    """What ``cd`` takes to go from ``here`` (default: the current folder), a subfolder of the workspace ``root``,
    to ``root``: relative (``../..``), quoted for the shell; ``None`` when ``here`` is ``root`` or not under it
    (a run outside the workspace, e.g. the gate's on its snapshot, says nothing of where the learner is)."""
    import shlex

    here, root = Path(Path.cwd() if here is None else here).resolve(), Path(root).resolve()
    return shlex.quote(os.path.relpath(root, here)) if root in here.parents else None


def at_root(command: str, root: Path, here: Path | None = None) -> str:
    """``command``, written to run from the workspace ``root`` (root-relative paths, ``torchrun -m``), as it
    must be typed in ``here`` (default: the current folder): ``(cd UP && command)`` (UP: :func:`way_to_root`; a
    subshell, so that the next command pasted starts from ``here`` too),
    or ``command`` itself at the root (or outside it). The commands the kit prints for a learner to copy whose
    paths are the workspace's (the DoD table's, ``distcheck gate``'s, ``distcheck diagram``'s) go through it."""
    up = way_to_root(root, here)
    return command if up is None else f"(cd {up} && {command})"  # a subshell: the learner's shell stays here


def for_the_shell(line: str, cwd: Path | str = ".") -> str:
    """``line`` (a command to run in ``cwd``) as a person pastes it in the shell that started this process:
    ``(cd /abs/cwd && line)`` when that shell is in a subfolder of ``cwd``, as after the DoD table's
    ``(cd ../.. && ...)`` form (``$OLDPWD``, which bash exports on ``cd``), else ``line`` itself (also under a
    shell that does not export it). An ``$OLDPWD`` left from an earlier ``cd`` at most adds a ``cd`` that
    changes nothing. Never raises."""
    import shlex

    old = os.environ.get("OLDPWD")
    if not old:
        return line
    here = Path(cwd).resolve()
    try:
        if here not in Path(old).resolve().parents:
            return line
    except (OSError, RuntimeError):  # a path that cannot be resolved (a symlink loop): nothing known
        return line
    return f"(cd {shlex.quote(str(here))} && {line})"
