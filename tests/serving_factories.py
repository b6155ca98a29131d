"""A real local tokenizer for serving tests: a BPE trained here on serve-bench's prompt words,
split on whitespace, saved as tokenizer.json and read back by serve-bench's own loader."""

from __future__ import annotations

from pathlib import Path

from flowrate.serving import prompts


def word_tokenizer(folder: Path, vocab_size: int = 200, context: int | None = None) -> prompts.LocalTokenizer:
    """With the default vocabulary every prompt word is one token ("the quick" -> 2, "qu" -> 1);
    a small one splits words. ``context``: a config.json with that max_position_embeddings."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<unk>"])
    tok.train_from_iterator([" ".join(prompts.WORDS)] * 5, trainer)
    tok.save(str(folder / "tokenizer.json"))
    if context is not None:
        (folder / "config.json").write_text(f'{{"max_position_embeddings": {context}}}')
    return prompts.load_tokenizer(folder)
