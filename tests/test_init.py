"""distcheck init: a fresh phase workspace in a learner's own folder, from the pack the wheel ships."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from pytest_distcheck.cli import main
from pytest_distcheck.commands.init import HERE, READY
from pytest_distcheck.deps import SOME_VENV
from pytest_distcheck.phase_pack import pack_files, pack_root
from pytest_distcheck.workspace_init import CONFTEST, PYTEST_INI, init_workspace

REPO = Path(__file__).resolve().parents[1]


def test_the_pack_is_this_repository_s_files_and_no_reference_work():
    files = pack_files(REPO)
    assert {"checks/distcheck.toml", "checks/quiz/35.json", "checks/test_quiz_passed.py",
            "experiments/ddp_cpu/lab.py", "experiments/tp_inference/plan.py", "docs/lab/01-ddp-on-cpu.md",
            "docs/notes/TEMPLATE.md"} <= set(files)
    assert not [f for f in files if f.startswith("solutions") or f.endswith(("solutions.toml", ".json.png"))
                or "/results/" in f]
    assert pack_root() == REPO  # an editable install reads the repository itself


def test_the_wheel_s_docs_are_the_pages_init_copies_and_the_manual_stays_in_the_kit():
    """pyproject's package-data for the pack's docs/ names the docs globs of PACK_GLOBS, no more and no fewer;
    the kit's manual (docs/kit/) and the gate's pages (docs/ci/) are for plugin users and graders, so
    neither a wheel nor a fresh workspace gets them."""
    import tomllib

    from pytest_distcheck.phase_pack import PACK_GLOBS

    data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert sorted(f"docs/{g}" for g in data["pytest_distcheck._phase.docs"]) == sorted(
        g for g in PACK_GLOBS if g.startswith("docs/"))
    assert not [f for f in pack_files(REPO) if f.startswith(("docs/kit/", "docs/ci/"))]
    assert (REPO / "docs" / "kit" / "dist_world.md").is_file()  # the manual exists, it just does not ship


def test_init_writes_a_workspace_then_is_idempotent(tmp_path, capsys):
    dest = tmp_path / "mine"
    assert main(["init", str(dest)]) == 0
    for rel in pack_files(REPO):
        assert (dest / rel).read_bytes() == (REPO / rel).read_bytes(), rel
    ledger = (dest / "experiments" / "35-cloud-budget.md").read_text()
    assert ledger.startswith("# Phase 35 cloud spend ledger") and "| time_utc | run_id |" in ledger
    assert (dest / ".gitignore").read_text() == "/.distcheck/\n.venv/\n__pycache__/\n*.pyc\n.pytest_cache/\n"
    assert (dest / "pytest.ini").read_text() == PYTEST_INI
    assert capsys.readouterr().out.endswith(
        f"Phase workspace ready in {dest}. Next, commit it (the DoD items whose evidence is committed need it in "
        "git), then check it:\n"
        f'  cd {dest} && git init && git add . && git commit -m "Start the phase workspace (distcheck init)" -- .\n'
        "  pytest -m local   (the DoD table says what to do next)\n"
        "The phase starts at docs/README.md: what to read and do, in order.\n")
    again = init_workspace(dest)
    assert again.written == [] and again.conflicts == []
    assert (dest / ".gitignore").read_text().count("/.distcheck/") == 1


def test_init_refuses_to_overwrite_and_writes_nothing(tmp_path, capsys):
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "distcheck.toml").write_text("# mine\n")
    assert main(["init", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "nothing written" in out and "checks/distcheck.toml" in out
    assert (tmp_path / "checks" / "distcheck.toml").read_text() == "# mine\n"
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["checks", "distcheck.toml"]


def test_init_keeps_an_existing_pytest_configuration_and_gitignore(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.pytest.ini_options]\naddopts = '-q'\n")
    (tmp_path / ".gitignore").write_text("# mine\n/.venv\n*.pyc")
    report = init_workspace(tmp_path)
    assert not (tmp_path / "pytest.ini").exists()
    assert "pyproject.toml configures pytest here" in report.pytest_config_hint
    # Only what is missing is appended (/.venv already ignores .venv/ here); no line of the learner's changes.
    assert (tmp_path / ".gitignore").read_text() == ("# mine\n/.venv\n*.pyc\n/.distcheck/\n__pycache__/\n"
                                                     ".pytest_cache/\n")
    assert (tmp_path / "pyproject.toml").read_text() == "[tool.pytest.ini_options]\naddopts = '-q'\n"


def test_init_in_the_current_folder_names_it_and_says_pytest_without_cd(tmp_path, monkeypatch, capsys):
    """`distcheck init` here: not "ready in .. Next" (read as the parent) but the folder by name."""
    monkeypatch.chdir(tmp_path)
    assert main(["init"]) == 0
    commit = 'git init && git add . && git commit -m "Start the phase workspace (distcheck init)" -- .'
    assert capsys.readouterr().out.endswith(READY.format(where=HERE.format(path=tmp_path), go="", commit=commit,
                                                         start="docs/README.md") + "\n")


def test_init_in_a_repository_prints_the_commit_of_what_it_wrote_and_that_line_commits_it(tmp_path, capsys):
    """In a repository: add and commit what init wrote, by its top-level names (not `git add .`, which
    would take the learner's unrelated files). Run as printed, the ledger and the checks are committed."""
    from pytest_distcheck.committed import uncommitted

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    assert main(["init", str(tmp_path)]) == 0
    tops = sorted({rel.split("/")[0] for rel in pack_files(REPO)} | {".gitignore", "conftest.py", "pytest.ini"})
    line = capsys.readouterr().out.splitlines()[-3].strip()
    assert line == (f"cd {tmp_path} && git add {' '.join(tops)} && git commit -m "
                    f'"Start the phase workspace (distcheck init)" -- {" ".join(tops)}')
    who = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    subprocess.run(line, shell=True, check=True, capture_output=True, env={**os.environ, **who})
    assert uncommitted(["experiments/35-cloud-budget.md", "checks/distcheck.toml", ".gitignore"], tmp_path) == []


def _pytest_without_the_kit(tmp_path: Path, *also: str) -> list[str]:
    """A command line for a pytest that has never heard of the kit (as a system pytest): this pytest's own
    distributions only (and ``also``), linked into a folder, run with ``-S`` (no site-packages)."""
    from importlib.metadata import distribution

    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("pytest", "pluggy", "iniconfig", "packaging", "pygments", *also):
        dist = distribution(name)
        for top in {f.parts[0] for f in dist.files or () if f.parts[0] != ".."}:
            if not (bare / top).exists():
                (bare / top).symlink_to(Path(dist.locate_file(top)).resolve())
    return [sys.executable, "-S", "-c", f"import sys; sys.path.insert(0, {str(bare)!r}); import pytest; "
            "sys.exit(pytest.console_main())"]


def test_this_repository_has_the_conftest_init_writes():
    assert (REPO / "conftest.py").read_text(encoding="utf-8") == CONFTEST


@pytest.mark.parametrize(("made_by", "venv", "lang"), [
    ("init", None, "es"), ("init --lang es", None, ""), ("a clone of this repository", ".venv", ""),
    ("a clone with its egg-info", "venv", "")])
def test_a_pytest_outside_the_venv_stops_with_one_line(tmp_path, made_by, venv, lang):
    """README: "A `pytest` from outside the venv stops with a message saying so", in a workspace made by init
    (before: one ModuleNotFoundError traceback per check file) and in this one, whose addopts name xdist's
    --dist (before: "unrecognized arguments: --dist"), also when the clone's egg-info (an editable install in
    another Python) lets that pytest load the plugin from the clone without its dependencies. The line names the
    venv found in the workspace (the README's .venv, or another name), else a path to fill in; in Spanish under es
    (no catalog without the kit: conftest.py holds both), DISTCHECK_LANG's or the distcheck_lang that
    `distcheck init --lang es` wrote in pytest.ini (an init-workspace learner saw English there)."""
    ws = tmp_path / "ws"
    if made_by.startswith("init"):
        assert init_workspace(ws, lang="es" if made_by.endswith("es") else None).conflicts == []
    else:
        ws.mkdir()
        for name in ("conftest.py", "pyproject.toml"):
            shutil.copy(REPO / name, ws / name)
        shutil.copytree(REPO / "checks", ws / "checks", ignore=shutil.ignore_patterns("__pycache__"))
    if made_by == "a clone with its egg-info":
        (ws / "pytest_distcheck").symlink_to(REPO / "pytest_distcheck")
        info = ws / "pytest_distcheck.egg-info"
        info.mkdir()
        (info / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: pytest-distcheck\nVersion: 0.1.0\n"
                                       "Requires-Dist: pytest>=8\nRequires-Dist: pytest-xdist>=3.5\n")
        (info / "entry_points.txt").write_text("[pytest11]\ndistcheck = pytest_distcheck.plugin\n")
    # A system Python with some of the kit's dependencies: enough for the plugin to import, not xdist's --dist.
    some = (("jsonschema", "attrs", "referencing", "rpds-py", "jsonschema-specifications", "typing-extensions")
            if "egg-info" in made_by else ())
    if venv:
        (ws / venv).mkdir()
        (ws / venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    env = {**os.environ, "DISTCHECK_LANG": lang}
    proc = subprocess.run([*_pytest_without_the_kit(tmp_path, *some), "-m", "local", "-p", "no:cacheprovider"],
                          cwd=ws, capture_output=True, text=True, timeout=120, env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR, out
    assert "Traceback" not in out and "ModuleNotFoundError" not in out, out
    lacks = "the kit's dependencies pytest-xdist:" if "egg-info" in made_by else "the kit (pytest-distcheck)"
    if lang == "es" or made_by == "init --lang es":
        assert f"pytest-distcheck: a este Python ({sys.executable}) le falta el kit (pytest-distcheck)" in out, out
    else:
        assert f"pytest-distcheck: this Python ({sys.executable}) lacks {lacks}" in out, out
    assert f"(source {f'{venv}/bin/activate' if venv else SOME_VENV})" in out, out  # conftest.py's own copy of it


def test_pytest_m_local_works_in_a_fresh_workspace(tmp_path):
    """After `distcheck init`, `pytest -m local` there runs every free check: all pending (the empty spend
    ledger too, until it is committed: lab 00 says so; the TP item waits for it), the DDP lab live on 2 gloo
    ranks, no error."""
    assert init_workspace(tmp_path).conflicts == []
    report = tmp_path / "dod.json"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-m", "local", "-p", "no:cacheprovider", "-q",
                           f"--dod-json={report}"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads(report.read_text())
    states = {i["id"]: i["state"] for i in doc["items"]}
    assert states == {"ddp-allreduce-logged": "pending", "tp-speedup-committed": "blocked",
                      "reading-notes-cited": "pending", "spend-within-budget": "pending",
                      "tp-diagram-committed": "pending", "quiz-passed": "pending"}, proc.stdout[-3000:]
    commit = ('-> git init && git add experiments/35-cloud-budget.md && git commit -m "DoD evidence" '
              '-- experiments/35-cloud-budget.md')
    assert commit in proc.stdout, proc.stdout[-3000:]
    ddp = next(i for i in doc["items"] if i["id"] == "ddp-allreduce-logged")
    assert [c["state"] for c in ddp["checks"]] == ["done", "pending"]  # the live run ran and passed
    assert (tmp_path / ".distcheck" / "ddp_cpu" / "allreduce-live.json").is_file()


def test_the_wheel_ships_the_pack(tmp_path):
    """`pip wheel .` puts the very files of the pack under pytest_distcheck/_phase/ (mapped, not copied)."""
    # Built from a copy of the tracked files: setuptools writes build/ and *.egg-info beside the source it builds.
    src = tmp_path / "src"
    tracked = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, text=True, check=True)
    for rel in filter(None, tracked.stdout.split("\0")):
        if (REPO / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, src / rel)
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation",
                           "-q", "-w", str(tmp_path)], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0 and "No module named" in proc.stderr:
        pytest.skip(f"cannot build here: {proc.stderr.strip().splitlines()[-1]}")
    assert proc.returncode == 0, proc.stderr
    (wheel,) = tmp_path.glob("pytest_distcheck-*.whl")
    prefix = "pytest_distcheck/_phase/"
    with zipfile.ZipFile(wheel) as zf:
        shipped = {n.removeprefix(prefix): zf.read(n) for n in zf.namelist() if n.startswith(prefix)}
        assert "pytest_distcheck/schemas/workspace.schema.json" in zf.namelist()
    assert set(pack_files(REPO)) <= set(shipped)
    for rel in pack_files(REPO):
        assert shipped[rel] == (REPO / rel).read_bytes(), rel


def test_the_notes_install_hint_works_in_a_learner_s_repository(tmp_path):
    """A workspace made by init has no kit source to `pip install -e '.[notes]'` from: the hint its
    workspace file carries installs the kit's `notes` extra by name, as lab 03 says."""
    from importlib.metadata import requires

    from pytest_distcheck.citations.config import notes_config
    from pytest_distcheck.workspace import load_workspace

    extra = sorted(r.split(";")[0].strip() for r in requires("pytest-distcheck") or () if 'extra == "notes"' in r)
    hint = "pip install " + " ".join(f"'{r}'" for r in extra)
    assert init_workspace(tmp_path).conflicts == []
    for ws in (tmp_path / "checks" / "distcheck.toml", REPO / "checks" / "solutions.toml"):
        assert notes_config(load_workspace(ws)).install == hint, ws
    assert hint in (tmp_path / "docs" / "lab" / "03-megatron-fsdp-reading.md").read_text()
