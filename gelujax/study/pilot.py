"""The pilot of the transformer study: each feed-forward activation of the two transformer tasks
on selection seeds, read on validation metrics alone, fixed here before any of its runs was
trained.

A pre-registered study will compare feed-forward activations in ``vit_fashion_mnist`` and
``transformer_twitter_pos`` on fresh seeds. Before it, a pilot (:data:`PILOTS`, one a task)
measures what that design must state: each arm's learning rate (:func:`select_lr`), the paired
spread between arms at those lrs, and the pairs a paired test would need at candidate margins
(:func:`spread`). It reads each member's validation metrics (:data:`VALIDATION_KEYS`) and its
records' epochs, nothing else: no test metric enters anything it computes, so no test value of
these networks has been looked at, and the study evaluates on seeds none of them was trained on.
Nothing here is a verdict.

Runs: one grid per arm, ``<out>/runs/<folder>/`` (the folder as `gelujax.study.runs.run_name`
names an activation's: ``geglu(approximate=True)`` -> ``geglu_approximate=True_``), the
design's lrs x seeds its members.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from gelujax.study import best, grids, numbers, power, runs

# The only metrics the pilot reads: validation error and loss at each evaluation.
VALIDATION_KEYS = ("validation_error", "validation_loss")
ARMS = ("relu", "gelu", "gelu_tanh", "geglu(approximate=True)", "geglu", "swiglu", "identity")
# The study's comparisons, first minus second seed by seed; the last is the control's gap.
COMPARISONS = (
  ("gelu", "relu"),
  ("geglu", "gelu"),
  ("geglu(approximate=True)", "gelu_tanh"),
  ("swiglu", "relu"),
  ("gelu_tanh", "gelu"),
  ("geglu(approximate=True)", "geglu"),
  ("identity", "gelu"),
)


@dataclasses.dataclass(frozen=True)
class Metric:
  """A validation metric whose paired spread the pilot measures.

  Attributes:
    key: its key in a run's records (one of :data:`VALIDATION_KEYS`).
    label: its words, with the unit shown.
    scale: multiplies values and differences for display (100: a rate in percent points).
    unit: the unit shown.
    margins: the candidate margins, in the metric's own units (a rate, nats).
  """

  key: str
  label: str
  scale: float
  unit: str
  margins: tuple[float, ...]

  def words(self, value: float) -> str:
    """A value in the units shown, to 2 decimals in percent, else 4: ``"12.34"``, ``"0.3312"``
    (:func:`gelujax.study.numbers.fixed`)."""
    return numbers.fixed(value, self.scale, 2 if self.scale == 100.0 else 4)


ERROR = Metric(
  "validation_error", "validation error", 100.0, "points", (0.001, 0.002, 0.003, 0.005, 0.01)
)
LOSS = Metric("validation_loss", "validation loss", 1.0, "nats", (0.005, 0.01, 0.02, 0.05))


@dataclasses.dataclass(frozen=True)
class Pilot:
  """A pilot's runs and what it measures.

  Attributes:
    name: the pilot's name (``reproduce.py --task``, its result's folder).
    date: when the design was fixed in code (UTC), before any of its runs was trained.
    task: the registered task trained.
    dataset: its data set.
    arms: the arms trained, each one grid: an activation's name, or a name of ``variants``.
    learning_rates: every arm is trained at each; each arm's is selected (:func:`select_lr`).
    seeds: the selection seeds, shared by every arm and lr.
    epochs: epochs of every run.
    select_metric: the task's selection metric: a member's best evaluation is its lowest, an
      arm's lr the one of its lowest median.
    comparisons: the study's comparisons, (first, second): first minus second, seed by seed.
    control: the candidate positive control's arm.
    metrics: the metrics whose paired spread is measured, with their candidate margins.
    alpha: the two-sided level of the paired test the pairs are for (uncorrected).
    power: the power the pairs are for.
    bound: the one-sided confidence of the SD's upper bound the pairs are computed with.
    variants: the arms that are more than an activation (`gelujax.study.grids.Variant`: a
      narrower feed-forward), by name.
    arms_reason, control_reason, lr_reason, seeds_reason, epochs_reason, margins_reason: why each
      is what it is.
    tie_rule: which epoch is a member's best where its selection metric ties.
    lr_tie_rule: which lr is an arm's where their medians tie.
  """

  name: str
  date: str
  task: str
  dataset: str
  arms: tuple[str, ...]
  learning_rates: tuple[float, ...]
  seeds: tuple[int, ...]
  epochs: int
  select_metric: str
  comparisons: tuple[tuple[str, str], ...] = COMPARISONS
  control: str = "identity"
  metrics: tuple[Metric, ...] = (ERROR, LOSS)
  alpha: float = 0.05
  power: float = 0.8
  bound: float = 0.8
  arms_reason: str = ""
  control_reason: str = ""
  lr_reason: str = ""
  seeds_reason: str = ""
  epochs_reason: str = ""
  margins_reason: str = ""
  tie_rule: str = "the evaluation of the lowest selection metric; where several tie, the earliest"
  lr_tie_rule: str = (
    "the lr of the lowest median over seeds of its members' best selection metric (a diverged "
    "member counts as +inf); where two medians are equal, the smaller lr"
  )
  variants: Mapping[str, grids.Variant] = dataclasses.field(default_factory=dict)

  def __post_init__(self):
    if self.select_metric not in VALIDATION_KEYS:
      raise ValueError(
        f"`select_metric` {self.select_metric!r}: a pilot selects on a validation metric, one "
        f"of {', '.join(VALIDATION_KEYS)}."
      )

  def spec(self) -> Any:
    """The task's spec every arm trains (its activation replaced per arm)."""
    from gelujax import tasks  # Here: tasks imports the models.

    return tasks.get(self.task).replace(
      dataset=self.dataset, epochs=self.epochs, select_metric=self.select_metric
    )

  def folder(self, arm: str) -> str:
    """``arm``'s run folder under ``runs/``: `gelujax.study.runs.run_name`'s."""
    return runs.run_name(arm)


_ARMS_REASON = (
  "the feed-forward activations a transformer uses, each in the task's feed-forward block "
  "(`gelujax.linen.FeedForward`): relu (the original transformer's), gelu (the exact erf form, "
  "the task's default), gelu_tanh (the tanh form, `jax.nn.gelu`'s default), the gated units at "
  "the plain block's parameter count (to within the rounding of the gated width): "
  "geglu(approximate=True) (the tanh-form gate, as Gemma's feed-forward computes it), geglu "
  "(the exact gate) and swiglu (a SiLU gate); and identity, a candidate positive control"
)
_CONTROL_REASON = (
  "identity leaves the feed-forward linear (two dense layers with nothing between them), so the "
  "only nonlinearities left are attention's softmax and LayerNorm: a design that cannot tell it "
  "from gelu cannot tell anything. It is a candidate, not yet the control: unlike the linear "
  "MLP of `gelujax.study.forms.POWERED`, the network without it is not linear, so its gap is "
  "not known beforehand; the pilot measures it (identity − gelu), and the study takes it as "
  "its positive control only where that gap is many times its margin"
)
_LR_REASON = (
  "the task's own grid, {1e-3, 3e-4} (Adam at a constant rate); each arm's is selected here on "
  "the task's selection metric, so that the study trains each arm at its own lr on fresh seeds "
  "and no selection is made on the seeds it evaluates"
)
_SEEDS_REASON = (
  "the selection seeds 0–3, never evaluation seeds of the study to come, which draws fresh "
  "ones (none of 0–3), so that no network whose validation metrics chose an lr or a margin is "
  "one it evaluates; 4 seeds give each paired SD 3 degrees of freedom, which its upper bound "
  "states, in 7 grids of 8 members: at the timing trial's 15 minutes for 10 members, about 85 "
  "minutes on 2 CPU cores, longer beside other work"
)
_MARGINS_REASON = (
  "candidates, not the study's margin: a tenth of a point to a point of validation error, "
  "0.005 to 0.05 nats of validation loss; the study chooses its margin with these numbers in "
  "view and states why"
)

VIT = Pilot(
  name="vit_fashion_mnist_pilot",
  date="2026-11-27",
  task="vit_fashion_mnist",
  dataset="fashion_mnist",
  arms=ARMS,
  learning_rates=(1e-3, 3e-4),
  seeds=(0, 1, 2, 3),
  epochs=10,
  select_metric="validation_loss",
  arms_reason=_ARMS_REASON,
  control_reason=_CONTROL_REASON,
  lr_reason=_LR_REASON,
  seeds_reason=_SEEDS_REASON,
  epochs_reason="the task's 10 (`gelujax.tasks.EPOCHS_VIT`), so that the spread measured is "
  "that of the runs the study trains",
  margins_reason=_MARGINS_REASON,
)
TAGGER = Pilot(
  name="transformer_twitter_pos_pilot",
  date="2026-11-27",
  task="transformer_twitter_pos",
  dataset="twitter_pos",
  arms=ARMS,
  learning_rates=(1e-3, 3e-4),
  seeds=(0, 1, 2, 3),
  epochs=80,
  select_metric="validation_error",
  arms_reason=_ARMS_REASON,
  control_reason=_CONTROL_REASON,
  lr_reason=_LR_REASON,
  seeds_reason=_SEEDS_REASON,
  epochs_reason="the task's 80 (`gelujax.tasks.EPOCHS_TAGGER`), so that the spread measured is "
  "that of the runs the study trains",
  margins_reason=_MARGINS_REASON,
)

# The language model's arms (`gelujax.tasks.char_lm_task`): the family as language models run
# it, the gated units after Shazeer (2020), and identity, the candidate control.
CHAR_LM_ARMS = (
  "relu", "gelu", "gelu_tanh", "geglu(approximate=True)", "geglu", "swiglu", "reglu", "identity",
)  # fmt: skip
CHAR_LM_COMPARISONS = (
  ("gelu", "relu"),
  ("geglu", "gelu"),
  ("geglu(approximate=True)", "gelu_tanh"),
  ("swiglu", "relu"),
  ("reglu", "relu"),
  ("gelu_tanh", "gelu"),
  ("geglu(approximate=True)", "geglu"),
  ("identity", "gelu"),
)
CHAR_LM = Pilot(
  name="char_lm_pilot",
  date="2026-11-29",
  task="char_lm",
  dataset="tiny_shakespeare",
  arms=CHAR_LM_ARMS,
  learning_rates=(2e-3, 1e-3),
  seeds=(0, 1, 2, 3),
  epochs=4,
  select_metric="validation_loss",
  comparisons=CHAR_LM_COMPARISONS,
  metrics=(LOSS, ERROR),
  arms_reason=(
    "the feed-forward activations of the language models the family's claims come from, each in "
    "the decoder's feed-forward block (`gelujax.linen.FeedForward`): relu (the original "
    "transformer's), gelu (the exact form, nanoGPT's), gelu_tanh (GPT-2's), and the gated units "
    "at the plain block's parameter count: geglu(approximate=True) (Gemma's), geglu (the exact "
    "gate), swiglu (LLaMA's) and reglu, Shazeer's (2020) variants; and identity, a candidate "
    "positive control"
  ),
  control_reason=(
    "identity leaves the feed-forward linear. Its gap to gelu is measured here; a control many "
    "margins away shows only that the design sees a large gap, so the study to come calibrates "
    "its *equivalent* verdicts by the sensitivity of its own paired differences as well, and "
    "takes identity as its positive control only where its gap is of the margin's size"
  ),
  lr_reason=(
    "nanoGPT's peak rate for this configuration, 1e-3, and twice it, 2e-3, under nanoGPT's "
    "schedule (`adamw_cosine`); each arm's is selected here on the validation loss, so that the "
    "study trains each arm at its own lr on fresh seeds"
  ),
  seeds_reason=(
    "the selection seeds 0–3, never evaluation seeds of the study to come, which draws fresh "
    "ones; 4 seeds give each paired SD 3 degrees of freedom, which its upper bound states, in 8 "
    "grids of 8 members: 2000 steps each, about 12 minutes a grid on 2 CPU cores "
    "(benchmarks/results/char_lm_speed.md's grid throughput), about 100 minutes in all"
  ),
  epochs_reason=(
    "the task's 4 epochs of 500 steps, nanoGPT's 2000 steps at this configuration, so that "
    "the spread measured is that of the runs the study trains"
  ),
  margins_reason=(
    "candidates, not the study's margin: 0.005 to 0.05 nats of validation loss (a third of a "
    "per cent to three per cent of a loss near 1.5 nats; Shazeer's gaps are a few hundredths), "
    "a tenth of a point to a point of next-character error; the study chooses its margin with "
    "these numbers in view and states why"
  ),
)

# The language model's candidate positive controls: gelu with a narrower feed-forward.
CHAR_LM_CONTROLS = Pilot(
  name="char_lm_controls_pilot",
  date="2026-11-29",
  task="char_lm",
  dataset="tiny_shakespeare",
  arms=("gelu", "gelu_ffn384", "gelu_ffn256"),
  variants={
    "gelu_ffn384": grids.Variant("gelu", {"hidden_features": 384}, "feed-forward 384"),
    "gelu_ffn256": grids.Variant("gelu", {"hidden_features": 256}, "feed-forward 256"),
  },
  learning_rates=(2e-3,),
  seeds=(0, 1, 2, 3),
  epochs=4,
  select_metric="validation_loss",
  comparisons=(("gelu_ffn384", "gelu"), ("gelu_ffn256", "gelu")),
  control="",
  metrics=(LOSS, ERROR),
  arms_reason=(
    "gelu at the task's feed-forward width (512, four times the model's width of 128) and gelu "
    "with a narrower feed-forward, 384 and 256 (three and two times the width): the candidates "
    "for the language-model study's positive control"
  ),
  control_reason=(
    "a positive control must differ from gelu by a gap of about the size the study's margin "
    "is to resolve (1 to 3 margins); a far larger gap, such as identity's in char_lm_pilot "
    "(its Paired spread), shows only that the design sees a large one. A narrower feed-forward "
    "keeps the activation, the data and the training and removes parameters: a known step "
    "whose gap this pilot measures, on the same seeds as gelu"
  ),
  lr_reason=(
    "one lr, 2e-3, the lr char_lm_pilot selected for gelu: a control trains as gelu trains, "
    "only narrower, so that its gap is the model's and not an lr's"
  ),
  seeds_reason=(
    "char_lm_pilot's selection seeds 0–3, never evaluation seeds of the study to come, which "
    "draws fresh ones; gelu is trained again beside the narrower arms, so that each "
    "comparison's pairs come from one pilot (3 grids of 4 members)"
  ),
  epochs_reason=(
    "the task's 4 epochs of 500 steps, as char_lm_pilot's, so that the gaps measured are "
    "those of the runs the study trains"
  ),
  margins_reason=CHAR_LM.margins_reason,
)


@dataclasses.dataclass(frozen=True)
class Best:
  """A member's best evaluation, in validation metrics alone.

  Attributes:
    seed: the member's seed.
    learning_rate: its lr.
    diverged: whether it diverged (its values are then NaN).
    epoch: the epoch of its best evaluation (None: diverged, or no finite evaluation).
    values: each of :data:`VALIDATION_KEYS` at that epoch (NaN where diverged).
  """

  seed: int
  learning_rate: float
  diverged: bool
  epoch: float | None
  values: Mapping[str, float]


def validation_records(run: runs.Run, member: Mapping[str, Any]) -> list[dict[str, Any]]:
  """``member``'s evaluations, in epoch order, as the pilot sees them: each record's epoch and
  its :data:`VALIDATION_KEYS`, no other key.

  Raises:
    ValueError: the member has no validation values (a run without a validation split).
  """
  found = [
    {"epoch": r["epoch"], **{k: r.get(k) for k in VALIDATION_KEYS}}
    for r in run.records
    if r["seed"] == member["seed"] and runs.same_lr(r["learning_rate"], member["learning_rate"])
  ]
  if not any(r[k] is not None for r in found for k in VALIDATION_KEYS):
    raise ValueError(
      f"{run.workdir}: the member of seed {member['seed']} and lr {member['learning_rate']:g} "
      "has no validation metrics: the pilot reads validation metrics alone."
    )
  return sorted(found, key=lambda r: r["epoch"])


def member_bests(run: runs.Run, design: Pilot) -> list[Best]:
  """Each member's best evaluation by the design's selection metric, the earliest of tied epochs
  (`gelujax.study.best.best_record` on :func:`validation_records`), in the run's member order."""
  found = []
  nan = dict.fromkeys(VALIDATION_KEYS, math.nan)
  for m in run.members:
    record = (
      None if m["diverged"] else best.best_record(validation_records(run, m), design.select_metric)
    )
    values = nan if record is None else {k: _value(record[k]) for k in VALIDATION_KEYS}
    epoch = None if record is None else float(record["epoch"])
    found.append(Best(m["seed"], m["learning_rate"], m["diverged"], epoch, values))
  return found


def _value(value: float | None) -> float:
  return math.nan if value is None else float(value)


@dataclasses.dataclass(frozen=True)
class Cell:
  """One arm at one lr: its members' bests."""

  arm: str
  learning_rate: float
  bests: tuple[Best, ...]

  def values(self, key: str) -> dict[int, float]:
    """seed -> the member's ``key`` at its best (NaN for a diverged member)."""
    return {b.seed: b.values[key] for b in self.bests}

  def finite(self, key: str) -> list[float]:
    return [v for v in self.values(key).values() if math.isfinite(v)]

  @property
  def diverged(self) -> int:
    return sum(b.diverged for b in self.bests)

  def selection_median(self, key: str) -> float:
    """The median over every member of its best ``key``, a diverged one counted as +inf."""
    return statistics.median(v if math.isfinite(v) else math.inf for v in self.values(key).values())

  def stats(self, key: str) -> dict[str, float]:
    """Median, min and max of ``key`` over the members that did not diverge (NaN: none)."""
    x = self.finite(key)
    if not x:
      return {"median": math.nan, "low": math.nan, "high": math.nan}
    return {"median": float(np.median(x)), "low": min(x), "high": max(x)}


def finished_runs(design: Pilot, out: Path) -> dict[str, runs.Run]:
  """The pilot's finished runs, each read once: arm -> its files."""
  return runs.finished(out, {arm: design.folder(arm) for arm in design.arms})


def arm_cells(design: Pilot, arm: str, run: runs.Run) -> dict[float, Cell]:
  """The finished run of ``arm``: lr -> its members' bests, in the design's lr order.

  Raises:
    ValueError: the run's members are not the design's lrs x seeds.
  """
  bests = member_bests(run, design)
  found = {}
  for lr in design.learning_rates:
    cell = tuple(sorted((b for b in bests if runs.same_lr(b.learning_rate, lr)), key=_seed))
    if [b.seed for b in cell] != sorted(design.seeds):
      raise ValueError(
        f"{run.workdir} holds seeds {[b.seed for b in cell]} at lr {lr:g}, not the design's "
        f"{list(design.seeds)}: it is not a run of {design.name}."
      )
    found[lr] = Cell(arm, lr, cell)
  return found


def _seed(b: Best) -> int:
  return b.seed


def select_lr(cells: Mapping[float, Cell], metric: str) -> float | None:
  """The lr whose cell has the lowest :meth:`Cell.selection_median` of ``metric``, by the rule
  every study selects with (`gelujax.study.runs.choose_lr`: where several are equal, the
  smallest lr); None where every member of every lr diverged."""
  return runs.choose_lr(
    {
      lr: c.selection_median(metric) if c.diverged < len(c.bests) else None
      for lr, c in cells.items()
    }
  )


@dataclasses.dataclass(frozen=True)
class Spread:
  """One comparison's paired differences on one metric, at each arm's selected lr.

  Attributes:
    first, second: the arms, first minus second.
    metric: the metric's key.
    learning_rates: each arm's selected lr.
    seeds: the seeds both members have finite (neither diverged).
    differences: first minus second, seed by seed, in the metric's own units.
    mean: their mean.
    sd: their sample SD (ddof 1; NaN below 2 pairs).
    sd_bound: its one-sided upper confidence bound (`gelujax.study.power.sd_upper_factor`).
    detect: margin -> :func:`pairs_to_detect` at ``sd_bound``.
    equivalence: margin -> :func:`pairs_for_equivalence` at ``sd_bound``.
  """

  first: str
  second: str
  metric: str
  learning_rates: tuple[float, float]
  seeds: tuple[int, ...]
  differences: tuple[float, ...]
  mean: float
  sd: float
  sd_bound: float
  detect: Mapping[float, int | None]
  equivalence: Mapping[float, int | None]

  def to_json(self) -> dict[str, Any]:
    found = dataclasses.asdict(self)
    for key in ("detect", "equivalence"):
      found[key] = [{"margin": m, "pairs": n} for m, n in found[key].items()]
    return found


def spread(
  design: Pilot,
  first: tuple[str, Cell],
  second: tuple[str, Cell],
  metric: Metric,
) -> Spread:
  """The paired differences of two arms' cells (``(arm, cell)``, each at its selected lr) on
  ``metric``, their SD and its bound, and the pairs each candidate margin needs."""
  (a, cell_a), (b, cell_b) = first, second
  x, y = cell_a.values(metric.key), cell_b.values(metric.key)
  seeds = tuple(s for s in sorted(x) if s in y and math.isfinite(x[s]) and math.isfinite(y[s]))
  d = np.asarray([x[s] - y[s] for s in seeds], np.float64)
  sd = float(np.std(d, ddof=1)) if len(d) > 1 else math.nan
  bound = sd * power.sd_upper_factor(len(d), design.bound)
  kw = {"alpha": design.alpha, "power": design.power}
  return Spread(
    a, b, metric.key, (cell_a.learning_rate, cell_b.learning_rate), seeds, tuple(d.tolist()),
    float(d.mean()) if len(d) else math.nan, sd, bound,
    {m: power.pairs_to_detect(bound, m, **kw) for m in metric.margins},
    {m: power.pairs_for_equivalence(bound, m, **kw) for m in metric.margins},
  )  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Analysis:
  """What the pilot's finished runs say, validation metrics alone.

  Attributes:
    cells: arm -> lr -> its members' bests (finished arms only, in the design's order).
    selected: arm -> its selected lr (None: every member diverged).
    spreads: the comparisons whose arms both finished and have a selected lr, per metric.
    missing: the arms not finished.
  """

  cells: Mapping[str, Mapping[float, Cell]]
  selected: Mapping[str, float | None]
  spreads: tuple[Spread, ...]
  missing: tuple[str, ...]

  def to_json(self, design: Pilot) -> dict[str, Any]:
    cells = []
    for arm, by_lr in self.cells.items():
      for lr, c in by_lr.items():
        cells.append(
          {
            "arm": arm,
            "learning_rate": lr,
            "members": [dataclasses.asdict(b) for b in c.bests],
            "diverged": c.diverged,
            "selection_median": c.selection_median(design.select_metric),
            **{key: c.stats(key) for key in VALIDATION_KEYS},
          }
        )
    return {
      "select_metric": design.select_metric,
      "cells": cells,
      "selected": [{"arm": a, "learning_rate": lr} for a, lr in self.selected.items()],
      "spreads": [s.to_json() for s in self.spreads],
      "missing": list(self.missing),
    }


def analyse(design: Pilot, finished: Mapping[str, runs.Run]) -> Analysis:
  """The cells, selected lrs and paired spreads of the finished runs (``finished``:
  :func:`finished_runs`)."""
  cells = {arm: arm_cells(design, arm, finished[arm]) for arm in design.arms if arm in finished}
  selected = {arm: select_lr(c, design.select_metric) for arm, c in cells.items()}
  spreads = []
  for metric in design.metrics:
    for a, b in design.comparisons:
      if selected.get(a) is None or selected.get(b) is None:
        continue
      first, second = (a, cells[a][selected[a]]), (b, cells[b][selected[b]])
      spreads.append(spread(design, first, second, metric))
  missing = tuple(a for a in design.arms if a not in finished)
  return Analysis(cells, selected, tuple(spreads), missing)


def make_grids(design: Pilot, out: Path) -> list[grids.Grid]:
  """One grid per arm (in :meth:`Pilot.folder`), the design's lrs x seeds its members."""
  return grids.arm_grids(
    design.spec(), design.arms, out, lambda arm: design.learning_rates, design.variants
  )
