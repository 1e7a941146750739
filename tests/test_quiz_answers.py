"""Forgiving answer parsing: 0.375, 37.5%, 3/8 and friends; choice letters."""

import pytest

from pytest_distcheck.quiz.answers import AnswerError, parse_choice, parse_number


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0.375", 0.375),
        ("37.5%", 0.375),
        (" 37.5 % ", 0.375),
        ("3/8", 0.375),
        ("3 / 8", 0.375),
        (".375", 0.375),
        ("1.2e9", 1.2e9),
        ("1.2E+09", 1.2e9),
        ("1.2 x 10^9", 1.2e9),
        ("1.2×10^9", 1.2e9),
        ("1,024", 1024.0),
        ("1,234,567.5", 1234567.5),
        ("2_000", 2000.0),
        ("-0.5", -0.5),
        ("1.5x", 1.5),
        ("$1.23", 1.23),
    ],
)
def test_numbers_in_forgiving_formats(text, value):
    assert parse_number(text) == pytest.approx(value)


def test_the_items_unit_may_follow_the_number():
    assert parse_number("16.6 GB", "GB") == pytest.approx(16.6)
    assert parse_number("16.6gb", "GB") == pytest.approx(16.6)
    assert parse_number("4.18 ms", "ms") == pytest.approx(4.18)
    with pytest.raises(AnswerError):
        parse_number("16.6 GB", "ms")


@pytest.mark.parametrize("text", ["", "   ", "abc", "3/0", "1,2", "nan", "inf", "%", "GB"])
def test_not_numbers(text):
    with pytest.raises(AnswerError):
        parse_number(text, "GB")


def test_error_message_shows_the_accepted_formats():
    with pytest.raises(AnswerError, match=r"0\.375, 37\.5%, 3/8"):
        parse_number("three eighths")


@pytest.mark.parametrize(("text", "letter"), [("b", "B"), ("B", "B"), ("(c)", "C"), ("d)", "D"), ("1", "A"),
                                              (" 4 ", "D"), ("a.", "A")])
def test_choice_letters_and_numbers(text, letter):
    assert parse_choice(text, 4) == letter


@pytest.mark.parametrize("text", ["E", "5", "0", "", "AB", "yes"])
def test_choice_out_of_range(text):
    with pytest.raises(AnswerError, match="A-D"):
        parse_choice(text, 4)
