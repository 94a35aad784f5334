"""The plain-Python WordPiece gives the ids of the ``tokenizers`` fast tokenizer for the bundled MiniLM:
for every code point it covers (alone and between letters), for the bundled docs and query texts, and
for thousands of random texts (accents, combining marks, punctuation, every kind of whitespace, control
characters, special tokens, words too long for WordPiece, texts longer than the model takes); a text it
does not cover goes to ``tokenizers``; a tokenizer.json it does not implement is refused."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from kernelskill.kb import wordpiece
from kernelskill.kb.embed import MAX_SEQ_LENGTH, NumpyBert, bundled_model_dir

tokenizers = pytest.importorskip("tokenizers")

MODEL = bundled_model_dir()
MAX_LEN = MAX_SEQ_LENGTH


@pytest.fixture(scope="module")
def pair():
    fast = tokenizers.Tokenizer.from_file(str(MODEL / "tokenizer.json"))
    fast.enable_truncation(MAX_LEN)
    fast.no_padding()
    wp = wordpiece.load(MODEL / "tokenizer.json", MAX_LEN)
    assert wp is not None, "the bundled MiniLM's tokenizer.json is a BERT uncased WordPiece tokenizer"
    return fast, wp


def _same(fast, wp, texts: list[str]) -> int:
    assert all(wp.covers(t) for t in texts)
    want = [e.ids for e in fast.encode_batch(texts)]
    for text, ids in zip(texts, want, strict=True):
        assert wp.ids(text) == ids, repr(text)
    return len(texts)


def test_every_covered_code_point(pair) -> None:
    fast, wp = pair
    chars = [chr(c) for c in range(ord(wordpiece.COVERED_BELOW))]
    assert _same(fast, wp, [f"x{c}y {c} A{c}{c}b" for c in chars] + chars) == 2 * len(chars)


def _random_texts(rng: random.Random, n: int) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    covered = [chr(c) for c in range(ord(wordpiece.COVERED_BELOW))]
    marks = [chr(c) for c in range(0x300, 0x370)]
    words = ("memory bandwidth coalesced shared tile warp shuffle reduction tensor core occupancy register "
             "GEMM convolution softmax layernorm atomic float4 __global__ threadIdx.x blockDim cudaMemcpy "
             "naïve café Ångström résumé ΣΑΣ straße İstanbul ǅ ŉ ΐ Ӂ [CLS] [SEP] [MASK] [PAD] [UNK] [cls]").split()
    spaces = ["", " ", "  ", "\t", "\n", "\r\n", "\x0b", "\x0c", "\x85", "\xa0", "\x00", "\x1f", "\x7f", "\xad"]
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(0, 40)):
            kind = rng.random()
            if kind < 0.4:
                parts.append(rng.choice(words))
            elif kind < 0.6:
                parts.append("".join(rng.choice(letters) for _ in range(rng.randint(1, 12))))
            elif kind < 0.8:
                parts.append("".join(rng.choice(covered) for _ in range(rng.randint(1, 6))))
            elif kind < 0.9:
                parts.append(rng.choice(letters) + "".join(rng.choice(marks) for _ in range(rng.randint(1, 3))))
            else:
                parts.append("".join(rng.choice(letters) for _ in range(rng.randint(95, 110))))  # about the limit
            parts.append(rng.choice(spaces))
        out.append("".join(parts))
    return out


def test_texts(pair) -> None:
    from kernelskill.kb.curate import bundled_skills_dir
    from kernelskill.kb.loader import load_skills

    fast, wp = pair
    skills = load_skills([bundled_skills_dir()])
    docs = [f"{d.title}\n{d.text}" for d in skills.docs] + [m.guidance for m in skills.methods]
    docs += [b.description for b in skills.bottlenecks]
    longest = " ".join(docs)  # far more than MAX_LEN tokens: truncated
    fixed = ["", " ", "[CLS]", "a[SEP]b", "[CLS][SEP]", "[MASK]x[PAD]", "ΣΑΣ", "x" * 100, "x" * 101, longest]
    n = _same(fast, wp, docs + fixed + _random_texts(random.Random(16), 4000))
    assert n > 4000
    assert len(wp.ids(longest)) == MAX_LEN


def test_the_encoder_tokenizes_as_tokenizers_and_hands_uncovered_texts_to_it(pair) -> None:
    fast, _ = pair
    bert = NumpyBert(MODEL)
    padded = tokenizers.Tokenizer.from_file(str(MODEL / "tokenizer.json"))
    padded.enable_truncation(MAX_LEN)
    padded.enable_padding(pad_id=0)
    for texts in (["short", "a longer text about memory bandwidth and coalesced loads", ""],
                  ["Arabic end of text mark \u061d", "naïve"]):
        ids, mask, types = bert.tokenize(texts)
        want = padded.encode_batch(texts)
        assert ids.tolist() == [e.ids for e in want]
        assert mask.tolist() == [[float(m) for m in e.attention_mask] for e in want]
        assert types.tolist() == [e.type_ids for e in want]
    assert bert._tokenizer is not None, "the uncovered text went to tokenizers"
    assert not bert.wordpiece.covers("\u061d")


@pytest.mark.parametrize("change", [
    {"normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                    "strip_accents": None, "lowercase": False}},
    {"pre_tokenizer": {"type": "Whitespace"}},
    {"model": {"type": "BPE"}},
    {"post_processor": {"type": "RobertaProcessing"}},
])
def test_other_tokenizers_are_refused(tmp_path: Path, change: dict) -> None:
    spec = json.loads((MODEL / "tokenizer.json").read_text())
    spec.update(change)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(spec))
    assert wordpiece.load(path, MAX_LEN) is None
    assert wordpiece.load(tmp_path / "missing.json", MAX_LEN) is None
