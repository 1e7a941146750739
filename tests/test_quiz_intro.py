"""The quiz's intro names every way out of an attempt: Ctrl-C and Ctrl-D (end of input)."""

from quiz_support import BANK

from pytest_distcheck.quiz.bank import load_bank
from pytest_distcheck.quiz.session import run_attempt


def test_the_intro_says_ctrl_d_also_abandons_logged_not_counted_answers_not_shown():
    said: list[str] = []

    def ask(prompt: str) -> str:
        raise EOFError  # end of input at the first item: nothing answered

    try:
        run_attempt(load_bank(BANK), 1, 10, ask, said.append)
    except EOFError:
        pass
    intro = " ".join(" ".join(said).split())
    assert "Ctrl-C or Ctrl-D (end of input)" in intro
    assert "logged as abandoned: not counted, and no answers are shown" in intro


def test_what_a_learner_reads_about_the_quiz_names_no_timing_rule():
    """The intro (both languages), `distcheck quiz --help` and the quiz rows of the start pages say how to answer
    and how an attempt counts, never how fast: how the gate reads an attempt's duration is for graders (docs/ci),
    not an instruction to the learner."""
    import re
    from pathlib import Path

    import pytest_distcheck.commands.quiz as command
    from pytest_distcheck import i18n
    from pytest_distcheck.i18n import _
    from pytest_distcheck.quiz.session import HEADER, HOW_GRADED, HOW_PRACTICE, INSTRUCTIONS

    docs = Path(__file__).resolve().parents[1] / "docs"
    texts = [command.__doc__]
    for lang in ("es", i18n.DEFAULT):
        i18n.use(lang)
        texts += [_(m) for m in (HEADER, HOW_GRADED, HOW_PRACTICE, INSTRUCTIONS)]
    for page in (docs / "README.md", docs / "es" / "README.md"):
        texts += [line for line in page.read_text(encoding="utf-8").splitlines() if "quiz" in line]
    timing = re.compile(r"second|segundo|fast|rápid|quick|speed|velocidad|timed|time limit|límite de tiempo|"
                        r"too soon|demasiado pronto|per item|por pregunta", re.I)
    assert [t for t in texts if timing.search(t)] == []
