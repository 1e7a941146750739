"""Forgiving answer parsing: 0.375, 37.5%, 3/8 and friends; choice letters."""

import re

import pytest

from pytest_distcheck.quiz.answers import AMBIGUOUS_COMMA, AnswerError, comma_is_ambiguous, parse_choice, parse_number


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


@pytest.mark.parametrize("text", ["", "   ", "abc", "3/0", "1,2,3", "1,5.2", ",", "nan", "inf", "%", "GB"])
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


@pytest.mark.parametrize("text", ["2.12", "2.12e9", "2120000000", "2,120,000,000", "2.12B", "2.12 b", "2.12 billion",
                                  "2120M", "2120 million", "0.00212T", "2.12 x 10^9"])
def test_an_item_in_billions_reads_every_magnitude_alike(text):
    assert parse_number(text, "billion") == pytest.approx(2.12)


def test_a_plain_count_is_read_as_a_count_only_from_a_million_billion_down():
    assert parse_number("350000000", "billion") == pytest.approx(0.35)  # 350M parameters
    assert parse_number("175", "billion") == pytest.approx(175)  # GPT-3, in billions


@pytest.mark.parametrize(("text", "unit", "value"), [
    ("3750 MB", "GB", 3.75), ("3.75gb", "GB", 3.75), ("16 GiB", "GB", 16 * 2**30 / 1e9), ("2e9 B", "GB", 2.0),
    ("1.5 TB", "GB", 1500), ("4.18 ms", "ms", 4.18), ("0.00418 s", "ms", 4.18), ("4180 us", "ms", 4.18),
    ("0.2 TB/s", "GB/s", 200), ("5.04e21", "FLOPs", 5.04e21), ("5.04e21 FLOPs", "FLOPs", 5.04e21),
    ("5040e18", "FLOPs", 5.04e21), ("7.5B", "", 7.5e9), ("350M", "", 3.5e8), ("1.5x", "x", 1.5),
    ("1.23 USD", "USD", 1.23), ("$1.23", "USD", 1.23),
])
def test_units_of_the_items_kind_are_converted(text, unit, value):
    assert parse_number(text, unit) == pytest.approx(value)


@pytest.mark.parametrize(("text", "unit", "named"), [
    ("3750 ms", "GB", "give a number in GB (or with B, KB, MB, GB, TB"),
    ("2.1 GB", "billion", "give a number in billion (or with K, M, B, T)"),
    ("4 GB", "ms", "give a number in ms (or with s, ms, us, ns)"),
    ("3 parsecs", "", "give a number without a unit (or with K, M, B, T)"),
    ("40%", "GB", "a percentage, but this item asks for a number in GB"),
])
def test_a_unit_of_another_kind_names_the_expected_unit(text, unit, named):
    with pytest.raises(AnswerError, match=re.escape(named)) as info:
        parse_number(text, unit)
    assert "is not a number" not in str(info.value)


@pytest.mark.parametrize(("text", "unit", "value"), [
    ("0,375", "", 0.375),
    ("37,5%", "", 0.375),
    ("37,5 %", "", 0.375),
    ("2,5e9", "", 2.5e9),
    ("1,2 x 10^9", "", 1.2e9),
    ("1,5/2", "", 0.75),
    ("-0,5", "", -0.5),
    ("16,64 GB", "GB", 16.64),
    ("0,250", "", 0.25),  # nobody groups thousands after a leading 0
    ("1,0245", "", 1.0245),  # four digits after the comma group no thousands
    ("1,000/8", "", 125.0),  # a thousands comma stays one inside a fraction
])
def test_a_decimal_comma_is_read_where_it_cannot_group_thousands(text, unit, value):
    assert parse_number(text, unit) == pytest.approx(value)


@pytest.mark.parametrize(("text", "whole", "decimal"), [
    ("1,024", "1024", "1.024"), ("12,500 MB", "12500", "12.500"), ("100,000", "100000", "100.000"),
    ("1,024 x 10^3", "1024", "1.024"),
])
def test_a_comma_that_may_group_thousands_is_ambiguous_and_the_message_offers_both(text, whole, decimal):
    problem = comma_is_ambiguous(text)
    assert problem == AMBIGUOUS_COMMA.format(text=text, whole=whole, decimal=decimal)


@pytest.mark.parametrize("text", ["0,375", "1,0245", "1,234,567", "1,024.5", "1.024", "1024", "37,5%"])
def test_a_comma_that_reads_one_way_only_is_not_ambiguous(text):
    assert comma_is_ambiguous(text) is None


def test_a_unitless_item_asks_for_a_number_without_a_unit_in_spanish_too():
    from pytest_distcheck import i18n

    i18n.use("es")
    try:
        with pytest.raises(AnswerError) as info:
            parse_number("3 parsecs", "")
    finally:
        i18n.use(i18n.DEFAULT)
    assert str(info.value).endswith("da un número sin unidad (o con K, M, B, T)"), str(info.value)
