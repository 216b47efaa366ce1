"""The GELU paper's experiments as task specifications: data, model, loss, optimizer, schedule.

A :class:`TaskSpec` is a frozen dataclass of plain values (it is written to ``config.json``),
each checked once, when the spec is made. :func:`build` turns a spec and its data
(:meth:`TaskSpec.load_data`: the data with host-side preprocessing done) into what the engine
trains, `gelujax.parts.Parts`: the model (its activation resolved), the optimizer
(`gelujax.optimizers.build`), the objective, i.e. batch preparation, loss, metrics, regularizer
(`gelujax.objectives.make`), and the run's record; every string of the spec is parsed there,
once a process. ``TASKS`` holds one spec per experiment; ``get("mnist(dropout=0.5)")`` returns
a spec with fields overridden.

- ``mnist``: 784 -> 8x128 -> 10 MLP, Adam, batch 128, 50 epochs (Fig. 2).
- ``mnist_ae``: the 784-1000-500-250-30-... autoencoder, MSE, batch 64, 250 epochs (Fig. 4).
- ``twitter_pos``: 150 -> 2x256 -> 25 MLP on 3-word windows, batch 16, 30 epochs.
- ``timit``: 286 -> 5x2048 -> 39 MLP, batches of 64 whole utterances, 30 epochs.
- ``cifar10``: the 9-conv CNN, Adam (ε in the root) with the second half annealed, 200 epochs.
- ``cifar100``: WRN-40-4, Nesterov SGD, per-step cosine, L2 5e-4, 50 epochs of flip-doubled data.
- ``vit_fashion_mnist``: not in the paper; a small ViT (2 pre-LN blocks of width 48) on
  Fashion-MNIST, the GELU family in a transformer's feed-forward.
- ``transformer_twitter_pos``: not in the paper; a tagger that reads the whole tweet (2 pre-LN
  blocks of width 64 over each token's spelling features), a tag per token, on Twitter POS.
- ``char_lm``: not in the paper; a character-level GPT on Tiny Shakespeare at nanoGPT's CPU
  configuration (4 causal pre-LN blocks of width 128, windows of 64 characters), 2000 steps.
- ``tiny_mnist``: a 2x16 MLP for 2 epochs, for fast trainer tests.
- ``tiny_cifar``: a depth-10 width-1 WRN with crops, noise and L2, for fast trainer tests with BN.

Each task's choices that neither the paper nor the authors' code fixes are marked *(choice)* in
the docstring of the function that builds it.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import json
import math
from collections.abc import Callable, Mapping
from typing import Any

import flax.linen as nn
import jax.numpy as jnp
import numpy as np

from gelujax import objectives, optimizers
from gelujax.activations import ACTIVATIONS
from gelujax.linen import make_activation
from gelujax.members import Members, learning_rates_problem
from gelujax.models import MODELS
from gelujax.objectives import OBJECTIVES
from gelujax.optimizers import OPTIMIZERS
from gelujax.parts import Parts
from gelujax.preprocessing import PREPROCESSING
from gelujax.prng import DROPOUT_BITS
from gelujax.registry import Registry, close_names, did_you_mean, parse_name, sentences
from gelujax.specs import (
  activation_fingerprint,
  activation_names,
  activation_source,
  gated_unit,
)

TASKS: Registry = Registry("task")

SPLITS = ("train", "validation", "test")
# What a model may compute in (TaskSpec.dtype); parameters are float32 either way.
DTYPES = ("float32", "bfloat16")
# The most epochs a task takes: a bound against mistyped counts (1000000000 was taken). The
# paper's longest task trains 250; 100,000 epochs of a second each take 28 hours.
MAX_EPOCHS = 100_000


@dataclasses.dataclass(frozen=True)
class TaskSpec:
  """One experiment: every setting of the paper's, as a plain overridable value.

  Attributes:
    name: the task's registered name.
    dataset: the dataset passed to ``gelujax.data.load``; one of ``datasets``.
    datasets: the datasets this task accepts (its valid ``dataset`` values).
    model: a ``gelujax.models.MODELS`` name, possibly with arguments.
    data_options: keyword options of ``gelujax.data.load`` (e.g. ``train_on_all``).
    model_options: extra keyword arguments of the model.
    activation: activation spec for every hidden activation of the model.
    dropout: drop rate of the model's dropout layers (0 disables them).
    dropout_bits: where dropout masks come from: ``"hash"`` (the trainer's counter hash, the
      default) or ``"threefry"`` (JAX's default generator); see `gelujax.prng`. config.json
      records it only when it is not the default, so earlier runs' configs are unchanged.
    dtype: the type the model's layers and activations compute in: ``"float32"`` or
      ``"bfloat16"`` (mixed precision: parameters, optimizer state, losses and metrics stay
      float32). config.json records it only when it is not the default.
    learning_rates: the grid of peak learning rates the paper selects from.
    seeds: number of runs per learning rate.
    batch_size: examples per step (TIMIT: whole utterances per step; the tweet tagger: whole
      tweets).
    epochs: passes over the training split, at most `MAX_EPOCHS`.
    evals_per_epoch: evaluations per epoch.
    group_batches: batches are ``batch_size`` whole groups of ``split["groups"]``, padded with a
      mask to a fixed size by the trainer.
    select_metric: the metric whose lowest value picks the best evaluation.
    objective: an ``OBJECTIVES`` name: ``"classification"`` (softmax cross-entropy, metrics
      loss and error), ``"token_classification"`` (the same per token of each example, padding
      left out; means per token) or ``"reconstruction"`` (per-example mean squared error,
      targets are the inputs); see `gelujax.objectives`.
    optimizer: an ``OPTIMIZERS`` name: ``"adam"``, ``"adam_anneal"``, ``"nesterov_cosine"`` or
      ``"adamw_cosine"`` (nanoGPT's).
    steps_per_epoch: the steps of an epoch, each epoch a fresh permutation of the training
      items of which it takes ``steps_per_epoch * batch_size`` (without replacement within the
      epoch); None (default): every whole batch of the items. For a split of many overlapping
      windows (a language model's), where a pass over all of them is longer than a run.
    weight_decay: coefficient of the L2 penalty ``weight_decay * Σθ²`` over the conv/dense
      kernels and batch-norm scales, added to the training loss.
    preprocessing: host-side ``PREPROCESSING`` steps, in order.
    input_noise: standard deviation of the Gaussian noise added to training inputs.
    crop_padding: training inputs are random crops of the image zero-padded by this many pixels
      (0 disables cropping).
  """

  name: str
  dataset: str
  datasets: tuple[str, ...]
  model: str
  data_options: dict[str, Any] = dataclasses.field(default_factory=dict)
  model_options: dict[str, Any] = dataclasses.field(default_factory=dict)
  activation: str = "gelu_tanh"
  dropout: float = 0.0
  dropout_bits: str = "hash"
  dtype: str = "float32"
  learning_rates: tuple[float, ...] = (1e-3, 1e-4, 1e-5)
  seeds: int = 5
  batch_size: int = 128
  epochs: int = 50
  evals_per_epoch: int = 1
  group_batches: bool = False
  select_metric: str = "validation_loss"
  objective: str = "classification"
  optimizer: str = "adam"
  steps_per_epoch: int | None = None
  weight_decay: float = 0.0
  preprocessing: tuple[str, ...] = ()
  input_noise: float = 0.0
  crop_padding: int = 0

  def __post_init__(self):
    # Normalise containers so that specs built from JSON or flags compare and hash alike.
    for field in ("datasets", "learning_rates", "preprocessing"):
      value = getattr(self, field)
      if isinstance(value, list | tuple):
        object.__setattr__(self, field, tuple(value))
    for field in ("data_options", "model_options"):
      value = getattr(self, field)
      if isinstance(value, Mapping):
        object.__setattr__(self, field, dict(value))
    for field in _CHECKS:
      _check_field(self, field, getattr(self, field))
    self._check_model()

  def __hash__(self) -> int:
    return hash(json.dumps(dataclasses.asdict(self), sort_keys=True, default=repr))

  def _check_model(self) -> None:
    try:
      model = self.build_model()
    except (TypeError, ValueError) as e:
      raise ValueError(
        f"TaskSpec {self.name!r}: model={self.model!r} with model_options="
        f"{self.model_options!r} cannot be built ({e}); valid models: "
        f"{', '.join(MODELS.names())}, with keyword arguments of their module."
      ) from None
    if gated_unit(self.activation) is not None and not getattr(model, "takes_gated_units", False):
      models = [n for n in MODELS.names() if _takes_gated_units(n)]
      tasks = [n for n in TASKS.names() if _takes_gated_units(TASKS.lookup(n).model)]
      raise ValueError(
        f"TaskSpec {self.name!r}: activation {self.activation!r} is a gated linear unit (it maps "
        f"2n features to n), and model {self.model!r} applies its activation element-wise. "
        f"Units go in a transformer's feed-forward (models {', '.join(models)}; tasks "
        f"{', '.join(tasks)}); for the paper's MLP with gated layers, use model "
        "'mlp_mnist_gated' with the gate's activation (activation='gelu' gives GEGLU layers)."
      )

  def replace(self, **overrides: Any) -> TaskSpec:
    """A copy with ``overrides`` applied; every value is checked (ValueError naming the field)."""
    fields = [f.name for f in dataclasses.fields(self)]
    for field in overrides:
      if field not in fields:
        raise ValueError(
          sentences(
            f"TaskSpec {self.name!r} has no field {field!r}.",
            did_you_mean(close_names(field, fields)),
            f"The fields are {', '.join(fields)}.",
          )
        )
    return dataclasses.replace(self, **overrides)

  @property
  def metric_names(self) -> tuple[str, ...]:
    """The metrics of the objective: ``("loss", "error")`` or ``("loss",)``."""
    return OBJECTIVES.lookup(self.objective).metric_names

  def load_data(self, data_dir: str | None = None):
    """``gelujax.data.load`` of this dataset, then the host-side ``preprocessing`` steps.

    Raises:
      gelujax.data.NoSource: no source has the data set; its message starts with the task's
        other ``datasets`` that are here (in ``data_dir``, when given), and the ``dataset``
        that picks each, then says where it looked and how to get this one.
    """
    from gelujax import data  # Imported here: loading data pulls in TFDS, models need not.

    try:
      splits = data.load(self.dataset, data_dir=data_dir, **self.data_options)
    except data.NoSource as e:
      others = [name for name in self.datasets if name != self.dataset]
      here = data.found_here(others, data_dir, **self.data_options)
      if not here:
        raise
      where = f"in `data_dir` {data_dir}" if data_dir else "on this machine"
      takes = " and ".join(f"{name}, which is ({source})" for name, source in here.items())
      pick = " or ".join(f"`dataset`={name}" for name in here)
      first = (
        f"Data set {self.dataset!r} is not {where}; task {self.name!r} also takes {takes}: pick "
        f"{'it' if len(here) == 1 else 'one'} with {pick}."
      )
      raise data.NoSource(sentences(first, str(e)), e.reasons) from None
    for step in self.preprocessing:
      PREPROCESSING.lookup(step)(splits)
    return splits

  def build_model(self) -> nn.Module:
    """The model as this spec alone decides it: its activation (resolved once a process, where
    this spec was checked: `gelujax.linen.make_activation`), dropout, compute dtype and model
    options; :func:`build` adds the options its data decide (a vocabulary's size)."""
    return _make_model(self, {})

  def _check_targets(self, splits) -> None:
    """Refuses targets of another kind than the objective's: a tag per token of each example
    (``[examples, tokens]``) for ``token_classification``, one an example for the others."""
    per_token = OBJECTIVES.lookup(self.objective).per_token
    for name, split in splits.items():
      targets = split.get("targets")
      if targets is None or (targets.ndim == 2) == per_token:
        continue
      given = (
        f"dataset {self.dataset!r} with preprocessing={list(self.preprocessing)!r} gives split "
        f"{name!r} targets of shape {list(targets.shape)}"
      )
      if per_token:
        raise ValueError(
          f"TaskSpec {self.name!r}: objective {self.objective!r} tags every token of an example "
          f"(targets [examples, tokens]), but {given}, one an example; regroup the tokens into "
          "tweets with the 'group_tweets' step (preprocessing=('spell_words', 'group_tweets'), "
          "as task transformer_twitter_pos)."
        )
      raise ValueError(
        f"TaskSpec {self.name!r}: {given}, a tag per token of each example (the 'group_tweets' "
        f"step), and objective {self.objective!r} takes one target an example; use objective "
        "'token_classification' (as task transformer_twitter_pos), or leave out 'group_tweets'."
      )


def _takes_gated_units(model: str) -> bool:
  """Whether the ``MODELS`` preset ``model`` takes a gated linear unit (`takes_gated_units`)."""
  return bool(getattr(MODELS.get(model).func, "takes_gated_units", False))


# ----------------------------------------------------------------------------- validation


def _make_model(spec: TaskSpec, data_options: Mapping[str, Any]) -> nn.Module:
  """The one place a spec's model is made: ``spec``'s model with its activation resolved
  (`gelujax.linen.make_activation`, once a process), dropout, compute dtype, model options and
  the options its data decide (:func:`_data_options`)."""
  return MODELS.get(spec.model)(
    activation=make_activation(spec.activation),
    dropout=spec.dropout,
    dtype=jnp.dtype(spec.dtype),
    **{**spec.model_options, **data_options},
  )


def _data_options(spec: TaskSpec, splits) -> dict[str, Any]:
  """The model options ``splits`` (from :meth:`TaskSpec.load_data`) decide for ``spec``, after
  checking that its model can take them.

  A model that embeds word ids itself (one with a ``vocab_size`` field, such as
  ``embedding_mlp_twitter_pos``) gets ``vocab_size`` = the size of the data's vocabulary
  (``splits.info["vocab"]``; for Twitter POS the train words plus ``</s>`` and ``UUUNKKK``); any
  other model gets none. config.json records the task as given: the vocabulary is a fact of the
  data, not a setting.

  Data of whole tweets (the ``group_tweets`` step: targets ``[tweets, tokens]``, -1 beyond a
  tweet's end) go with the ``token_classification`` objective, and one target an example with
  any other; a padded position's word id (-1) is not a word.

  Raises:
    ValueError: word ids for a model that takes vectors, or vectors for one that embeds ids;
      an id outside the vocabulary; a pretrained embeddings file, whose vectors a trainable
      table would ignore; a ``vocab_size`` in ``model_options`` other than the data's; a
      target per token for an objective of one target an example, or the other way round.
  """
  spec._check_targets(splits)
  vocab = getattr(splits, "info", {}).get("vocab")
  word_ids = vocab is not None and all(
    np.issubdtype(split["inputs"].dtype, np.integer) for split in splits.values()
  )
  if not hasattr(spec.build_model(), "vocab_size"):
    if word_ids:
      raise ValueError(
        f"TaskSpec {spec.name!r}: model {spec.model!r} takes vectors, but the inputs are word "
        f"ids (preprocessing={list(spec.preprocessing)!r}); keep the host-side 'embed_words' "
        "step (frozen embeddings) or use model 'embedding_mlp_twitter_pos' (trainable)."
      )
    return {}
  where = f"TaskSpec {spec.name!r}: model {spec.model!r} embeds word ids itself"
  if not word_ids:
    raise ValueError(
      f"{where}, but dataset {spec.dataset!r} with preprocessing={list(spec.preprocessing)!r} "
      "gives it no integer word ids and vocabulary; leave out the host-side 'embed_words' "
      "step (preprocessing=())."
    )
  if getattr(splits, "info", {}).get("embeddings") is not None:
    raise ValueError(
      f"{where} from an N(0, 1) table, so the vectors of data_options embeddings="
      f"{spec.data_options.get('embeddings')!r} would be ignored; leave out embeddings= "
      "(trainable random substitute) or the model option (frozen pretrained vectors)."
    )
  size = len(vocab)
  for name, split in splits.items():
    ids = split["inputs"][..., 0] if split["inputs"].ndim == 3 else split["inputs"]  # spelled
    if split["targets"].ndim == 2:  # Whole tweets: the ids of their tokens, not the padding.
      ids = ids[split["targets"] >= 0]
    if ids.size and (ids.min() < 0 or ids.max() >= size):
      bad = ids.min() if ids.min() < 0 else ids.max()
      raise ValueError(
        f"{where}: split {name!r} holds word id {int(bad)}, outside the vocabulary of {size} "
        f"words; every id must be in 0..{size - 1}."
      )
  given = spec.model_options.get("vocab_size", size)
  if given != size:
    raise ValueError(
      f"{where}: model_options vocab_size={given!r} differs from the data's vocabulary of "
      f"{size} words; leave vocab_size out (it is set from the data)."
    )
  return {"vocab_size": size}


def _is_int(value: Any, low: int) -> bool:
  return isinstance(value, int) and not isinstance(value, bool) and value >= low


def _is_real(value: Any) -> bool:
  return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _metric_names(spec: TaskSpec) -> tuple[str, ...]:
  return spec.metric_names if spec.objective in OBJECTIVES else ()


def _valid_select_metric(spec: TaskSpec, value: Any) -> bool:
  names = _metric_names(spec)
  return value in {f"{split}_{metric}" for split in SPLITS for metric in names}


def _valid_activation(value: Any) -> bool:
  return isinstance(value, str) and _activation_problem(value) is None


def _activation_problem(value: str) -> str | None:
  """Why ``value`` is no activation (a sentence), or None: an unknown name, arguments it does
  not take, or a user's function that cannot be used."""
  try:
    make_activation(value)  # Checks the name and its arguments; build_model reuses it.
  except (ValueError, AttributeError) as e:
    return str(e)
  return None


# field -> (is the value valid for this spec, what would be valid), in an order where the fields
# a check reads (datasets, objective) are checked before it.
_CHECKS: dict[str, tuple[Callable[[TaskSpec, Any], bool], Callable[[TaskSpec], str]]] = {
  "name": (lambda s, v: isinstance(v, str) and bool(v), lambda s: "a non-empty string"),
  "datasets": (
    lambda s, v: bool(v) and all(isinstance(d, str) for d in v),
    lambda s: "a non-empty tuple of dataset names",
  ),
  "dataset": (
    lambda s, v: v in s.datasets,
    lambda s: f"one of this task's datasets: {', '.join(s.datasets)}",
  ),
  "model": (lambda s, v: isinstance(v, str) and v in MODELS, lambda s: ", ".join(MODELS.names())),
  "data_options": (lambda s, v: isinstance(v, dict), lambda s: "a dict of keyword options"),
  "model_options": (lambda s, v: isinstance(v, dict), lambda s: "a dict of keyword options"),
  "activation": (
    lambda s, v: _valid_activation(v),
    lambda s: (
      "an activation name, possibly with arguments, among "
      + ", ".join(activation_names())
      + ", or a function of your own as module:function (e.g. my_pkg.acts:squareplus)"
    ),
  ),
  "dropout": (
    lambda s, v: _is_real(v) and 0 <= v < 1,
    lambda s: "a drop rate in [0, 1) (0 disables dropout)",
  ),
  "dropout_bits": (lambda s, v: v in DROPOUT_BITS, lambda s: ", ".join(DROPOUT_BITS)),
  "dtype": (lambda s, v: v in DTYPES, lambda s: ", ".join(DTYPES)),
  "learning_rates": (
    lambda s, v: isinstance(v, tuple) and learning_rates_problem(v) is None,
    lambda s: "a non-empty tuple of distinct learning rates, each > 0 and normal in float32",
  ),
  "seeds": (lambda s, v: _is_int(v, 1), lambda s: "an integer >= 1 (runs per learning rate)"),
  "batch_size": (lambda s, v: _is_int(v, 1), lambda s: "an integer >= 1"),
  "epochs": (
    lambda s, v: _is_int(v, 1) and v <= MAX_EPOCHS,
    lambda s: (
      f"an integer from 1 to {MAX_EPOCHS:,} (a bound against mistyped counts: the paper's "
      "longest task trains 250 epochs, and 100,000 epochs of a second each take 28 hours)"
    ),
  ),
  "evals_per_epoch": (lambda s, v: _is_int(v, 1), lambda s: "an integer >= 1"),
  "steps_per_epoch": (
    lambda s, v: v is None or _is_int(v, 1),
    lambda s: "None (every whole batch of the training items) or an integer >= 1",
  ),
  "group_batches": (lambda s, v: isinstance(v, bool), lambda s: "True or False"),
  "objective": (
    lambda s, v: isinstance(v, str) and v in OBJECTIVES.names(),
    lambda s: ", ".join(OBJECTIVES.names()),
  ),
  "select_metric": (
    _valid_select_metric,
    lambda s: (
      "<split>_<metric> with split in "
      + ", ".join(SPLITS)
      + " and metric in "
      + ", ".join(_metric_names(s))
    ),
  ),
  "optimizer": (
    lambda s, v: isinstance(v, str) and v in OPTIMIZERS.names(),
    lambda s: ", ".join(OPTIMIZERS.names()),
  ),
  "weight_decay": (lambda s, v: _is_real(v) and v >= 0, lambda s: "a number >= 0"),
  "preprocessing": (
    lambda s, v: isinstance(v, tuple) and all(step in PREPROCESSING.names() for step in v),
    lambda s: "a tuple of steps among " + ", ".join(PREPROCESSING.names()),
  ),
  "input_noise": (lambda s, v: _is_real(v) and v >= 0, lambda s: "a standard deviation >= 0"),
  "crop_padding": (lambda s, v: _is_int(v, 0), lambda s: "an integer number of pixels >= 0"),
}


# field -> a sentence pointing from a rejected name to the names likely meant (Registry.hint).
_HINTS: dict[str, Callable[[TaskSpec, str], str]] = {
  "activation": lambda s, v: ACTIVATIONS.hint(v) if ":" not in v else _activation_problem(v) or "",
  "dataset": lambda s, v: did_you_mean(close_names(v, s.datasets)),
  "model": lambda s, v: MODELS.hint(v),
  "objective": lambda s, v: OBJECTIVES.hint(v),
  "optimizer": lambda s, v: OPTIMIZERS.hint(v),
}


class SpecError(ValueError):
  """A TaskSpec field given a value it cannot take; ``expected`` says what it can take, and
  ``hint`` (a sentence, or ``""``) what a mistyped or borrowed name likely meant."""

  def __init__(self, task: str, field: str, value: Any, expected: str, hint: str = ""):
    problem = f"TaskSpec {task!r}: field {field!r} = {value!r} is not valid; expected {expected}."
    super().__init__(sentences(problem, hint))
    self.task, self.field, self.value, self.expected, self.hint = task, field, value, expected, hint


def _check_field(spec: TaskSpec, field: str, value: Any) -> None:
  is_valid, valid = _CHECKS[field]
  if not is_valid(spec, value):
    hint = _HINTS[field](spec, value) if field in _HINTS and isinstance(value, str) else ""
    raise SpecError(spec.name, field, value, valid(spec), hint)


# ---------------------------------------------------------------------------------- tasks


def _register(build: Callable[[], TaskSpec]) -> Callable[[], TaskSpec]:
  spec = build()
  TASKS.register(spec.name, spec)
  return build


MNIST_LIKE = ("mnist", "fashion_mnist")
# vit_fashion_mnist's epochs: 10 members train them in about 15 minutes on 2 CPU cores, by the
# timing trial its docstring names (its looped step's time, 429 steps an epoch).
EPOCHS_VIT = 10


@_register
def mnist_task() -> TaskSpec:
  """MNIST classification (Fig. 2): 55k/5k/10k, 784 -> 8x[128, act, dropout] -> 10.

  Adam at a constant rate from {1e-3, 1e-4, 1e-5}, batch 128, 50 epochs, 5 runs. The paper runs
  dropout 0 and 0.5 (keep 1.0 and 0.5); the default here is 0 and a sweep sets 0.5. The
  no-dropout classifiers also serve the noise-robustness evaluation (Fig. 3). *(choice)* One
  evaluation per epoch (the authors' script logged three); ``evals_per_epoch`` overrides it.
  """
  return TaskSpec(
    name="mnist",
    dataset="mnist",
    datasets=MNIST_LIKE,
    model="mlp_mnist",
    dropout=0.0,
    learning_rates=(1e-3, 1e-4, 1e-5),
    seeds=5,
    batch_size=128,
    epochs=50,
  )


@_register
def mnist_ae_task() -> TaskSpec:
  """MNIST autoencoder (Fig. 4): all 60k train images, 10k test, per-example MSE, linear output.

  Adam from {1e-3, 1e-4}, batch 64, 250 epochs, 3 runs, no dropout. There is no validation
  split, so the trainer selects on the test split.
  """
  return TaskSpec(
    name="mnist_ae",
    dataset="mnist",
    datasets=MNIST_LIKE,
    data_options={"train_on_all": True},
    model="autoencoder_mnist",
    objective="reconstruction",
    learning_rates=(1e-3, 1e-4),
    seeds=3,
    batch_size=64,
    epochs=250,
  )


@_register
def twitter_pos_task() -> TaskSpec:
  """Twitter POS tagging (§3.3): 3-word windows of 50-d embeddings -> 2x[256, act, dropout] -> 25.

  Adam from {1e-3, 1e-4, 1e-5}, batch 16, 30 epochs, dropout 0.2 (keep 0.8), 5 runs. The
  embedding lookup is the host-side ``embed_words`` step: the pretrained table when
  ``data_options["embeddings"]`` names the file, else *(choice)* a frozen random N(0, 1) table
  (seed 0). *(choice)* The other substitute, trainable random embeddings, is
  ``model="embedding_mlp_twitter_pos", preprocessing=()``: the model embeds the ids with an
  N(0, 1) table of its own, trained with the rest (the vocabulary size comes from the data, see
  :func:`build`). *(choice)* The best evaluation is the one with the lowest validation
  error.
  *(choice)* One evaluation per epoch (the authors' script logged five).
  """
  return TaskSpec(
    name="twitter_pos",
    dataset="twitter_pos",
    datasets=("twitter_pos",),
    model="mlp_twitter_pos",
    dropout=0.2,
    learning_rates=(1e-3, 1e-4, 1e-5),
    seeds=5,
    batch_size=16,
    epochs=30,
    select_metric="validation_error",
    preprocessing=("embed_words",),
  )


@_register
def timit_task() -> TaskSpec:
  """TIMIT frame classification (§3.4): 286-d context windows -> 5x[2048, act, dropout] -> 39.

  Adam from {1e-3, 1e-4, 1e-5}, 30 epochs, dropout 0.5, 5 runs. A batch is 64 whole utterances
  (``group_batches``; the trainer pads the frames to a fixed size with a mask). The output is
  39-way, the paper's intent, not the published code's 2048-way layer; features are
  standardised once with the train statistics by ``gelujax.data``. The paper reports the test
  error at the lowest-validation checkpoint; *(choice)* "lowest" is read as the lowest
  validation error (``select_metric``).
  """
  return TaskSpec(
    name="timit",
    dataset="timit",
    datasets=("timit",),
    model="mlp_timit",
    dropout=0.5,
    learning_rates=(1e-3, 1e-4, 1e-5),
    seeds=5,
    batch_size=64,
    epochs=30,
    group_batches=True,
    select_metric="validation_error",
  )


@_register
def cifar10_task() -> TaskSpec:
  """CIFAR-10 (§3.5): the 9-conv BN network on ZCA-whitened images with input noise σ = 0.15.

  Adam with ε inside the root (``adam_anneal``), batch 100, 200 epochs, dropout 0.5, 3 runs,
  no augmentation. The rate is picked from {1e-3, 1e-4, 1e-5} on the 5k validation split; the
  paper then retrains on all 50k, i.e. ``replace(data_options={"train_on_all": True},
  learning_rates=(best,))``. *(choice)* The rate is selected on the validation loss.
  """
  return TaskSpec(
    name="cifar10",
    dataset="cifar10",
    datasets=("cifar10",),
    model="cifar_cnn",
    dropout=0.5,
    learning_rates=(1e-3, 1e-4, 1e-5),
    seeds=3,
    batch_size=100,
    epochs=200,
    optimizer="adam_anneal",
    preprocessing=("zca",),
    input_noise=0.15,
  )


@_register
def cifar100_task() -> TaskSpec:
  """CIFAR-100 (§3.5): WRN-40-4 on per-pixel-mean-subtracted images, train set doubled by flips.

  Nesterov SGD (momentum 0.9) at 0.1 with a per-step cosine to 0 over 50 epochs of the doubled
  set, batch 128, dropout 0.3, loss + 5e-4·Σθ² over conv/dense kernels and BN scales, random
  32x32 crops of the 4-px zero-padded image, 3 runs. Trained on all 50k (no validation split),
  as in the authors' code. *(choice)* optax's Nesterov form (see ``nesterov_cosine``).
  """
  return TaskSpec(
    name="cifar100",
    dataset="cifar100",
    datasets=("cifar100",),
    data_options={"train_on_all": True},
    model="wrn_40_4",
    dropout=0.3,
    learning_rates=(0.1,),
    seeds=3,
    batch_size=128,
    epochs=50,
    optimizer="nesterov_cosine",
    weight_decay=5e-4,
    preprocessing=("pixel_mean", "flip_double"),
    crop_padding=4,
  )


@_register
def tiny_mnist_task() -> TaskSpec:
  """A fast task for trainer tests: a 784 -> 2x16 -> 10 MLP on MNIST-like data for 2 epochs."""
  return TaskSpec(
    name="tiny_mnist",
    dataset="mnist",
    datasets=MNIST_LIKE,
    model="mlp_tiny",
    learning_rates=(1e-3,),
    seeds=2,
    batch_size=32,
    epochs=2,
  )


@_register
def tiny_cifar_task() -> TaskSpec:
  """A fast task for trainer tests with batch norm, dropout, crops, noise and an L2 penalty.

  A depth-10 width-1 WRN with 10 outputs on CIFAR-10-like uint8 images (no host-side
  preprocessing), Nesterov-cosine SGD, 2 epochs.
  """
  return TaskSpec(
    name="tiny_cifar",
    dataset="cifar10",
    datasets=("cifar10",),
    model="wrn_tiny",
    dropout=0.1,
    learning_rates=(0.05,),
    seeds=2,
    batch_size=16,
    epochs=2,
    optimizer="nesterov_cosine",
    weight_decay=5e-4,
    input_noise=0.05,
    crop_padding=2,
  )


@_register
def vit_fashion_mnist_task() -> TaskSpec:
  """Not in the paper: a small Vision Transformer on Fashion-MNIST (:class:`gelujax.models.ViT`),
  the GELU family where it is used today: 16 patches of 7x7 pixels, 2 pre-LayerNorm blocks of
  width 48 with 4 heads and a feed-forward of 192 (a gated linear unit such as ``geglu`` gives
  a gated one at the same parameter count), mean-pooled, 55k/5k/10k as ``mnist``.

  *(choice)* Adam at a constant rate from {1e-3, 3e-4}, batch 128, no dropout, the exact GELU
  (ViT's and BERT's form), selected on the validation loss. *(choice)* The size and
  ``EPOCHS_VIT`` epochs come from a timing trial, so that 10 members (one arm of a 10-seed grid)
  train in about 15 minutes on 2 CPU cores: `benchmarks/results/members_cpu_vit.md` (10
  members, their training step looped as this CPU's rule trains them, times the 429 steps of an
  epoch, plus about a tenth for the evaluations); a larger preset (49 patches, width 64, 4
  blocks) was an order of magnitude slower a step (`members_cpu.md`).
  """
  return TaskSpec(
    name="vit_fashion_mnist",
    dataset="fashion_mnist",
    datasets=MNIST_LIKE,
    model="vit_fashion_mnist",
    activation="gelu",
    learning_rates=(1e-3, 3e-4),
    seeds=10,
    batch_size=128,
    epochs=EPOCHS_VIT,
  )


@_register
def vit_cifar10_task() -> TaskSpec:
  """Not in the paper: a Vision Transformer on CIFAR-10 (:class:`gelujax.models.ViT`), for
  machines with an accelerator and the data: 64 patches of 4x4 pixels, 6 pre-LayerNorm blocks
  of width 192 with 3 heads and a feed-forward of 768 (ViT-Tiny's width at half its depth; a
  gated linear unit such as ``geglu`` gives a gated feed-forward at the same parameter count),
  mean-pooled; 2.69 million parameters (``tests/test_models.py`` counts them by hand).

  *(choice)* Images scaled to [0, 1] minus the train split's per-pixel mean (``pixel_mean``),
  random crops of the 4-pixel zero-padded image (``crop_padding``), Adam at a constant rate
  from {1e-3, 3e-4}, batch 128, no dropout, the exact GELU (ViT's form), 10 seeds, 100 epochs
  of the 45k training images (35,100 steps a member), selected on the validation loss.
  *(choice)* Sized for an accelerator, not this project's 2 CPU cores: its steps are untimed
  here (no accelerator was lent when it was added); ``benchmarks/members.py`` on a GPU session
  times them.
  """
  return TaskSpec(
    name="vit_cifar10",
    dataset="cifar10",
    datasets=("cifar10",),
    model="vit_cifar10",
    activation="gelu",
    learning_rates=(1e-3, 3e-4),
    seeds=10,
    batch_size=128,
    epochs=100,
    preprocessing=("pixel_mean",),
    crop_padding=4,
  )


# transformer_twitter_pos's epochs, from its timing trial (its docstring): 10 members in about
# 15 minutes on 2 CPU cores.
EPOCHS_TAGGER = 80


@_register
def transformer_twitter_pos_task() -> TaskSpec:
  """Not in the paper: Twitter POS by a tagger that reads the whole tweet
  (:class:`gelujax.models.TransformerTagger`), the GELU family in a transformer's feed-forward
  on the paper's tagging data. Each example is a tweet (the ``group_tweets`` step, after
  ``spell_words``: each token's word id, hashed character n-grams and shape flags, the window
  model's features of its centre word; padded to the longest tweet of any split), each token
  embedded as ``spelling_mlp_twitter_pos`` embeds a word, projected to width 64 with a learned
  position, 2 pre-LayerNorm blocks of 4 heads and a feed-forward of 256 (a gated linear unit
  such as ``geglu`` gives a gated one at the same parameter count) attending over the tweet's
  tokens and never its padding, and 25 tags per token; the loss is the mean cross-entropy over
  a batch's tokens, and the metrics are means per token (``token_classification``), as the
  window model's. The substitute for the unavailable pretrained embeddings is the one of
  ``results/twitter_pos/twitter_pos_spelling`` (trainable word and n-gram tables, word dropout
  0.25); that result's window MLP is the test error to beat.

  *(choice)* Adam at a constant rate from {1e-3, 3e-4}, batches of 16 tweets, dropout 0.1 on
  the residual branches, the exact GELU (BERT's form), 10 seeds, selected on the validation
  error (as ``twitter_pos``). *(choice)* ``EPOCHS_TAGGER`` = 80 epochs, from a timing trial
  (``benchmarks/results/members_cpu_tagger.md``: ``python benchmarks/members.py --cpu --name
  members_cpu_tagger --data_dir <the ARK files>``, on 2 quiet AMD EPYC cores): 10 members (one
  arm of a 10-seed grid) take 143 ms a step, looped as this CPU's rule takes them, and an epoch
  of the 1,000 training tweets is 62 steps, so 80 epochs are about 12 minutes of steps, about
  15 with the evaluations.
  """
  return TaskSpec(
    name="transformer_twitter_pos",
    dataset="twitter_pos",
    datasets=("twitter_pos",),
    model="transformer_twitter_pos",
    model_options={"word_dropout": 0.25},
    activation="gelu",
    dropout=0.1,
    learning_rates=(1e-3, 3e-4),
    seeds=10,
    batch_size=16,
    epochs=EPOCHS_TAGGER,
    select_metric="validation_error",
    objective="token_classification",
    preprocessing=("spell_words", "group_tweets"),
  )


# The fields of a spec its built model, optimizer and objective read (`_built`).
_BUILT_FROM = (
  "model", "model_options", "activation", "dropout", "dtype", "optimizer", "epochs", "objective",
  "weight_decay", "input_noise", "crop_padding",
)  # fmt: skip
# The model, optimizer and objective built for each set of those fields, newest last: the same
# settings give the same objects, whose programs the engine then reuses (`engine.make_program`
# keys its programs by these objects). Bounded: a long study builds many arms.
_BUILT: collections.OrderedDict[str, tuple[Any, Any, Any]] = collections.OrderedDict()
_KEPT_BUILT = 32


def build(spec: TaskSpec, splits: Mapping[str, Any]) -> Parts:
  """What the engine trains for ``spec`` on ``splits`` (:meth:`TaskSpec.load_data`).

  The one place a spec's values become objects: the model (its activation resolved, and the
  options the data decide: a vocabulary's size), the optimizer for a learning rate, the
  objective, the default grid, and the run's record (config.json's ``task``, ``dataset``,
  ``activation``, ``spec`` as given, a user's activation's ``activation_source``, and
  ``activation_fingerprint``, what the activation computes: a resume that would train another
  function is refused, `gelujax.specs.activation_fingerprint`). Specs
  that differ only in their grid, batches or evaluations get the same model, optimizer and
  objective objects, so the engine compiles their programs once.

  Raises:
    ValueError: data the model cannot take (word ids for a model of vectors or the other way
      round, an id outside the vocabulary, targets of another kind than the objective's).
  """
  options = _data_options(spec, splits)
  key = json.dumps(
    [{f: getattr(spec, f) for f in _BUILT_FROM}, options], sort_keys=True, default=repr
  )
  if key not in _BUILT:
    _BUILT[key] = (
      _make_model(spec, options),
      functools.partial(optimizers.build, spec.optimizer, epochs=spec.epochs),
      objectives.make(
        spec.objective,
        weight_decay=spec.weight_decay,
        input_noise=spec.input_noise,
        crop_padding=spec.crop_padding,
      ),
    )
    while len(_BUILT) > _KEPT_BUILT:
      _BUILT.popitem(last=False)
  _BUILT.move_to_end(key)
  model, optimizer, objective = _BUILT[key]
  return Parts(
    name=spec.name,
    model=model,
    optimizer=optimizer,
    objective=objective,
    splits=splits,
    batch_size=spec.batch_size,
    epochs=spec.epochs,
    evals_per_epoch=spec.evals_per_epoch,
    group_batches=spec.group_batches,
    dropout_bits=spec.dropout_bits,
    steps_per_epoch=spec.steps_per_epoch,
    select_metric=spec.select_metric,
    extendable=optimizers.extendable(spec.optimizer),
    grid=Members(spec.learning_rates, tuple(range(spec.seeds))),
    # What the activation computes: with the parts, not in `record`, which a command reads
    # before the data (computing it runs JAX).
    record={
      **record(spec),
      "activation_fingerprint": activation_fingerprint(spec.activation, spec.dtype),
    },
  )


def record(spec: TaskSpec) -> dict[str, Any]:
  """The run of ``spec`` as config.json records it (`gelujax.parts.Parts.record`): ``task``,
  ``dataset``, ``activation``, ``spec`` as given (the data's own facts, such as a vocabulary
  size, are not settings), and where a user's activation comes from (``activation_source``,
  `gelujax.specs.activation_source`; None for gelujax's own)."""
  return {
    "task": spec.name,
    "dataset": spec.dataset,
    "activation": spec.activation,
    "spec": json.loads(json.dumps(dataclasses.asdict(spec))),
    "activation_source": activation_source(spec.activation),
  }


def read_task(workdir: str) -> TaskSpec:
  """The task a run's config.json in ``workdir`` records (:func:`from_config`).

  Raises:
    ValueError: the workdir holds no run.
  """
  from gelujax import workdir as workdirs  # Here: a spec needs no workdir.

  config = workdirs.read_config(workdir)
  if config is None:
    raise ValueError(f"Workdir {workdir} holds no run: it has no config.json and no checkpoint.")
  return from_config(config)


def get(name: str) -> TaskSpec:
  """The task registered as ``name``; ``"name(field=value, ...)"`` overrides fields."""
  base, overrides = parse_name(name)
  spec = TASKS.lookup(base)
  return spec.replace(**overrides) if overrides else spec


def from_config(config: Mapping[str, Any]) -> TaskSpec:
  """The task a run's config.json records: its registered task with the recorded fields (JSON
  lists back to tuples)."""
  base = TASKS.lookup(config["task"])
  overrides = {
    k: tuple(v) if isinstance(getattr(base, k), tuple) else v
    for k, v in config["spec"].items()
    if getattr(base, k) != v
  }
  return base.replace(**overrides)


def task_names() -> list[str]:
  """The registered task names, sorted."""
  return TASKS.names()


@_register
def char_lm_task() -> TaskSpec:
  """Not in the paper: a character-level language model, where the GELU family's claims were
  made (GPT-2's tanh form, Gemma's GEGLU, LLaMA's SwiGLU): :class:`gelujax.models.CharGPT` on
  Tiny Shakespeare (`gelujax.data.shakespeare`: 65 characters; the first 90% of the text to
  train on, then 5% to validate and 5% to test), at nanoGPT's ``shakespeare_char`` CPU
  configuration: windows of 64 characters, batches of 12, 4 decoder blocks of 4 heads at width
  128 (feed-forward 512), dropout 0, AdamW (β2 0.99, weight decay 0.1, clipping at 1) at a peak
  rate of 1e-3 warmed up over 100 steps and decayed by a cosine to 1e-4 at the last step, 2000
  steps. The loss is the mean cross-entropy of the next character in nats (bits per character
  = nats / ln 2), over every character of a batch's windows; evaluation covers every character
  of the validation and test texts (``token_classification``: ``error`` is the share of
  characters whose most likely prediction is wrong).

  *(choice)* An epoch is 500 steps of windows drawn from a fresh permutation of all the training
  text's windows (every start position), without replacement within it (nanoGPT draws windows
  with replacement), so the 2000 steps are 4 epochs, evaluated twice an epoch (every 250 steps,
  nanoGPT's interval) on the whole validation text (nanoGPT estimates it from 20 random batches);
  the best evaluation selects by validation loss. *(choice)* The exact GELU, as nanoGPT's
  ``nn.GELU()``. *(choice)* One seed; a study sets its own.
  """
  return TaskSpec(
    name="char_lm",
    dataset="tiny_shakespeare",
    datasets=("tiny_shakespeare",),
    model="char_gpt_cpu",
    data_options={"block_size": 64},
    activation="gelu",
    learning_rates=(1e-3,),
    seeds=1,
    batch_size=12,
    epochs=4,
    steps_per_epoch=500,
    evals_per_epoch=2,
    objective="token_classification",
    optimizer="adamw_cosine",
  )
