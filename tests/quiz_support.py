"""Helpers for the quiz tests: a temporary workspace with the real Phase 35 bank, and right answers."""

from __future__ import annotations

import json
import shutil
import signal
import sys
from pathlib import Path

from markdown_it import MarkdownIt

from pytest_distcheck.quiz.bank import load_bank
from pytest_distcheck.quiz.draw import draw_attempt

REPO = Path(__file__).resolve().parents[1]
BANK = REPO / "checks" / "quiz" / "35.json"
CHECK = REPO / "checks" / "test_quiz_passed.py"
LOG_REL = "experiments/quiz/35-attempts.jsonl"

WORKSPACE = f"""
[phase]
id = "35"
title = "test copy of phase 35"

[[items]]
id = "quiz-passed"
title = "Phase quiz passed with at least 70%"
how = "distcheck quiz 35"

[quiz]
bank = "checks/quiz/35.json"
log = "{LOG_REL}"
pass_mark = 0.7
items_per_attempt = 10
"""


def make_workspace(root: Path, with_check: bool = False) -> Path:
    """Write checks/distcheck.toml and a copy of the bank under ``root``; returns the toml path."""
    (root / "checks" / "quiz").mkdir(parents=True, exist_ok=True)
    shutil.copy(BANK, root / "checks" / "quiz" / "35.json")
    if with_check:
        # another basename: an in-process pytester run cannot import a second module "test_quiz_passed"
        shutil.copy(CHECK, root / "checks" / "test_quiz_passed_copy.py")
    toml = root / "checks" / "distcheck.toml"
    toml.write_text(WORKSPACE)
    return toml


def right_answer(drawn) -> str:
    """The right answer to a drawn item as a learner would type it."""
    expected = drawn.expected()
    return expected if isinstance(expected, str) else f"{expected:.6g}"


def attempt_record(seed: int, wrong: int = 0, n: int = 10, bank_path: Path = BANK, seconds: float = 30.0,
                   mode: str = "graded") -> dict:
    """A complete log record answering the first ``wrong`` items wrongly ("skip") and the rest rightly,
    ``seconds`` per item."""
    drawn = draw_attempt(load_bank(bank_path), seed, n)
    answers = [{"item": d.item.id, "params": d.params, "given": "" if i < wrong else right_answer(d),
                "seconds": seconds} for i, d in enumerate(drawn)]
    return {"bank": "35", "seed": seed, "mode": mode, "status": "complete", "started": "2026-01-01T00:00:00+00:00",
            "finished": "2026-01-01T00:05:00+00:00", "answers": answers, "reported_score": (n - wrong) / n}


def write_log(root: Path, *records: dict | str) -> Path:
    """Write the quiz log under ``root``: dicts as JSON lines, strings as they are."""
    path = root / LOG_REL
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def section_text(markdown: str, heading: str) -> str | None:
    """The lines of the section under ``heading``, up to the next heading of the same or a higher level (its
    subsections included); ``None`` when the page has no such heading."""
    tokens = MarkdownIt("commonmark").parse(markdown)
    found = [(t.map[0], int(t.tag[1]), tokens[i + 1].content) for i, t in enumerate(tokens)
             if t.type == "heading_open" and t.map is not None]
    lines = markdown.split("\n")
    for k, (line, level, text) in enumerate(found):
        if text == heading:
            end = next((ln for ln, lv, _ in found[k + 1:] if lv <= level), len(lines))
            return "\n".join(lines[line:end])
    return None


def missing_sections(items: list[dict], root: Path) -> list[str]:
    """One line per item whose `taught_in` is absent or names a page or heading that does not exist."""
    problems = []
    for item in items:
        where = item.get("taught_in")
        if where is None:
            problems.append(f"{item['id']}: no taught_in")
            continue
        page = root / where["page"]
        if not page.is_file():
            problems.append(f"{item['id']}: page {where['page']} does not exist")
        elif (text := section_text(page.read_text(), where["section"])) is None:
            problems.append(f"{item['id']}: {where['page']} has no heading {where['section']!r}")
        else:
            flat = " ".join(text.split())  # line breaks are the page's layout, not what it says
            problems += [f"{item['id']}: {where['page']}, section {where['section']!r}, does not say {said!r}"
                         for said in where.get("says", []) if " ".join(said.split()) not in flat]
    return problems


DISTCHECK = shutil.which("distcheck", path=str(Path(sys.executable).parent)) or shutil.which("distcheck")


def spawn(root: Path, *args: str):
    """``distcheck quiz ARGS`` in a pseudo-terminal (a ``pexpect.spawn``) in the workspace ``root``."""
    import pexpect

    cmd = [sys.executable, "-m", "pytest_distcheck.cli"] if DISTCHECK is None else [DISTCHECK]
    # A terminal starts the quiz with SIGINT at its default; a background job (CI, `&`) inherits it ignored.
    return pexpect.spawn(cmd[0], [*cmd[1:], "quiz", *args], cwd=str(root), encoding="utf-8", timeout=30,
                         dimensions=(50, 200), preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
