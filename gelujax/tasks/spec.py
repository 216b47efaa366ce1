"""``TaskSpec``, one experiment as plain values, each checked once when the spec is made (the
checks, ``SpecError`` and the bounds they hold values to), and ``TASKS``, the registry of the
specs (filled by the task modules; ``gelujax.tasks.get`` reads it)."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Mapping
from typing import Any

import flax.linen as nn
import jax.numpy as jnp

from gelujax.activations import ACTIVATIONS
from gelujax.linen import make_activation
from gelujax.members import learning_rates_problem
from gelujax.models import MODELS
from gelujax.models.user import VALID as USER_MODEL
from gelujax.models.user import (
  ActivationNotForModel,
  is_user_model,
  make_user_model,
  user_model,
)
from gelujax.objectives import OBJECTIVES
from gelujax.optimizers import OPTIMIZERS
from gelujax.preprocessing import PREPROCESSING
from gelujax.prng import DROPOUT_BITS
from gelujax.registry import Registry, close_names, did_you_mean, sentences
from gelujax.specs import activation_names, gated_unit

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
    model: a ``gelujax.models.MODELS`` name, possibly with arguments, or a model class of the
      user's own, ``"module:Class"`` or ``"module:Class(width=64)"``: a Linen or an NNX module
      class (`gelujax.models.user`).
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
    except ActivationNotForModel as e:
      raise ValueError(f"TaskSpec {self.name!r}: {e}") from None
    except (TypeError, ValueError) as e:
      if is_user_model(self.model):
        raise SpecError(self.name, "model", self.model, _valid_models(self), str(e)) from None
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
    return make_model(self, {})

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


def make_model(spec: TaskSpec, data_options: Mapping[str, Any]) -> nn.Module:
  """The one place a spec's model is made: ``spec``'s model with its activation resolved
  (`gelujax.linen.make_activation`, once a process), dropout, compute dtype, model options and
  the options its data decide (:func:`_data_options`): a ``MODELS`` preset, or a class of the
  user's own, ``"module:Class"`` (`gelujax.models.user.make_user_model`)."""
  if is_user_model(spec.model):
    return make_user_model(
      spec.model,
      make_activation(spec.activation),
      dropout=spec.dropout,
      dtype=spec.dtype,
      options={**spec.model_options, **data_options},
      activation_spec=spec.activation,
    )
  return MODELS.get(spec.model)(
    activation=make_activation(spec.activation),
    dropout=spec.dropout,
    dtype=jnp.dtype(spec.dtype),
    **{**spec.model_options, **data_options},
  )


# ----------------------------------------------------------------------------- validation


def _valid_models(spec: TaskSpec) -> str:
  """What a spec's ``model`` may be: a preset, or a class of the user's own."""
  return (
    f"a model preset among {', '.join(MODELS.names())}, or a model class of your own as "
    f"module:Class or module:Class(key=value, ...) (e.g. my_models:MLP(width=64)): {USER_MODEL}"
  )


def _user_model_problem(spec: TaskSpec, value: str) -> str | None:
  """Why ``value`` names no usable model of the user's own (a sentence), or None; the model is
  imported and checked (`gelujax.models.user.user_model`), not yet constructed (the spec's
  other fields are checked after this one; `TaskSpec._check_model` constructs it)."""
  if not is_user_model(value):
    return f"{value!r} names no model preset nor a class of your own"
  try:
    user_model(value)
  except ValueError as e:
    return str(e)
  return None


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
  "model": (
    lambda s, v: isinstance(v, str) and (v in MODELS or _user_model_problem(s, v) is None),
    lambda s: _valid_models(s),
  ),
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
  "model": lambda s, v: _user_model_problem(s, v) or "" if ":" in v else MODELS.hint(v),
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
