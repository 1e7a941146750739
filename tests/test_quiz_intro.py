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
