"""The vocabulary a Megatron-LM job builds: ``--vocab-size``, or the size of the named
tokenizer's vocabulary, padded as Megatron pads it. A script that names neither leaves
the caller to warn (the base plan's vocabulary is then a guess)."""

from __future__ import annotations

from typing import Any

from engine.exports.import_values import Sizes

_TOKENIZER_VOCAB = {
    "GPT2BPETokenizer": (50257, "GPT-2's BPE vocabulary"),
    "BertWordPieceLowerCase": (30522, "BERT's uncased WordPiece vocabulary"),
    "BertWordPieceCase": (28996, "BERT's cased WordPiece vocabulary"),
    "Llama2Tokenizer": (
        32000,
        "Llama-2's SentencePiece vocabulary (the --tokenizer-model decides)",
    ),
}


def padded_vocab(a: dict[str, Any], tp: int, s: Sizes, res: list[str]) -> int | None:
    """The padded vocabulary Megatron builds: ``--vocab-size`` or the named tokenizer's,
    rounded up to ``--make-vocab-size-divisible-by`` (128) × TP
    (``megatron/training/tokenizer/tokenizer.py`` ``_vocab_size_with_padding``)."""
    kind = a.get("--tokenizer-type")
    if kind is None and "--merge-file" in a:
        kind = "GPT2BPETokenizer"  # a GPT-2 vocab + merges pair
    raw = s.optional("--vocab-size", a.get("--vocab-size"))
    if raw is None and str(kind) in _TOKENIZER_VOCAB:
        raw, why = _TOKENIZER_VOCAB[str(kind)]
        res.append(f"vocabulary {raw:,}: --tokenizer-type {kind}, {why}")
    if raw is None:
        return None
    div = s.size("--make-vocab-size-divisible-by", a.get("--make-vocab-size-divisible-by"), 128, "")
    multiple = div * tp
    padded = -(-raw // multiple) * multiple
    if padded != raw:
        res.append(f"vocabulary {raw:,} padded to {padded:,} (a multiple of {div} × TP {tp})")
    return padded
