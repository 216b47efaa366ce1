"""The ARK TweetNLP files: Twitter POS (a reader of :mod:`gelujax.data`).

``twitter_pos``: the ARK TweetNLP Oct27 splits (not in TFDS): ``oct27.train``,
``oct27.dev``, ``oct27.test``, or in ``data_dir`` otherwise
exactly one file per split whose name (less a ``.txt`` suffix) ends in ``train``, ``dev``,
``test``. UTF-8, one ``token<TAB>tag`` per line, a blank line between tweets, 25 tags.
Splits train / validation (the dev file) / test. inputs int32 ``[tokens, 3]``: the word ids of
the left, centre and right words, ``</s>`` beyond either end of a tweet; targets int32
``[tokens]``, indices into ``info["tags"]`` (the authors' tag order). Without embeddings the
vocabulary is ``["</s>", "UUUNKKK"]`` then the sorted distinct train words, and
``info["embeddings"]`` is None. Option ``embeddings=<path>``: a text file with one word per
line followed by its vector (whitespace separated; a later duplicate replaces an earlier one,
as in the authors' code); the vocabulary is then the file's words in file order (it must
contain ``</s>`` and ``UUUNKKK``) and ``info["embeddings"]`` is float32 ``[vocab, dim]``.
Words outside the vocabulary map to ``UUUNKKK`` in every split. ``info["words"]``: per split,
the word of each token (its window's centre) as the file spells it, in the targets' order;
``info["tweet_lengths"]``: per split, the tokens of each tweet, int32 ``[tweets]``, in file
order (they sum to the split's tokens; the ``group_tweets`` step regroups the tokens by them).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from gelujax.data.checksums import NotFound
from gelujax.data.sources import DATASETS, Splits, find

PAD_WORD = "</s>"
UNKNOWN_WORD = "UUUNKKK"
# The order of the authors' tag_to_number, so that class indices match their code.
TWITTER_TAGS = (
  "N", "O", "S", "^", "Z", "L", "M", "V", "A", "R", "!", "D", "P",
  "&", "T", "X", "Y", "#", "@", "~", "U", "E", "$", ",", "G",
)  # fmt: skip
_FLOAT32_MAX = float(np.finfo(np.float32).max)

_TWITTER_SPLITS = {"train": "train", "validation": "dev", "test": "test"}


def _find_twitter_files(folder: Path) -> dict[str, Path]:
  if not folder.is_dir():
    raise NotFound("no such folder")
  if all((folder / f"oct27.{s}").is_file() for s in _TWITTER_SPLITS.values()):
    return {k: folder / f"oct27.{s}" for k, s in _TWITTER_SPLITS.items()}
  files = sorted(p for p in folder.iterdir() if p.is_file())
  matches = {
    k: [p for p in files if p.name.removesuffix(".txt").endswith(s)]
    for k, s in _TWITTER_SPLITS.items()
  }
  if not any(matches.values()):
    raise NotFound("no oct27.train / oct27.dev / oct27.test")
  for k, found in matches.items():
    if len(found) != 1:
      raise ValueError(
        f"Folder {folder}: expected exactly one file whose name ends in "
        f"{_TWITTER_SPLITS[k]!r} (the {k} split), found {[p.name for p in found]}."
      )
  return {k: found[0] for k, found in matches.items()}


def _read_twitter_dir(folder: Path):
  paths = _find_twitter_files(folder)
  return paths, f"ARK files {', '.join(str(p) for p in paths.values())}", list(paths.values())


def _read_ark(path: Path) -> list[tuple[list[str], list[int]]]:
  """Tweets of an ARK file as (tokens, tag indices)."""
  tag_index = {t: i for i, t in enumerate(TWITTER_TAGS)}
  tweets, tokens, tags = [], [], []
  for number, line in _text_lines(path):
    if not line.strip():
      if tokens:
        tweets.append((tokens, tags))
      tokens, tags = [], []
      continue
    fields = line.split("\t")
    if len(fields) != 2 or not fields[0]:
      raise ValueError(f"{path}, line {number}: expected 'token<TAB>tag', got {line!r}.")
    if fields[1] not in tag_index:
      raise ValueError(
        f"{path}, line {number}: unknown tag {fields[1]!r}; the 25 tags are "
        f"{' '.join(TWITTER_TAGS)}."
      )
    tokens.append(fields[0])
    tags.append(tag_index[fields[1]])
  if tokens:
    tweets.append((tokens, tags))
  if not tweets:
    raise ValueError(f"{path}: holds no tweets; expected token<TAB>tag lines, a blank line "
                     "between tweets.")  # fmt: skip
  return tweets


def _text_lines(path: Path):
  """``(number, line)`` of a UTF-8 text file (a BOM and any line ending allowed); a line that is
  not UTF-8 is a ValueError naming the file and the line."""
  with path.open("rb") as f:
    for number, raw in enumerate(f, 1):
      if number == 1:
        raw = raw.removeprefix(b"\xef\xbb\xbf")
      try:
        line = raw.decode("utf-8")
      except UnicodeDecodeError as e:
        raise ValueError(
          f"{path}, line {number}: not UTF-8 text (byte 0x{raw[e.start]:02x} at column "
          f"{e.start + 1}); the file must be UTF-8."
        ) from None
      yield number, line.rstrip("\r\n")


def _read_embeddings(path: Path) -> tuple[list[str], np.ndarray]:
  if not path.is_file():
    raise ValueError(
      f"embeddings={str(path)!r}: no such file; expected a text file with one word per line "
      "followed by its vector."
    )
  vectors: dict[str, list[float]] = {}
  for number, line in _text_lines(path):
    fields = line.split()
    if not fields or (number == 1 and len(fields) == 2 and all(v.isdigit() for v in fields)):
      continue  # Blank, or word2vec's "<words> <dimension>" header line.
    try:
      vector = [float(v) for v in fields[1:]]
    except ValueError:
      vector = []
    if not vector or (vectors and len(vector) != len(next(iter(vectors.values())))):
      raise ValueError(
        f"{path}, line {number}: expected a word followed by numbers, as many as on the "
        f"first line; got {line[:80]!r}."
      )
    if not all(math.isfinite(v) and abs(v) <= _FLOAT32_MAX for v in vector):
      raise ValueError(
        f"{path}, line {number}: the vector of {fields[0]!r} holds NaN or infinite values (or "
        f"values beyond float32's {_FLOAT32_MAX:.3g}); every value must be a finite float32."
      )
    vectors[fields[0]] = vector
  if not vectors:
    raise ValueError(f"{path}: holds no word vectors; expected one word and its vector a line.")
  for word in (PAD_WORD, UNKNOWN_WORD):
    if word not in vectors:
      raise ValueError(f"{path}: the embeddings must include the word {word!r}.")
  return list(vectors), np.asarray(list(vectors.values()), np.float32)


def _window_ids(
  tweets: list[tuple[list[str], list[int]]], ids: dict[str, int]
) -> dict[str, np.ndarray]:
  unknown = ids[UNKNOWN_WORD]
  inputs, targets = [], []
  for tokens, tags in tweets:
    padded = [ids[PAD_WORD], *(ids.get(w, unknown) for w in tokens), ids[PAD_WORD]]
    inputs.extend(padded[i : i + 3] for i in range(len(tokens)))
    targets.extend(tags)
  return {
    "inputs": np.asarray(inputs, np.int32).reshape(-1, 3),
    "targets": np.asarray(targets, np.int32),
  }


@DATASETS.register("twitter_pos")
def _load_twitter_pos(data_dir: Path | None, *, embeddings: str | Path | None = None) -> Splits:
  paths, record = find(
    "twitter_pos",
    data_dir,
    _read_twitter_dir,
    "It is not in TFDS: the ARK TweetNLP part-of-speech data (Owoputi et al. 2013, twpos-data) "
    "is downloaded on first use, or pass `data_dir` pointing at its oct27.splits folder "
    "(oct27.train, oct27.dev, oct27.test; token<TAB>tag per line, a blank line between tweets).",
  )
  tweets = {k: _read_ark(p) for k, p in paths.items()}
  if not embeddings:
    train_words = {w for tokens, _ in tweets["train"] for w in tokens}
    vocab = [PAD_WORD, UNKNOWN_WORD, *sorted(train_words - {PAD_WORD, UNKNOWN_WORD})]
    vectors = None
  else:
    vocab, vectors = _read_embeddings(Path(embeddings))
  ids = {w: i for i, w in enumerate(vocab)}
  info = {
    "num_classes": len(TWITTER_TAGS),
    "source": record["source"],
    "record": record,
    "vocab": vocab,
    "tags": list(TWITTER_TAGS),
    "embeddings": vectors,
    "words": {k: [w for tokens, _ in t for w in tokens] for k, t in tweets.items()},
    "tweet_lengths": {
      k: np.asarray([len(tokens) for tokens, _ in t], np.int32) for k, t in tweets.items()
    },
  }
  return Splits({k: _window_ids(t, ids) for k, t in tweets.items()}, info)
