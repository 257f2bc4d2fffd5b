"""Switchable text cleaning that lives *inside* the saved tokenizer.

Every step of :class:`CleaningConfig` becomes a ``tokenizers`` normalizer, so the cleaning is stored in
``tokenizer.json`` and runs again at encode time: a model never sees text cleaned differently from its
training text.  :func:`clean_text` applies the very same steps with plain Python (``unicodedata`` and
``re``) so a cleaned string can be inspected without a tokenizer.

The steps run in a fixed order, chosen so that earlier steps never hide text from later ones:

1. ``unicode_normalization`` (NFC/NFD/NFKC/NFKD), first, so e.g. full-width letters become ASCII before
   the regexes below look at them.
2. ``strip_html``: tags are deleted, then the common entities are decoded.
3. ``strip_urls``, 4. ``strip_emails``, 5. ``strip_handles``: an e-mail is removed before handles so
   ``a@b.com`` is never half-stripped as the handle ``@b``.
6. ``expand_contractions``: before punctuation removal, which would delete the apostrophes.
7. ``lowercase``, 8. ``remove_digits``, 9. ``remove_punctuation``.

Every step is a ``tokenizers`` normalizer (``NFC``..``NFKD``, ``Lowercase`` and regex ``Replace``;
contractions are expanded by ``Replace`` rules too), so no step needs Python at encode time.  Python
only differs in *how* ``clean_text`` mirrors two of them: ``re`` has no ``\\p{P}`` class, so punctuation
is found with ``unicodedata.category``, and lowercasing goes character by character like the Rust code.

Removed spans are deleted, not replaced by a space, and runs of whitespace are left as they are: the
steps never touch whitespace themselves, which keeps character-level text exact when cleaning is off.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import string
import unicodedata
from dataclasses import dataclass, field

from tokenizers import Regex, normalizers

__all__ = ["CleaningConfig", "UNICODE_NORMALIZATION_FORMS", "build_normalizer", "clean_text"]

UNICODE_NORMALIZATION_FORMS = ("NFC", "NFD", "NFKC", "NFKD")

_APOSTROPHE = "['\u2019]"  # ASCII apostrophe and the typographic right single quote
# Whole words whose expansion is irregular; they run before the generic suffix rules.
_IRREGULAR_CONTRACTIONS = (
    ("can't", "cannot"),
    ("won't", "will not"),
    ("shan't", "shall not"),
    ("ain't", "is not"),
)
# Suffixes expanded after any word character ("don't" -> "do not", "I'm" -> "I am").  "'s" is left
# alone on purpose: it is as often a possessive ("John's") as "is"/"has".
_SUFFIX_CONTRACTIONS = (
    ("n't", " not"),
    ("'re", " are"),
    ("'ll", " will"),
    ("'ve", " have"),
    ("'d", " would"),
    ("'m", " am"),
)
_HTML_ENTITIES = (
    ("&nbsp;", " "),
    ("&lt;", "<"),
    ("&gt;", ">"),
    ("&quot;", '"'),
    ("&#39;", "'"),
    ("&apos;", "'"),
    ("&amp;", "&"),
)  # &amp; last, so "&amp;lt;" becomes "&lt;", not "<"
_ASCII_SYMBOLS = "$+<=>^`|~"  # in string.punctuation but Unicode category S (symbol), not P


@dataclass
class CleaningConfig:
    """Which cleaning steps to apply; all off by default, so text passes through unchanged.

    Each field switches one step (see the module docstring for the order).  Bad values raise
    ``ValueError`` naming the field, the value and what is allowed.
    """

    lowercase: bool = field(default=False, metadata={"help": "Lowercase all text."})
    strip_html: bool = field(
        default=False,
        metadata={"help": "Delete HTML tags (<p>, </div>...) and decode &amp;, &lt;, &nbsp;..."},
    )
    strip_urls: bool = field(
        default=False, metadata={"help": "Delete URLs (http://, https://, ftp://, www.)."}
    )
    strip_emails: bool = field(default=False, metadata={"help": "Delete e-mail addresses."})
    strip_handles: bool = field(default=False, metadata={"help": "Delete social-media handles (@user)."})
    expand_contractions: bool = field(
        default=False,
        metadata={"help": "Expand English contractions: don't -> do not, I'm -> I am, can't -> cannot."},
    )
    remove_digits: bool = field(
        default=False, metadata={"help": "Delete digits (any Unicode decimal digit)."}
    )
    remove_punctuation: bool = field(
        default=False,
        metadata={"help": "Delete punctuation (Unicode category P) and the ASCII symbols $+<=>^`|~."},
    )
    unicode_normalization: str | None = field(
        default=None,
        metadata={
            "help": "Unicode normalization form applied first.",
            "choices": UNICODE_NORMALIZATION_FORMS,
        },
    )

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "unicode_normalization":
                if value is not None and value not in UNICODE_NORMALIZATION_FORMS:
                    raise ValueError(
                        f"unicode_normalization={value!r} is not supported; "
                        f"allowed values: None, {', '.join(repr(v) for v in UNICODE_NORMALIZATION_FORMS)}."
                    )
            elif not isinstance(value, bool):
                raise ValueError(f"{f.name}={value!r} must be a bool (True or False).")

    @property
    def is_noop(self) -> bool:
        """True when no step is switched on (the text is left exactly as it is)."""
        return not _steps(self)


# --------------------------------------------------------------------------------------------------
# Steps: each one knows its `tokenizers` normalizer and its plain-Python equivalent.
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _UnicodeNormalize:
    """Unicode normalization (NFC/NFD/NFKC/NFKD): ``unicodedata.normalize`` in Python."""

    form: str

    def normalizer(self) -> normalizers.Normalizer:
        return getattr(normalizers, self.form)()

    def apply(self, text: str) -> str:
        return unicodedata.normalize(self.form, text)


@dataclass(frozen=True)
class _Lowercase:
    """Lowercasing, character by character (as the Rust normalizer does: a final Σ becomes σ, not ς)."""

    def normalizer(self) -> normalizers.Normalizer:
        return normalizers.Lowercase()

    def apply(self, text: str) -> str:
        return "".join(ch.lower() for ch in text)


@dataclass(frozen=True)
class _RegexReplace:
    """Replace every match of ``pattern`` by the literal ``replacement``.

    The pattern is written in the subset of regex syntax on which Oniguruma (used by ``tokenizers``)
    and Python's ``re`` agree: ``\\b``, ``\\w``, ``\\d``, ``\\s``, classes and fixed-width look-behind.
    """

    pattern: str
    replacement: str

    def normalizer(self) -> normalizers.Normalizer:
        return normalizers.Replace(Regex(self.pattern), self.replacement)

    def apply(self, text: str) -> str:
        return _compile(self.pattern).sub(lambda _match: self.replacement, text)


@dataclass(frozen=True)
class _RemovePunctuation:
    """Delete punctuation: ``\\p{P}`` in Oniguruma; Python ``re`` has no ``\\p{..}``, so in Python the
    Unicode category is looked up per character with ``unicodedata.category``."""

    def normalizer(self) -> normalizers.Normalizer:
        return normalizers.Replace(Regex(r"[\p{P}" + _ASCII_SYMBOLS + "]"), "")

    def apply(self, text: str) -> str:
        return "".join(ch for ch in text if not _is_punctuation(ch))


_Step = _UnicodeNormalize | _Lowercase | _RegexReplace | _RemovePunctuation


@functools.cache
def _compile(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _is_punctuation(ch: str) -> bool:
    return ch in string.punctuation or unicodedata.category(ch).startswith("P")


def _case_variants(source: str, target: str, *, title: bool) -> list[tuple[str, str]]:
    """The lower-, UPPER- and (for whole words, ``title=True``) Title-case spellings of a rule."""
    variants = [(source, target), (source.upper(), target.upper())]
    if title:
        variants.append((source[0].upper() + source[1:], target[0].upper() + target[1:]))
    return variants


def _contraction_rules() -> list[_RegexReplace]:
    """Regex rules expanding contractions; irregular whole words first, then generic suffixes."""
    rules = []
    for source, target in _IRREGULAR_CONTRACTIONS:
        for src, tgt in _case_variants(source, target, title=True):
            rules.append(_RegexReplace(r"\b" + src.replace("'", _APOSTROPHE) + r"\b", tgt))
    for source, target in _SUFFIX_CONTRACTIONS:
        for src, tgt in _case_variants(source, target, title=False):
            rules.append(_RegexReplace(r"(?<=\w)" + src.replace("'", _APOSTROPHE) + r"\b", tgt))
    return rules


def _html_rules() -> list[_RegexReplace]:
    """Delete tags (including comments and tags spanning lines), then decode the common entities."""
    rules = [_RegexReplace(r"<[^<>]+>", "")]
    rules += [_RegexReplace(entity, char) for entity, char in _HTML_ENTITIES]  # no regex metacharacters
    return rules


# A URL runs to the next whitespace, minus trailing sentence punctuation ("see https://x.org.").
_URL_RULE = _RegexReplace(r"""(?:\b(?:https?|ftp)://|\bwww\.)[^\s<>"]*[^\s<>".,;:!?)\]}']""", "")
_EMAIL_RULE = _RegexReplace(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+", "")
_HANDLE_RULE = _RegexReplace(r"(?<![\w@])@\w+", "")
_DIGIT_RULE = _RegexReplace(r"\d", "")


def _steps(config: CleaningConfig) -> list[_Step]:
    """The ordered list of steps switched on in ``config``."""
    steps: list[_Step] = []
    if config.unicode_normalization is not None:
        steps.append(_UnicodeNormalize(config.unicode_normalization))
    if config.strip_html:
        steps += _html_rules()
    if config.strip_urls:
        steps.append(_URL_RULE)
    if config.strip_emails:
        steps.append(_EMAIL_RULE)
    if config.strip_handles:
        steps.append(_HANDLE_RULE)
    if config.expand_contractions:
        steps += _contraction_rules()
    if config.lowercase:
        steps.append(_Lowercase())
    if config.remove_digits:
        steps.append(_DIGIT_RULE)
    if config.remove_punctuation:
        steps.append(_RemovePunctuation())
    return steps


def build_normalizer(config: CleaningConfig | None) -> normalizers.Normalizer | None:
    """The ``tokenizers`` normalizer running every step of ``config``; ``None`` when nothing is on."""
    steps = _steps(config or CleaningConfig())
    if not steps:
        return None
    return normalizers.Sequence([step.normalizer() for step in steps])


def clean_text(text: str, config: CleaningConfig | None = None) -> str:
    """Apply the cleaning steps of ``config`` to ``text`` in plain Python.

    Gives the same result as the normalizer of a tokenizer trained with ``config``
    (``tokenizer.backend_tokenizer.normalizer.normalize_str(text)``).
    """
    for step in _steps(config or CleaningConfig()):
        text = step.apply(text)
    return text
