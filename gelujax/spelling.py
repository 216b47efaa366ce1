"""What a word's spelling says, as integer features a model can embed: Twitter POS's
spelling-aware substitute for the paper's pretrained tweet embeddings.

Many of Twitter POS's test tokens are not among the train split's words (a Twitter result's
``Out of vocabulary`` line says how many), so a table of train words gives them all one vector.
Their spelling still says much about their tag (a ``#hashtag``, an ``@mention``, a URL, ``-ing``
and ``-ly`` endings, capitals, digits, emoticons). Each token gets, built from its own
characters alone (nothing is fitted, so nothing comes from another split):

- :func:`char_ngrams`: its lowercased character n-grams (fastText's subwords, Bojanowski et al.
  2017), hashed into ``buckets`` rows of a trainable table; the model averages their vectors.
- :func:`word_shape`: :data:`FLAGS`, yes/no facts of its shape.

:func:`spell_windows` lays them out beside each window's word ids: ``[N, 3]`` ids ->
``[N, 3, 1 + max_ngrams + len(FLAGS)]`` int32: the word id, then the n-gram rows (``-1`` where
a word has fewer), then the flags (0 or 1). ``</s>``, the padding beyond a tweet's ends, has no
n-grams and no flags.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable, Sequence

import numpy as np

# Hash buckets of the n-gram table, and the most n-grams kept per word (prefixes and suffixes
# first, so that a long word keeps its ends).
BUCKETS = 8192
MAX_NGRAMS = 24
NGRAM_SIZES = (1, 2, 3, 4)
EMOTICON = re.compile(
  r"^(?:[<>]?[:;=8xX][\-o*'^]?[)\](\[dDpP/\\|*$@3]+|<3+|[)\](\[dDpP/\\]+[\-o*']?[:;=8])$"
)
URL = re.compile(r"^(?:https?://|www\.)|\.(?:com|org|net|ly|co)(?:/|$)", re.IGNORECASE)
# Each flag: a name and the test of the word as the file spells it.
FLAGS: tuple[tuple[str, Callable[[str], bool]], ...] = (
  ("capitalised", lambda w: w[:1].isupper()),
  ("all capitals", lambda w: sum(c.isalpha() for c in w) >= 2 and w.upper() == w),
  ("has a digit", lambda w: any(c.isdigit() for c in w)),
  ("a number", lambda w: bool(re.fullmatch(r"[\d.,:/\-]*\d[\d.,:/\-]*", w))),
  ("@mention", lambda w: w.startswith("@") and len(w) > 1),
  ("#hashtag", lambda w: w.startswith("#") and len(w) > 1),
  ("URL", lambda w: bool(URL.search(w))),
  ("no letter or digit", lambda w: not any(c.isalnum() for c in w)),
  ("emoticon", lambda w: bool(EMOTICON.match(w))),
  ("non-ASCII", lambda w: any(ord(c) > 127 for c in w)),
  ("hyphen or apostrophe", lambda w: any(c in "-'’" for c in w)),
)


def bucket(ngram: str, buckets: int = BUCKETS) -> int:
  """The table row of an n-gram: CRC-32 of its UTF-8 bytes, modulo ``buckets`` (stable across
  processes, unlike Python's ``hash``)."""
  return zlib.crc32(ngram.encode("utf-8")) % buckets


def char_ngrams(word: str, max_ngrams: int = MAX_NGRAMS) -> list[str]:
  """The word's n-grams: the lowercased word in ``<`` and ``>``, its prefixes and suffixes of
  each size in :data:`NGRAM_SIZES` (``<w``, ``<wo``, ... and ``d>``, ``rd>``, ...), then its
  inner n-grams, without repeats, the first ``max_ngrams`` kept."""
  marked = f"<{word.lower()}>"
  found = [marked]
  found += [marked[: n + 1] for n in NGRAM_SIZES if n + 1 < len(marked)]
  found += [marked[-(n + 1) :] for n in NGRAM_SIZES if n + 1 < len(marked)]
  found += [marked[i : i + n] for n in NGRAM_SIZES for i in range(1, len(marked) - n)]
  return list(dict.fromkeys(found))[:max_ngrams]


def word_shape(word: str) -> list[int]:
  """:data:`FLAGS` of the word, 0 or 1 each."""
  return [int(test(word)) for _, test in FLAGS]


def spell_word(
  word: str, *, pad: str, buckets: int = BUCKETS, max_ngrams: int = MAX_NGRAMS
) -> list[int]:
  """The n-gram rows (``-1`` filled to ``max_ngrams``) and flags of one word; none for ``pad``."""
  if word == pad:
    return [-1] * max_ngrams + [0] * len(FLAGS)
  rows = [bucket(g, buckets) for g in char_ngrams(word, max_ngrams)]
  return rows + [-1] * (max_ngrams - len(rows)) + word_shape(word)


def spell_windows(
  ids: np.ndarray,
  words: Sequence[str],
  *,
  pad_id: int,
  pad: str,
  buckets: int = BUCKETS,
  max_ngrams: int = MAX_NGRAMS,
) -> np.ndarray:
  """Each window's word ids with their words' spelling features.

  Args:
    ids: int ``[N, 3]``: the left, centre and right word ids of each token's window, ``pad_id``
      beyond a tweet's ends.
    words: the N tokens as the file spells them, in order (a window's left and right words are
      its neighbours, where they are not ``pad_id``).
    pad_id, pad: the padding word's id and spelling.

  Returns:
    int32 ``[N, 3, 1 + max_ngrams + len(FLAGS)]``.
  """
  n = len(words)
  if ids.shape != (n, 3):
    raise ValueError(
      f"spell_windows: {ids.shape[0]} windows of shape {list(ids.shape[1:])} for {n} words; "
      "expected [N, 3] windows, one per word."
    )
  spelled: dict[str, list[int]] = {}

  def spell(word: str) -> list[int]:
    if word not in spelled:
      spelled[word] = spell_word(word, pad=pad, buckets=buckets, max_ngrams=max_ngrams)
    return spelled[word]

  out = np.empty((n, 3, 1 + max_ngrams + len(FLAGS)), np.int32)
  out[:, :, 0] = ids
  for i, word in enumerate(words):
    left = pad if ids[i, 0] == pad_id else words[i - 1]
    right = pad if ids[i, 2] == pad_id else words[i + 1]
    for j, w in enumerate((left, word, right)):
      out[i, j, 1:] = spell(w)
  return out
