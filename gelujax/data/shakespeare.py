"""Tiny Shakespeare, character by character (a reader of :mod:`gelujax.data`).

``tiny_shakespeare``: the file ``input.txt`` of karpathy/char-rnn's ``data/tinyshakespeare``
(1,115,394 bytes of plain text), or in ``data_dir`` that file, or exactly one ``.txt`` file.
The vocabulary is the file's distinct characters, sorted (65 for the published file), as
nanoGPT's ``shakespeare_char`` makes it: ``info["vocab"]``, a character's id its index.

The text is split by position: the first 90% is the training text (nanoGPT's training split,
character for character, so its anchors compare), the next 5% the validation text and the last
5% the test text (nanoGPT's validation split, halved: it keeps no test text). Cutting by
position, not by sampling windows, keeps every test character out of every training window.

Each split is windows of ``block_size`` characters: ``inputs`` int16 ``[windows, block_size]``,
``targets`` int8 of the same shape, the character after each input (the next-character
objective is a tag per token, ``token_classification``). Training windows start at every
``train_stride``-th character (1: every window of the text, as nanoGPT draws them, a few
hundred MB in memory); validation and test windows lie end to end, so every character of the
split but the first is predicted exactly once, from the characters before it in its window;
the last window's targets past the split's end are -1 (no target).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gelujax.data.checksums import NotFound
from gelujax.data.sources import DATASETS, Splits, find

FILE = "input.txt"
# The split points, as fractions of the text: train up to the first, validation to the second.
SPLIT_AT = (0.9, 0.95)


def _find_text(folder: Path) -> tuple[bytes, str, list[Path]]:
  if not folder.is_dir():
    raise NotFound("no such folder")
  path = folder / FILE
  if not path.is_file():
    found = sorted(p for p in folder.glob("*.txt") if p.is_file())
    if not found:
      raise NotFound(f"no {FILE}")
    if len(found) > 1:
      raise ValueError(
        f"Folder {folder}: expected {FILE} or exactly one .txt file, found "
        f"{[p.name for p in found]}."
      )
    path = found[0]
  return path.read_bytes(), f"text {path}", [path]


def split_text(text: str) -> dict[str, str]:
  """The training, validation and test texts: the text cut at `SPLIT_AT`."""
  first, second = (int(len(text) * f) for f in SPLIT_AT)
  return {"train": text[:first], "validation": text[first:second], "test": text[second:]}


def windows(ids: np.ndarray, block_size: int, stride: int) -> dict[str, np.ndarray]:
  """``inputs`` and ``targets`` of the windows of ``block_size`` ids starting every ``stride``
  ids: each target the id after its input; where a window runs past the text, its inputs are 0
  and its targets -1. Windows start wherever at least one target follows."""
  count = max(-(-(len(ids) - 1) // stride), 0)
  starts = np.arange(count) * stride
  index = starts[:, None] + np.arange(block_size + 1)[None, :]
  padded = np.concatenate([ids.astype(np.int16), np.full(block_size + 1, -1, np.int16)])
  rows = padded[index]
  inputs = np.maximum(rows[:, :-1], 0).astype(np.int16)
  targets = rows[:, 1:].astype(np.int8)
  return {"inputs": inputs, "targets": targets}


@DATASETS.register("tiny_shakespeare")
def _load_tiny_shakespeare(
  data_dir: Path | None, *, block_size: int = 64, train_stride: int = 1
) -> Splits:
  for name, value in (("block_size", block_size), ("train_stride", train_stride)):
    if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
      raise ValueError(
        f"tiny_shakespeare's {name} is {value!r}; it must be an integer >= 1 (characters)."
      )
  raw, record = find(
    "tiny_shakespeare",
    data_dir,
    _find_text,
    "Tiny Shakespeare (karpathy/char-rnn, data/tinyshakespeare/input.txt) is downloaded on "
    f"first use, or pass `data_dir` pointing at the folder that holds {FILE}.",
  )
  try:
    text = raw.decode("utf-8")
  except UnicodeDecodeError as e:
    raise ValueError(
      f"{record['source']}: not UTF-8 text (byte 0x{raw[e.start]:02x} at offset {e.start})."
    ) from None
  vocab = sorted(set(text))
  if len(vocab) > 127:  # targets are int8
    raise ValueError(
      f"{record['source']}: {len(vocab)} distinct characters; a character-level vocabulary "
      "here holds at most 127."
    )
  texts = split_text(text)
  if min(len(t) for t in texts.values()) < 2:
    raise ValueError(
      f"{record['source']}: {len(text)} characters are too few to split into training, "
      "validation and test texts of at least 2 characters each."
    )
  lookup = np.zeros(max(map(ord, vocab)) + 1, np.int16)
  lookup[[ord(c) for c in vocab]] = np.arange(len(vocab), dtype=np.int16)
  splits = {}
  for name, part in texts.items():
    ids = lookup[np.frombuffer(part.encode("utf-32-le"), np.uint32)]
    stride = train_stride if name == "train" else block_size
    splits[name] = windows(ids, block_size, stride)
  info = {
    "num_classes": len(vocab),
    "source": record["source"],
    "record": record,
    "vocab": vocab,
    "characters": {name: len(part) for name, part in texts.items()},
  }
  return Splits(splits, info)
