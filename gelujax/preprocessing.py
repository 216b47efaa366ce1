"""Host-side preprocessing: the transforms of a task's splits done once, before training, and
the steps ``TaskSpec.preprocessing`` names (:data:`PREPROCESSING`, applied in order by
``TaskSpec.load_data``; each edits the ``Splits`` in place).

- The maths: :func:`scale_pixels`, :func:`add_uniform_noise` (Fig. 3's test-time noise),
  :func:`fit_zca` and :func:`apply_zca` (CIFAR-10's whitening), :func:`subtract_pixel_mean` and
  :func:`flip_double` (CIFAR-100's), :func:`group_tokens` (Twitter POS's tokens as tweets).
- The steps: ``zca``, ``pixel_mean``, ``flip_double``, ``spell_words``, ``group_tweets`` and
  ``embed_words`` (Twitter POS's spelling features, whole tweets and frozen embeddings).
"""

from __future__ import annotations

import numpy as np

from gelujax.registry import Registry

# Host-side preprocessing steps, applied in order by TaskSpec.load_data; each edits the Splits.
PREPROCESSING: Registry = Registry("preprocessing step")


def scale_pixels(x: np.ndarray) -> np.ndarray:
  """uint8 pixels -> float32 in [0, 1] (x / 255)."""
  return np.asarray(x, np.float32) / np.float32(255)


def add_uniform_noise(x: np.ndarray, a: float, rng: np.random.Generator) -> np.ndarray:
  """``x`` + independent Unif[-a, a] noise per element, float32, unclipped (robustness test)."""
  if a < 0:
    raise ValueError(f"Noise half-width a={a} is invalid: it must be >= 0.")
  return (np.asarray(x, np.float32) + rng.uniform(-a, a, np.shape(x))).astype(np.float32)


def fit_zca(x: np.ndarray, eps: float = 1e-5) -> tuple[np.ndarray, np.ndarray]:
  """Fits ZCA whitening on ``x`` [N, ...] (features = all axes but the first).

  With the centred data's covariance C = U diag(s) U^T (divided by N), the whitening matrix is
  W = U diag(1 / sqrt(s + eps)) U^T; :func:`apply_zca` maps x to (x - mean) W. With fewer
  examples than features (a subset, a fixture), C has rank below N and the same W is
  eps^(-1/2) I + V^T diag(1 / sqrt(s + eps) - eps^(-1/2)) V, with V and s from the thin SVD of
  the centred [N, D] data: exact, and an N x D decomposition in place of a D x D one.

  Returns:
    ``(mean [D], whitening [D, D])``, float32, computed in float64.
  """
  flat = np.asarray(x).reshape(len(x), -1)
  mean = flat.mean(0, dtype=np.float64)
  if len(flat) < flat.shape[1]:
    _, singular, v = np.linalg.svd(flat - mean, full_matrices=False)
    scale = 1 / np.sqrt(singular**2 / len(flat) + eps) - 1 / np.sqrt(eps)
    whitening = (v.T * scale) @ v
    whitening[np.diag_indices_from(whitening)] += 1 / np.sqrt(eps)
    return mean.astype(np.float32), whitening.astype(np.float32)
  covariance = np.zeros((flat.shape[1],) * 2)
  for start in range(0, len(flat), 4096):  # Chunks bound the float64 copy's memory.
    centred = flat[start : start + 4096] - mean
    covariance += centred.T @ centred
  s, u = np.linalg.eigh(covariance / len(flat))
  whitening = (u * (1 / np.sqrt(np.maximum(s, 0) + eps))) @ u.T
  return mean.astype(np.float32), whitening.astype(np.float32)


def apply_zca(x: np.ndarray, mean: np.ndarray, whitening: np.ndarray) -> np.ndarray:
  """(x - mean) @ whitening on flattened examples, reshaped back; float32."""
  flat = np.asarray(x, np.float32).reshape(len(x), -1)
  return ((flat - mean) @ whitening).reshape(np.shape(x))


def subtract_pixel_mean(train: np.ndarray, *others: np.ndarray) -> list[np.ndarray]:
  """Subtracts the per-pixel (and channel) mean of ``train`` from ``train`` and ``others``.

  Returns:
    float32 arrays, ``train`` first, then ``others`` in order.
  """
  mean = np.asarray(train).mean(0, dtype=np.float64)
  return [(np.asarray(x, np.float64) - mean).astype(np.float32) for x in (train, *others)]


def flip_double(inputs: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """Appends a horizontally flipped copy of each NHWC image (the CIFAR-100 doubled set)."""
  return (
    np.concatenate([inputs, inputs[:, :, ::-1]]),
    np.concatenate([targets, targets]),
  )


def group_tokens(
  tokens: np.ndarray, lengths: np.ndarray, length: int, fill: np.ndarray | int
) -> np.ndarray:
  """Consecutive runs of ``tokens`` as rows padded to ``length``: ``[N, ...]`` ->
  ``[len(lengths), length, ...]``, row ``i`` holding the ``lengths[i]`` tokens after those of
  the rows before it, then ``fill`` (a value or a token's worth of values).

  Raises:
    ValueError: ``lengths`` that do not sum to N, or a run longer than ``length``.
  """
  lengths = np.asarray(lengths, np.int64)
  if lengths.sum() != len(tokens) or (lengths > length).any() or (lengths < 0).any():
    raise ValueError(
      f"group_tokens: runs of lengths summing to {int(lengths.sum())} (the longest "
      f"{int(lengths.max(initial=0))}) for {len(tokens)} tokens and rows of {length}; the "
      f"lengths must be >= 0, at most {length}, and sum to the tokens."
    )
  out = np.empty((len(lengths), length, *tokens.shape[1:]), tokens.dtype)
  out[...] = fill
  rows = np.repeat(np.arange(len(lengths)), lengths)
  starts = np.cumsum(lengths) - lengths
  out[rows, np.arange(len(tokens)) - np.repeat(starts, lengths)] = tokens
  return out


@PREPROCESSING.register("zca")
def _zca(splits) -> None:
  """CIFAR-10: (x − 127.5)/128, then ZCA whitening (ε = 1e-5) fitted on the train split."""
  for split in splits.values():
    split["inputs"] = (split["inputs"].astype(np.float32) - np.float32(127.5)) / np.float32(128)
  mean, whitening = fit_zca(splits["train"]["inputs"], eps=1e-5)
  for split in splits.values():
    split["inputs"] = apply_zca(split["inputs"], mean, whitening)


@PREPROCESSING.register("pixel_mean")
def _pixel_mean(splits) -> None:
  """CIFAR-100: x/255 minus the per-pixel (h, w, c) mean of the train split."""
  names = ["train", *(name for name in splits if name != "train")]
  centred = subtract_pixel_mean(*(scale_pixels(splits[n]["inputs"]) for n in names))
  for name, inputs in zip(names, centred, strict=True):
    splits[name]["inputs"] = inputs


@PREPROCESSING.register("flip_double")
def _flip_double(splits) -> None:
  """CIFAR-100: the train split followed by its horizontally flipped copy (same targets)."""
  train = splits["train"]
  train["inputs"], train["targets"] = flip_double(train["inputs"], train["targets"])


@PREPROCESSING.register("spell_words")
def _spell_words(splits) -> None:
  """Twitter POS: each window's 3 word ids with their words' spelling, ``[N, 3]`` ->
  ``[N, 3, 1 + n-grams + flags]`` (:func:`gelujax.spelling.spell_windows`), for
  ``spelling_mlp_twitter_pos``."""
  from gelujax import spelling
  from gelujax.data.twitter import PAD_WORD

  vocab = splits.info["vocab"]
  pad_id = vocab.index(PAD_WORD)
  for name, split in splits.items():
    _check_windows("spell_words", name, split["inputs"], (2,))
    words = splits.info["words"][name]
    split["inputs"] = spelling.spell_windows(split["inputs"], words, pad_id=pad_id, pad=PAD_WORD)


def _check_windows(step: str, name: str, inputs: np.ndarray, ndims: tuple[int, ...]) -> None:
  """Refuses inputs that are not each token's window of word ids (``[N, 3]``, or ``[N, 3, K]``
  where ``ndims`` allows it), as a step out of order would give another step."""
  windows = inputs.ndim in ndims and inputs.shape[1] == 3
  if not windows or not np.issubdtype(inputs.dtype, np.integer):
    raise ValueError(
      f"Preprocessing step {step!r}: split {name!r} holds {inputs.dtype} inputs of shape "
      f"{list(inputs.shape)}, not each token's window of 3 word ids ([tokens, 3], or [tokens, 3, "
      "features] after 'spell_words'); the Twitter POS steps go in the order 'spell_words', "
      "'group_tweets' (and 'embed_words' with neither)."
    )


@PREPROCESSING.register("group_tweets")
def _group_tweets(splits) -> None:
  """Twitter POS: each tweet as one example, for a tagger that reads the whole tweet
  (``transformer_twitter_pos``).

  A token's features are its window's centre word's (its id, with ``spell_words`` before this
  step its spelling too), laid out tweet by tweet (:func:`group_tokens`, by
  ``info["tweet_lengths"]``): inputs ``[N, 3]`` -> ``[tweets, L]`` and ``[N, 3, K]`` ->
  ``[tweets, L, K]``, targets ``[N]`` -> ``[tweets, L]``, where L is the longest tweet of any
  split, so that every split has one shape. Beyond a tweet's end the word id is -1
  (``gelujax.models.PADDING_ID``: the model masks it), the spelling that of ``</s>`` (no
  n-grams, no flags) and the target -1 (no tag: the ``token_classification`` objective leaves
  it out). ``info["words"]`` keeps each split's tokens in order, as the loader gives them.
  """
  from gelujax import spelling
  from gelujax.data.twitter import PAD_WORD
  from gelujax.models import PADDING_ID

  lengths = splits.info.get("tweet_lengths")
  if lengths is None:
    raise ValueError(
      "Preprocessing step 'group_tweets' needs each split's tweet lengths (info['tweet_lengths'],"
      " which dataset 'twitter_pos' records); this data set has none."
    )
  length = max(int(np.max(lengths[name], initial=0)) for name in splits)
  for name, split in splits.items():
    inputs = split["inputs"]
    _check_windows("group_tweets", name, inputs, (2, 3))
    fill = PADDING_ID
    if inputs.ndim == 3:
      fill = [PADDING_ID, *spelling.spell_word(PAD_WORD, pad=PAD_WORD)]
    split["inputs"] = group_tokens(inputs[:, 1], lengths[name], length, np.asarray(fill))
    split["targets"] = group_tokens(split["targets"], lengths[name], length, -1)


@PREPROCESSING.register("embed_words")
def _embed_words(splits) -> None:
  """Twitter POS: the frozen lookup of each window's 3 words, concatenated ([N, 3] -> [N, 150]).

  The table is ``splits.info["embeddings"]`` (the pretrained 50-d tweet embeddings) when the
  data were loaded with one, else *(choice)* a frozen N(0, 1) table drawn with NumPy seed 0 (the
  same for every run: the published embeddings file is not retrievable). A frozen lookup is a
  constant function of the input, so it is done once here, as in the authors' code, rather than
  by an embedding layer in the model. The trainable substitute leaves this step out and gives
  the ids to ``embedding_mlp_twitter_pos``.
  """
  table = splits.info.get("embeddings")
  if table is None:
    table = np.random.default_rng(0).standard_normal((len(splits.info["vocab"]), 50))
  table = np.asarray(table, np.float32)
  for name, split in splits.items():
    _check_windows("embed_words", name, split["inputs"], (2,))
    ids = split["inputs"]
    split["inputs"] = table[ids].reshape(len(ids), -1)
