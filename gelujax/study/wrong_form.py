"""What the wrong GELU form costs: a trained network run with another form than it was trained
with.

Ports of transformer models often run a network with the other GELU form: trained with the
exact erf ``gelu`` and run with ``gelu_tanh`` (or ``gelu_sigmoid``), or the reverse. For every
network (member) of a trained run, :func:`measure` runs it with its own activation A and with
another, B, in one compute dtype (or with its own activation in another dtype: a change of
dtype), and reports what changes on a split (B minus A):

- the test error and loss, by the objective's own metrics (`gelujax.engine.evaluate_members`);
- the largest and the mean absolute change of the model's outputs (logits), over the counted
  positions and every class;
- the top-1 agreement: the fraction of counted positions whose argmax stays the same.

A position counts where the objective counts it (:func:`counted_positions`): every example, or,
for a token model (``token_classification``), every token with a tag, never the padding beyond
a tweet's end. :func:`summarize` gives each statistic's median and mean over the networks with
the paired Hodges–Lehmann centre and its exact interval (`gelujax.study.stats`); :func:`evaluate`
does it for a run's task spec in each compute dtype, and :func:`keep` for a trained run's
folder, its rows kept in one file (:func:`kept_path`: ``wrong_form/<run>.json``) that
:func:`read` reads back, so that a result re-renders without its checkpoints: every study's
wrong forms (the transformer studies' and the forms study's swaps) in this one format.
Exploratory: effect sizes with intervals, no verdicts.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gelujax import workdir as workdirs
from gelujax.members import Members
from gelujax.study import stats

if TYPE_CHECKING:  # Importing the engine and the tasks needs JAX; reading rows does not.
  from gelujax.engine import Parts, TrainState
  from gelujax.objectives import Objective
  from gelujax.tasks import TaskSpec

# The statistics of a network, in the order rows hold them (:class:`NetworkCost`).
STATISTICS = ("error_change", "loss_change", "largest_change", "mean_change", "agreement")


@dataclasses.dataclass(frozen=True)
class NetworkCost:
  """What running one network (member) with form B instead of its own A changes on a split.

  Attributes:
    learning_rate, seed: the member.
    diverged: it diverged in training (its values are given, and left out of the summary).
    error_change: B's error minus A's (the objective's mean over what it counts; NaN for an
      objective without ``error``).
    loss_change: B's loss minus A's.
    largest_change: the largest |B's output - A's| over the counted positions and classes.
    mean_change: the mean |B's output - A's| over the counted positions and classes.
    agreement: the fraction of counted positions whose argmax over the classes is the same
      (NaN for an objective without ``error``, whose outputs are no classes).
  """

  learning_rate: float
  seed: int
  diverged: bool
  error_change: float
  loss_change: float
  largest_change: float
  mean_change: float
  agreement: float

  def to_json(self) -> dict[str, Any]:
    return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class StatisticSummary:
  """One statistic of :class:`NetworkCost` over the networks that did not diverge.

  Attributes:
    statistic: its name (one of :data:`STATISTICS`).
    n: the networks.
    median, mean: their median and mean.
    centre: the paired Hodges–Lehmann centre, the median of the values' Walsh averages
      (:func:`gelujax.study.stats.walsh_median`): for a change, the paired shift B - A.
    low, high: its exact distribution-free interval (:func:`gelujax.study.stats.paired_interval`);
      (-inf, inf) with 5 networks or fewer at 95%.
    confidence: the interval's achieved level.
  """

  statistic: str
  n: int
  median: float
  mean: float
  centre: float
  low: float
  high: float
  confidence: float

  @classmethod
  def of(cls, statistic: str, values: Sequence[float]) -> StatisticSummary:
    x = np.asarray(values, np.float64)
    x = x[~np.isnan(x)]
    if not len(x):
      return cls(statistic, 0, math.nan, math.nan, math.nan, math.nan, math.nan, math.nan)
    low, high, confidence = stats.paired_interval(x)
    return cls(
      statistic,
      len(x),
      float(np.median(x)),
      float(np.mean(x)),
      stats.walsh_median(x),
      low,
      high,
      confidence,
    )

  def to_json(self) -> dict[str, Any]:
    return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class WrongForm:
  """A run's networks trained with ``trained`` and run with ``run_with``, in ``dtype``.

  Attributes:
    trained: the activation the networks were trained with (A).
    run_with: the activation they are run with (B).
    dtype: the compute dtype B is run in, and A unless ``from_dtype`` says otherwise.
    networks: each member's costs, in the grid's order.
    summary: each of :data:`STATISTICS` over the networks that did not diverge.
    from_dtype: a change of dtype (``run_with`` is ``trained``): the dtype A is run in, the
      run's own; None where A is run in ``dtype``.
  """

  trained: str
  run_with: str
  dtype: str
  networks: tuple[NetworkCost, ...]
  summary: tuple[StatisticSummary, ...]
  from_dtype: str | None = None

  def statistic(self, name: str) -> StatisticSummary:
    """The summary of statistic ``name``."""
    return next(s for s in self.summary if s.statistic == name)

  def to_json(self) -> dict[str, Any]:
    return {
      "trained": self.trained,
      "run_with": self.run_with,
      "dtype": self.dtype,
      **({"from_dtype": self.from_dtype} if self.from_dtype else {}),
      "networks": [n.to_json() for n in self.networks],
      "summary": [s.to_json() for s in self.summary],
    }

  @classmethod
  def from_json(cls, found: Mapping[str, Any]) -> WrongForm:
    """The row :meth:`to_json` wrote, read back from JSON (where a non-finite value is null):
    each network's costs as written (null as NaN), the summary derived from them again
    (:func:`summarize`), not read."""
    networks = tuple(
      NetworkCost(**{k: math.nan if v is None and k in STATISTICS else v for k, v in n.items()})
      for n in found["networks"]
    )
    return cls(
      found["trained"],
      found["run_with"],
      found["dtype"],
      networks,
      summarize(networks),
      found.get("from_dtype"),
    )


def counted_positions(objective: Objective, split: Mapping[str, np.ndarray]) -> np.ndarray:
  """Which positions of a split's outputs ``objective`` counts, as bools: ``[N]`` (every
  example), or ``[N, tokens]`` for a per-token objective (a tag: target >= 0; the padding
  beyond a sequence's end has -1). As many as the objective's ``count`` of the split."""
  targets = np.asarray(split["targets"])
  if objective.per_token:
    counted = targets >= 0
  else:
    counted = np.ones(len(targets), bool)
  if int(counted.sum()) != objective.count(split):
    raise ValueError(
      f"{type(objective).__name__} counts {objective.count(split)} positions of the split, "
      f"not the {int(counted.sum())} its targets give; wrong_form knows per-example and "
      "per-token objectives."
    )
  return counted


def compare_outputs(
  outputs_a: np.ndarray, outputs_b: np.ndarray, counted: np.ndarray, classes: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """``(largest, mean, agreement)`` of each member, [M] each, in float64: the largest and the
  mean |b - a| over the ``counted`` positions and every output of a position, and the fraction
  of counted positions whose argmax over the last axis is the same (NaN without ``classes``).

  Args:
    outputs_a, outputs_b: ``[M, *positions, ...]``, e.g. ``[M, N, classes]`` or
      ``[M, N, tokens, classes]``.
    counted: ``positions`` bools (:func:`counted_positions`), at least one True.
    classes: whether the last axis holds classes (logits), so that argmax means something.
  """
  a, b = (np.asarray(x, np.float64) for x in (outputs_a, outputs_b))
  counted = np.asarray(counted, bool)
  if not counted.any():
    raise ValueError("The split has no counted position: nothing to compare.")
  absolute = np.abs(b - a)[:, counted]  # [M, counted, ...]
  per_position = absolute.reshape(len(a), int(counted.sum()), -1)
  largest = per_position.max(axis=(1, 2))
  mean = per_position.mean(axis=(1, 2))
  if not classes:
    return largest, mean, np.full(len(a), math.nan)
  same = np.argmax(a, axis=-1) == np.argmax(b, axis=-1)  # [M, *positions]
  return largest, mean, same[:, counted].mean(axis=1)


def compute_dtype(parts: Parts) -> str:
  """The dtype ``parts``' model computes in: its ``dtype`` field, float32 where it has none."""
  import jax.numpy as jnp  # Here: reading rows needs no JAX.

  dtype = getattr(parts.model, "dtype", None)
  return jnp.dtype(jnp.float32 if dtype is None else dtype).name


def measure(
  trained: Parts,
  swapped: Parts,
  members: Members,
  state: TrainState,
  split: Mapping[str, np.ndarray],
) -> WrongForm:
  """The networks of ``state`` run with ``trained``'s activation (A) and with ``swapped``'s (B)
  on ``split``: each network's costs (:class:`NetworkCost`) and their summary.

  Args:
    trained: the parts of the run, with the activation the networks were trained with, in the
      compute dtype compared (e.g. ``tasks.build(spec.replace(dtype=D), splits)``).
    swapped: the same parts with the other activation, in the same dtype
      (``tasks.build(spec.replace(activation=B, dtype=D), splits)``); or, for a change of dtype,
      with the same activation in another dtype.
    members: the grid, as `gelujax.engine.restore` returns it.
    state: the M members' state (`gelujax.engine.restore`).
    split: the split compared on (e.g. the test split).

  Raises:
    ValueError: parts that differ in both activation and dtype, or whose objectives differ.
  """
  from gelujax import engine  # Here: reading rows needs no JAX.

  own, dtype = compute_dtype(trained), compute_dtype(swapped)
  activations = (str(trained.record["activation"]), str(swapped.record["activation"]))
  if own != dtype and activations[0] != activations[1]:
    raise ValueError(
      f"The trained parts compute in {own} and the swapped ones in {dtype}; "
      "compare the forms in one dtype, or one form in two."
    )
  if trained.objective != swapped.objective:
    raise ValueError(
      f"The trained parts' objective {trained.objective} is not the swapped parts' "
      f"{swapped.objective}; only the activation may differ."
    )
  if len(members) != len(state.diverged_step):
    raise ValueError(f"{len(members)} members for a state of {len(state.diverged_step)}.")
  objective = trained.objective
  counted = counted_positions(objective, split)
  classes = "error" in objective.metric_names
  metrics_a = engine.evaluate_members(trained, state, split)
  metrics_b = engine.evaluate_members(swapped, state, split)
  outputs_a = engine.predict_members(trained, state, split)
  outputs_b = engine.predict_members(swapped, state, split)
  largest, mean, agreement = compare_outputs(outputs_a, outputs_b, counted, classes)
  nan = np.full(len(members), math.nan)
  loss = metrics_b["loss"] - metrics_a["loss"]
  error = metrics_b["error"] - metrics_a["error"] if classes else nan
  diverged = np.asarray(state.diverged_step) >= 0
  networks = tuple(
    NetworkCost(
      float(lr),
      int(seed),
      bool(diverged[i]),
      float(error[i]),
      float(loss[i]),
      float(largest[i]),
      float(mean[i]),
      float(agreement[i]),
    )
    for i, (lr, seed) in enumerate(members)
  )
  from_dtype = own if own != dtype else None
  return WrongForm(*activations, dtype, networks, summarize(networks), from_dtype)


def summarize(networks: Sequence[NetworkCost]) -> tuple[StatisticSummary, ...]:
  """Each of :data:`STATISTICS` over the networks that did not diverge
  (:meth:`StatisticSummary.of`), paired by network: a change is B - A of one network."""
  kept = [n for n in networks if not n.diverged]
  return tuple(StatisticSummary.of(name, [getattr(n, name) for n in kept]) for name in STATISTICS)


def evaluate(
  spec: TaskSpec,
  splits: Mapping[str, Mapping[str, np.ndarray]],
  members: Members,
  state: TrainState,
  activation: str,
  *,
  split: str = "test",
  dtypes: Sequence[str] | None = None,
) -> list[WrongForm]:
  """A trained run's networks run with ``activation`` instead of their own, in each of
  ``dtypes`` (:func:`measure` of the spec's parts and those of the spec with ``activation``,
  each built in the dtype by `gelujax.tasks.build`); with their own ``activation``, each a
  change of dtype from the spec's (a dtype of its own left out).

  Args:
    spec: the run's task (`gelujax.tasks.read_task` of its workdir).
    splits: its data (``spec.load_data()``).
    members, state: the run's grid and state (`gelujax.engine.restore`).
    activation: the form the networks are run with (B), e.g. ``"gelu_tanh"``.
    split: the split compared on.
    dtypes: the compute dtypes; default every one of `gelujax.tasks.DTYPES` (float32,
      bfloat16).
  """
  from gelujax import tasks  # Here: tasks imports the models.

  if dtypes is None:
    dtypes = tasks.DTYPES
  own = activation == spec.activation
  return [
    measure(
      tasks.build(spec.replace(dtype=spec.dtype if own else dtype), splits),
      tasks.build(spec.replace(activation=activation, dtype=dtype), splits),
      members,
      state,
      splits[split],
    )
    for dtype in dtypes
    if not (own and dtype == spec.dtype)
  ]


KEPT_DIR = "wrong_form"  # under a result's folder: each run's rows, `<run>.json`


def kept_path(out: Path, run: str) -> Path:
  """Where a result in ``out`` keeps run ``run``'s rows: ``out/wrong_form/<run>.json``."""
  return out / KEPT_DIR / f"{run}.json"


def write(path: Path, rows: Sequence[WrongForm]) -> None:
  """Keeps ``rows`` in ``path`` (JSON; each network's costs, from which the summaries derive)."""
  workdirs.write_json(path, {"rows": [r.to_json() for r in rows]})


def read(path: Path) -> list[WrongForm]:
  """The rows :func:`write` kept, each network's costs read back and their summary derived
  again (:meth:`WrongForm.from_json`)."""
  return [WrongForm.from_json(r) for r in workdirs.read_json(path)["rows"]]


def keep(
  workdir: Path, targets: Sequence[tuple[str, str]], path: Path, data_dir: str | None
) -> list[WrongForm] | None:
  """A finished run's rows (``workdir``: its folder): each of its networks, restored after its
  last epoch, run with each ``(activation, dtype)`` of ``targets`` (:func:`evaluate` on the test
  split: another form in that dtype, or its own form in another dtype), kept in ``path`` and
  read from there once kept; None for a run neither kept nor restorable (no checkpoint)."""
  if path.exists():
    return read(path)
  if not (workdir / workdirs.CHECKPOINT_DIR).is_dir():
    return None
  from gelujax import engine, tasks  # Here: reading results needs no accelerator stack.

  start = time.time()
  spec = tasks.read_task(str(workdir))
  splits = spec.load_data(data_dir)
  members, state = engine.restore(tasks.build(spec, splits), str(workdir))
  rows = [
    row
    for activation, dtype in targets
    for row in evaluate(spec, splits, members, state, activation, dtypes=(dtype,))
  ]
  write(path, rows)
  print(f"{workdir.name}: wrong forms evaluated in {time.time() - start:.1f} s", flush=True)
  return rows
