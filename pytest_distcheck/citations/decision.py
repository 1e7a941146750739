"""When the words around a citation state a design decision.

On the words a reader sees besides the citations (:mod:`.blocks`): no placeholder
(:data:`PLACEHOLDERS`: ``TODO``, ``lorem ipsum``, ``foo``...; one that is an everyday Spanish word,
:data:`EVERYDAY_SPANISH`, only in capitals), at least :data:`MIN_DECISION_WORDS` words,
and at least :data:`MIN_DISTINCT_WORDS` distinct content words (three letters or more once digits are
stripped, with a vowel, none of :data:`STOP_WORDS`, English and Spanish). The rule is documented for the learner in
docs/lab/03-megatron-fsdp-reading.md ("What counts"); why: docs/design/citations.md.
"""

from __future__ import annotations

import re

from pytest_distcheck.citations.syntax import CITATION
from pytest_distcheck.i18n import N_, _, ngettext

# "Megatron splits the weight by columns, so ..." has well over eight words.
MIN_DECISION_WORDS = 8
MIN_DISTINCT_WORDS = 5

PLACEHOLDERS = frozenset(
    "todo tbd fixme xxx wip placeholder filler lorem ipsum dolor amet consectetur adipiscing elit sed "
    "eiusmod tempor incididunt labore dolore magna aliqua enim minim veniam quis nostrud exercitation "
    "ullamco laboris nisi aliquip commodo consequat "
    "foo baz qux quux corge grault garply waldo plugh xyzzy blah asdf".split()
)
# A placeholder that is an everyday Spanish word ("todo el estado", all the state) is one only in capitals (TODO).
EVERYDAY_SPANISH = frozenset({"todo"})
STOP_WORDS = frozenset(
    "the and for are but not you all any can had her was one our out has him his how its may new now "
    "see two who did get let put say she too use this that with have from they will would there their "
    "what about which when make like than then them these some into more other only also been were "
    "here very just over such each one two three four five six seven eight nine ten".split()
    # Spanish, for notes written from docs/es/notes/TEMPLATE.md: articles, pronouns, prepositions, conjunctions.
    + "que los las del con por una uno unos unas para como pero más mas sus este esta esto estos estas ese esa "
    "eso esos esas aquel son está están ser fue hay han sin sobre entre desde hasta tras ante según cada cuando "
    "donde porque pues sino también tan muy solo sólo otro otra otros otras todo toda todos todas mismo misma "
    "nos les qué cual cuál quien quién así dos tres cuatro cinco seis siete ocho nueve diez".split()
)
PLACEHOLDER = N_("placeholder {word!r} in place of a stated decision")
_WORD = re.compile(r"[^\W_][\w'’-]*")
_VOWEL = re.compile(r"[aeiouyáéíóúü]")


def words(text: str) -> list[str]:
    """The words of ``text`` besides its citations."""
    return _WORD.findall(CITATION.sub(" ", text))


def decision_problem(text: str) -> str:
    """Why ``text`` (a statement, citations included) states no decision, or ``""`` when it does."""
    found = words(text)
    lowered = [w.lower().strip("'’-") for w in found]
    placeholder = next((w for w, low in zip(found, lowered, strict=True)
                        if low in PLACEHOLDERS and (low not in EVERYDAY_SPANISH or w.isupper())), None)
    if placeholder is not None:
        return _(PLACEHOLDER).format(word=placeholder)
    if len(found) < MIN_DECISION_WORDS:
        return too_few_words(len(found))
    # Digits are stripped first: "word1 word2 ... word8" is one word eight times.
    bare = [w.strip("0123456789_") for w in lowered]
    content = {w for w in bare if len(w) >= 3 and _VOWEL.search(w) and w not in STOP_WORDS}
    if len(content) < MIN_DISTINCT_WORDS:
        return too_few_distinct_words(len(content))
    return ""


def too_few_words(n: int) -> str:
    """Why ``n`` words (fewer than :data:`MIN_DECISION_WORDS`) state no decision."""
    return ngettext("{n} word besides citations, at least {min}", "{n} words besides citations, at least {min}",
                    n).format(n=n, min=MIN_DECISION_WORDS)


def too_few_distinct_words(n: int) -> str:
    """Why ``n`` distinct content words (fewer than :data:`MIN_DISTINCT_WORDS`) state no decision."""
    return ngettext("only {n} distinct content word besides citations, at least {min}: filler, repeated and stop "
                    "words say nothing",
                    "only {n} distinct content words besides citations, at least {min}: filler, repeated and stop "
                    "words say nothing", n).format(n=n, min=MIN_DISTINCT_WORDS)
