"""BERT's WordPiece tokenizer in plain Python, for the numpy encoder of a cold query.

The ``tokenizers`` package costs about 55 ms in a new process (8 ms to import, 47 ms to build the
tokenizer from ``tokenizer.json``), more than the forward pass that encodes a query text. This module
reads the same ``tokenizer.json`` (its vocabulary and its special tokens) and does what that file
describes for one sequence when it is a BERT uncased tokenizer (the bundled MiniLM's is):

1. the special tokens (``[CLS]``, ``[SEP]``, ...) are matched in the raw text and kept whole;
2. the rest is normalised: control characters dropped and whitespace made a space, spaces put around
   CJK ideographs, accents stripped (NFD without the non-spacing marks), each character lowercased;
3. split on whitespace and around every punctuation character;
4. each word becomes its longest vocabulary pieces from the left (``##`` for a continuation), or
   ``[UNK]`` when one piece is missing or the word is longer than ``max_input_chars_per_word``;
5. ``[CLS]`` + the pieces (truncated to ``max_len - 2``) + ``[SEP]``.

:func:`load` returns None for a ``tokenizer.json`` that describes anything else, and the encoder then
uses ``tokenizers``, as it does for a text with a character this module does not cover
(``COVERED_BELOW``). ``tests/test_wordpiece.py`` checks that both give the same ids for every code point
covered and for thousands of texts.
"""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path
from typing import Any

#: White_Space characters (Unicode's property, which ``tokenizers`` uses, not ``str.isspace``)
_WHITESPACE = frozenset("\t\n\r \x0b\x0c\x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000"
                        + "".join(chr(c) for c in range(0x2000, 0x200B)))
_CONTROL = frozenset(("Cc", "Cf", "Co", "Cs"))  # not Cn: tokenizers keeps unassigned characters
_PUNCTUATION = frozenset(("Pc", "Pd", "Pe", "Pf", "Pi", "Po", "Ps"))
_CJK = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
        (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))
#: the texts this module tokenizes: every character below U+0600 (Latin, Greek, Cyrillic, Armenian, Hebrew
#: and the combining marks). Above it ``tokenizers``' older Unicode tables disagree with Python's for
#: characters assigned since (759 code points: some count as letters there and as marks or punctuation
#: here), so such a text goes to ``tokenizers``.
COVERED_BELOW = "\u0600"
_EXPECTED = {  # the parts of tokenizer.json this module implements, as they must read
    "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                   "strip_accents": None, "lowercase": True},
    "pre_tokenizer": {"type": "BertPreTokenizer"},
}


def _is_cjk(cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in _CJK)


def _dropped(ch: str) -> bool:
    """Removed by the normaliser's cleaning: NUL, U+FFFD and control / format / private-use /
    surrogate characters other than tab, newline and carriage return."""
    if ch in "\t\n\r":
        return False
    return ch in "\x00\ufffd" or unicodedata.category(ch) in _CONTROL


def _is_punctuation(ch: str) -> bool:
    return (ch.isascii() and not ch.isalnum() and 33 <= ord(ch) <= 126) or unicodedata.category(ch) in _PUNCTUATION


class WordPiece:
    """The tokenizer of one ``tokenizer.json`` (see the module text)."""

    def __init__(self, vocab: dict[str, int], specials: dict[str, int], unk: str, prefix: str, max_chars: int,
                 cls_id: int, sep_id: int, max_len: int) -> None:
        self.vocab = vocab
        self.specials = specials
        self.unk_id = vocab[unk]
        self.prefix = prefix
        self.max_chars = max_chars
        self.cls_id = cls_id
        self.sep_id = sep_id
        self.max_len = max_len
        self._split = (re.compile("|".join(re.escape(s) for s in sorted(specials, key=len, reverse=True)))
                       if specials else None)

    @staticmethod
    def covers(text: str) -> bool:
        """Does this module give ``tokenizers``' ids for ``text`` (see ``COVERED_BELOW``)?"""
        return not text or max(text) < COVERED_BELOW

    # -- the steps ----------------------------------------------------------------------------------
    @staticmethod
    def normalize(text: str) -> str:
        out = []
        for ch in text:
            if _dropped(ch):
                continue
            if ch in _WHITESPACE:
                out.append(" ")
            elif _is_cjk(ord(ch)):
                out.append(f" {ch} ")
            else:
                out.append(ch)
        stripped = "".join(c for c in unicodedata.normalize("NFD", "".join(out)) if unicodedata.category(c) != "Mn")
        return "".join(c.lower() for c in stripped)  # one character at a time: no final-sigma rule

    @staticmethod
    def words(text: str) -> list[str]:
        out: list[str] = []
        for chunk in text.split(" "):
            word: list[str] = []
            for ch in chunk:
                if _is_punctuation(ch):
                    if word:
                        out.append("".join(word))
                        word = []
                    out.append(ch)
                else:
                    word.append(ch)
            if word:
                out.append("".join(word))
        return out

    def pieces(self, word: str) -> list[int]:
        if len(word) > self.max_chars:
            return [self.unk_id]
        ids: list[int] = []
        start = 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else self.prefix + word[start:end]
                found = self.vocab.get(piece)
                if found is not None:
                    ids.append(found)
                    break
                end -= 1
            else:
                return [self.unk_id]
            start = end
        return ids

    def _segment(self, text: str) -> list[int]:
        return [i for word in self.words(self.normalize(text)) for i in self.pieces(word)]

    # -- the whole ----------------------------------------------------------------------------------
    def ids(self, text: str) -> list[int]:
        """``[CLS]`` + the text's ids (at most ``max_len - 2``) + ``[SEP]``."""
        out: list[int] = []
        pos = 0
        if self._split is not None:
            for m in self._split.finditer(text):
                out += self._segment(text[pos:m.start()])
                out.append(self.specials[m.group()])
                pos = m.end()
        out += self._segment(text[pos:])
        return [self.cls_id, *out[:max(self.max_len - 2, 0)], self.sep_id]


def load(path: Path, max_len: int) -> WordPiece | None:
    """The tokenizer that ``path`` (a ``tokenizer.json``) describes, or None when it is not a BERT
    uncased WordPiece tokenizer with ``[CLS] $A [SEP]`` (the encoder then uses ``tokenizers``)."""
    try:
        spec: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))
        model = spec["model"]
        post = spec["post_processor"]
        if any(spec.get(key) != want for key, want in _EXPECTED.items()):
            return None
        if model.get("type") != "WordPiece" or post.get("type") != "TemplateProcessing":
            return None
        single = post["single"]
        if (len(single) != 3 or "Sequence" not in single[1] or single[1]["Sequence"].get("type_id") != 0
                or any(single[i].get("SpecialToken", {}).get("type_id") != 0 for i in (0, 2))):
            return None
        first, last = (post["special_tokens"][single[i]["SpecialToken"]["id"]]["ids"] for i in (0, 2))
        added = spec.get("added_tokens") or []
        if any(not t.get("special") or t.get("normalized") or t.get("single_word") or t.get("lstrip")
               or t.get("rstrip") for t in added) or len(first) != 1 or len(last) != 1:
            return None
        vocab = model["vocab"]  # str -> int, as JSON gives it (copying 30k entries would cost 9 ms)
        if not isinstance(vocab, dict):
            return None
        return WordPiece(vocab, {t["content"]: int(t["id"]) for t in added}, str(model["unk_token"]),
                         str(model.get("continuing_subword_prefix", "##")),
                         int(model.get("max_input_chars_per_word", 100)), int(first[0]), int(last[0]), max_len)
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError):
        return None
