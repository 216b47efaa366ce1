"""A spec and its data made into what the engine trains: :func:`build` (the model, its
optimizer and objective, reused for the same settings, and the run's record) and
:func:`record`, the run as config.json records it."""

from __future__ import annotations

import collections
import dataclasses
import functools
import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from gelujax import objectives, optimizers
from gelujax.members import Members
from gelujax.models.user import check_outputs, is_user_model, model_source
from gelujax.parts import Parts
from gelujax.specs import activation_fingerprint, activation_source
from gelujax.tasks.spec import TaskSpec, make_model


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


# The fields of a spec its built model, optimizer and objective read (the key of `build`'s cache).
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
      round, an id outside the vocabulary, targets of another kind than the objective's); a
      model of the user's own (``"module:Class"``) whose outputs do not fit the objective on
      these data (`gelujax.models.user.check_outputs`).
  """
  options = _data_options(spec, splits)
  key = json.dumps(
    [{f: getattr(spec, f) for f in _BUILT_FROM}, options], sort_keys=True, default=repr
  )
  if key not in _BUILT:
    model = make_model(spec, options)
    objective = objectives.make(
      spec.objective,
      weight_decay=spec.weight_decay,
      input_noise=spec.input_noise,
      crop_padding=spec.crop_padding,
    )
    optimizer = functools.partial(optimizers.build, spec.optimizer, epochs=spec.epochs)
    _BUILT[key] = (model, optimizer, objective)
  if is_user_model(spec.model):  # before the first step: outputs that fit the objective
    check_outputs(spec.model, _BUILT[key][0], spec.objective, _BUILT[key][2].prepare_batch, splits)
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
  size, are not settings), where a user's activation comes from (``activation_source``,
  `gelujax.specs.activation_source`; None for gelujax's own), and for a model of the user's
  own, where it comes from (``model_source``, `gelujax.models.user.model_source`; left out for
  gelujax's presets, so the records of their runs are unchanged)."""
  found = {
    "task": spec.name,
    "dataset": spec.dataset,
    "activation": spec.activation,
    "spec": json.loads(json.dumps(dataclasses.asdict(spec))),
    "activation_source": activation_source(spec.activation),
  }
  source = model_source(spec.model)
  if source is not None:
    found["model_source"] = source
  return found
