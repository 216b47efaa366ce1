"""Which GELU? The study of the forms, fixed here before any of its runs was trained.

The question practitioners ask: do the GELU forms (``gelu``, the exact erf form that PyTorch and
TensorFlow default to; ``gelu_tanh``, the tanh approximation that ``jax.nn.gelu`` and Flax
default to; ``gelu_sigmoid``, x·σ(1.702x)) train differently, and can a network trained with one
be run with another? :data:`DESIGN` fixes the runs, the metrics, the equivalence margins and
their reasons, the comparisons, their families and the verdict rule (:func:`judge`); ``relu`` is
the positive control: a design that cannot tell relu from gelu cannot call the forms
equivalent. The swap at inference (:func:`evaluate_swaps`) is exploratory: effect sizes with
intervals, no verdicts.

Runs: one grid per arm and dtype, ``<out>/runs/<arm>_<dtype>/``, every lr x every seed as the
members of one program; one seed gives one initial draw, one batch order and (with dropout) one
dropout stream in every arm, so each comparison is paired by seed. Swaps are kept in
``<out>/wrong_form/<arm>_<dtype>.json`` (`gelujax.study.wrong_form`'s one format) so that a
result re-renders from the committed files alone.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gelujax.study import grids, power, runs, stats, verdicts, wrong_form
from gelujax.study import judge as judge_rule
from gelujax.study.judge import INCONCLUSIVE

TASK = "gelu_forms"
FORMS = ("gelu", "gelu_tanh", "gelu_sigmoid")
CONTROL = "relu"
FORMS_FAMILY, CONTROL_FAMILY = "forms", "control"
NEGATIVE_FAMILY = (
  "negative control"  # a network against itself on other seeds: must be *equivalent*
)


@dataclasses.dataclass(frozen=True)
class Metric:
  """A per-network value the arms are compared on, and its equivalence margin.

  Attributes:
    key: ``"best.test_error"`` (at the best-validation epoch) or ``"final.train_loss"``
      (after the last epoch), as a run's summary.json holds it.
    label: its words, with units.
    margin: the largest paired shift that counts as equivalent, in the compared units
      (after ``log`` where set).
    scale: multiplies the values and shifts shown (100 for percent).
    log: compare the natural logs of the values (a shift of ln 1.05 is a 5% ratio).
    reason: why the margin is what it is.
    examples: compare a rate in whole examples of a split of this many (0: as a float); the
      margin is then in examples, and :attr:`scale` turns examples into the units shown.
  """

  key: str
  label: str
  margin: float
  scale: float = 1.0
  log: bool = False
  reason: str = ""
  examples: int = 0

  def compared(self, values: Sequence[float]) -> np.ndarray:
    """The values as compared: their logs where :attr:`log` is set; whole examples (a rate
    times :attr:`examples`, rounded) where that is set, so that two networks one example apart
    differ by exactly 1 and two that err on as many examples do not differ at all."""
    x = np.asarray(values, np.float64)
    if self.examples:
      return np.rint(x * self.examples)
    return np.log(x) if self.log else x

  def shown_values(self, values: Sequence[float]) -> np.ndarray:
    """Values (not shifts) in the units shown: whole examples as a percentage of the split, a
    rate in percent."""
    x = np.asarray(values, np.float64)
    return (np.rint(x * self.examples) if self.examples else x) * self.scale

  def shown(self, shift: float) -> float:
    """A shift in the units shown: percent points, nats, or percent of the ratio (log)."""
    return 100.0 * math.expm1(shift) if self.log else shift * self.scale

  @property
  def unit(self) -> str:
    if self.log:
      return "%"
    return "points" if self.scale * max(self.examples, 1) == 100.0 else "nats"

  def amount(self, text: str) -> str:
    """``text`` with the unit: ``"+0.04 points"``, ``"+1.2%"``."""
    return f"{text}%" if self.log else f"{text} {self.unit}"


@dataclasses.dataclass(frozen=True)
class Design:
  """The study's runs and tests.

  Attributes:
    date: when the design was fixed in code (UTC), before any of its runs was trained.
    task: the registered task trained (the paper's Fig. 2 MLP and optimizer).
    dataset: its data set.
    dropout: the dropout rate of every run.
    epochs: epochs of every run, fixed from the timing trial :attr:`epochs_reason` states.
    arms: the activations trained: the forms, then the control.
    learning_rates: every arm is trained at each; the forms are compared at each lr (no lr is
      selected, so no selection stands between two forms).
    seeds: the shared seeds: one network per arm, lr, dtype and seed.
    dtypes: what the layers and activations compute in (``TaskSpec.dtype``).
    metrics: the compared values and their margins.
    alpha: the level of every family, after Holm's correction.
    epochs_reason: the timing trial that fixed the epochs.
    name: the study's name (``reproduce.py --task``, its result's folder).
    control: the positive control's arm, compared with ``gelu`` in a family of its own.
    control_reason: why it is the control.
    swaps: whether every network is also evaluated with the other forms (:func:`evaluate_swaps`).
    seeds_reason: how the seed count was fixed (the pilot, where one was run).
    tie_rule: which epoch is a member's best where validation ties (the trainer's rule, stated).
  """

  date: str
  task: str
  dataset: str
  dropout: float
  epochs: int
  arms: tuple[str, ...]
  learning_rates: tuple[float, ...]
  seeds: tuple[int, ...]
  dtypes: tuple[str, ...]
  metrics: tuple[Metric, ...]
  alpha: float = stats.ALPHA
  epochs_reason: str = ""
  name: str = TASK
  control: str = CONTROL
  control_reason: str = (
    "relu is the positive control: a design that cannot tell relu from gelu cannot call the "
    "forms equivalent"
  )
  swaps: bool = True
  seeds_reason: str = ""
  tie_rule: str = (
    "a member's best epoch is the first with its lowest validation loss (the task's selection "
    "metric): where epochs tie, the earliest"
  )

  @property
  def forms(self) -> tuple[str, ...]:
    return tuple(a for a in self.arms if a != self.control)

  def run_name(self, arm: str, dtype: str) -> str:
    return f"{arm}_{dtype}"

  def run_names(self) -> list[str]:
    """Every grid's run name, dtype by dtype, arm by arm."""
    return [self.run_name(a, d) for d in self.dtypes for a in self.arms]


DESIGN = Design(
  date="2026-11-26",
  task="mnist",
  dataset="fashion_mnist",
  dropout=0.0,
  epochs=20,
  arms=(*FORMS, CONTROL),
  learning_rates=(3e-4, 1e-3, 3e-3),
  seeds=tuple(range(10)),
  dtypes=("float32", "bfloat16"),
  metrics=(
    Metric(
      "best.test_error", "test error (%) at the best-validation epoch", 0.002, scale=100.0,
      reason="0.2 points is 20 of Fashion-MNIST's 10,000 test images, below the spread "
      "between seeds of one arm and below the smallest gap the GELU paper reports between "
      "activations (0.1-0.3 points on Twitter POS): not a difference a practitioner would "
      "choose an activation by",
    ),
    Metric(
      "best.test_loss", "test log loss (nats) at the best-validation epoch", 0.005,
      reason="0.005 nats is about 1.5% of this MLP's test loss on Fashion-MNIST (about 0.3 "
      "nats): a difference in calibration no practitioner would act on",
    ),
    Metric(
      "final.train_loss", "final train log loss (ratio)", math.log(1.05), log=True,
      reason="the train loss after a fixed number of epochs spans an order of magnitude "
      "across the lrs, so its margin is a ratio: within 5% of each other (a shift of the "
      "logs within ±ln 1.05); the GELU paper's Fig. 2 separates activations by factors of 2",
    ),
  ),
  epochs_reason="a timing trial on a 2-core AMD EPYC (one 30-member grid, gelu, 2 epochs, "
  "compile included) took 20.0 s an epoch in float32 and 25.3 s in bfloat16: 20 epochs of "
  "the 8 grids take about 60 minutes, which fits a session beside other work; the paper's 50 "
  "epochs and a dropout-0.5 arm would take 2.5 and 2 times as long, and are left for a later "
  "run under another name",
)  # fmt: skip


def whole_images(design: Design, finished: dict[str, runs.Run]) -> dict[str, Any] | None:
  """What comparing ``design``'s test error (a float rate) in whole test images would change:
  the outcomes of both rules, and the counts the correction states. None where its test error
  is already compared in whole images, or the design has none."""
  index = next(
    (i for i, m in enumerate(design.metrics) if m.key == "best.test_error" and not m.examples),
    None,
  )
  if index is None:
    return None
  metric = design.metrics[index]
  whole = whole_test_error(metric.reason)
  rounded = dataclasses.replace(design, metrics=(whole,))
  floats = dataclasses.replace(design, metrics=(metric,))
  as_floats, _ = analyse(floats, finished)
  as_images, _ = analyse(rounded, finished)
  changed = [
    abs(a.equivalence.p - b.equivalence.p)
    for a, b in zip(as_floats, as_images, strict=True)
    if abs(a.equivalence.p - b.equivalence.p) > 1e-12
  ]
  images = [np.asarray(b.differences) for b in as_images]
  floated = [np.asarray(a.differences) for a in as_floats]
  return {
    "tests": len(as_floats),
    "p_changed": len(changed),
    "p_largest": max(changed, default=0.0),
    "verdicts_changed": sum(
      a.verdict != b.verdict for a, b in zip(as_floats, as_images, strict=True)
    ),
    "zeros": int(sum(((i == 0) & (f != 0)).sum() for i, f in zip(images, floated, strict=True))),
    "broken_ties": sum(
      sum(1 for k in range(len(i)) if ((i == i[k]) & (f != f[k])).any())
      for i, f in zip(images, floated, strict=True)
    ),
    "at_margin": int(
      sum(
        ((np.abs(i) == whole.margin) & (np.abs(f) != metric.margin)).sum()
        for i, f in zip(images, floated, strict=True)
      )
    ),
    "differences": int(sum(len(i) for i in images)),
  }


def paired_spread(design: Design, outcomes: Sequence[Outcome]) -> dict[float, dict[str, Any]]:
  """What ``design``'s pairs could resolve on test error: per lr, over the forms' comparisons,
  the range of the paired differences' SD (in the units shown), and of the pairs with which a
  true shift of 0 (the differences centred on their paired shift) would be called equivalent
  with 80% power at the family's strictest level (:func:`gelujax.study.power.pairs_for_power`;
  None: more than ``stats.MAX_SEEDS``)."""
  metric = next((m for m in design.metrics if m.key == "best.test_error"), None)
  if metric is None:
    return {}
  sizes: dict[tuple[str, str, str], int] = {}
  for c in comparisons(design):
    sizes[c.family] = sizes.get(c.family, 0) + 1
  found: dict[float, dict[str, Any]] = {}
  for lr in design.learning_rates:
    chosen = [
      o for o in outcomes
      if not o.comparison.control and o.comparison.metric.key == metric.key
      and runs.same_lr(o.comparison.learning_rate, lr) and len(o.seeds) >= 3
    ]  # fmt: skip
    if not chosen:
      continue
    sds, pairs = [], []
    for o in chosen:
      d = np.asarray(o.differences)
      sds.append(metric.shown(float(np.std(d, ddof=1))))
      level = design.alpha / sizes[o.comparison.family]
      centred = d - stats.walsh_median(d)
      pairs.append(power.pairs_for_power(centred, level=level, margin=metric.margin))
    found[lr] = {
      "sd_low": min(sds),
      "sd_high": max(sds),
      "pairs": pairs,
      "seeds": max(len(o.seeds) for o in chosen),
    }
  return found


POWERED_TASK = "gelu_forms_powered"
# The pilot: DESIGN's finished float32 grids of the forms (its seeds 0-9), whose paired spread
# fixed POWERED's seed count (`pilot`). Its power is asked of the forms family's strictest level.
PILOT_RUNS = ("gelu_float32", "gelu_tanh_float32")


def whole_test_error(reason: str) -> Metric:
  """Test error at the best-validation epoch in whole images of Fashion-MNIST's 10,000, margin
  20 images (0.2 points)."""
  return Metric(
    "best.test_error", "test error (%) at the best-validation epoch, in whole images", 20.0,
    scale=0.01, examples=10_000, reason=reason,
  )  # fmt: skip


# The powered study of the forms, fixed before any of its runs was trained: the one question the
# first design could not answer (gelu_tanh against gelu on test metrics, where it found 4
# equivalents all marked †), with the pairs its pilot says decide it, and a control that the
# design can detect. The first design's task, data, dropout, epochs, level and tie rule.
POWERED = dataclasses.replace(
  DESIGN,
  date="2026-11-27",
  arms=("gelu", "gelu_tanh", "identity"),
  learning_rates=(3e-4, 1e-3),
  seeds=tuple(range(1000, 1060)),
  dtypes=("float32",),
  metrics=(
    whole_test_error(
      "0.2 points is 20 of the 10,000 test images, the first design's margin, kept so that the "
      "two designs answer the same question; it is twice the smallest gap the GELU paper "
      "reports between two activations (0.10 points, Twitter POS), so *equivalent* here does "
      "not rule out a gap of that size. Compared in whole images, a tie is a zero"
    ),
    Metric(
      "best.test_loss", "test log loss (nats) at the best-validation epoch", 0.005,
      reason="0.005 nats is 1.5% of this MLP's test loss on Fashion-MNIST (its median in the "
      "pilot's grids is 0.33 nats): a difference in calibration no practitioner would act on",
    ),
  ),
  epochs_reason="the pilot's 20 epochs, so that the pilot's spread between seeds applies; the "
  "first design's timing trial (20.0 s an epoch for a 30-member float32 grid on 2 AMD EPYC "
  "cores) puts the 3 grids of 120 members at about 80 minutes on 2 quiet cores. The final train "
  "loss is not compared: it still fell 5-12% (median) over the pilot's last 4 epochs, so a 5% "
  "margin would be one or two epochs of progress",
  name=POWERED_TASK,
  control="identity",
  control_reason="identity (a linear network) is the positive control: relu cannot serve on "
  "test error here (the first design could not tell it from gelu in 14 of 18 cells; its pilot "
  "spread asks for 51 to 163 pairs), while a linear classifier's gap on Fashion-MNIST is about "
  "4 points, 20 margins (Xiao et al., 2017, the data set's paper: logistic regression at about "
  "84% test accuracy, multilayer perceptrons at about 87-88%): a design that cannot call that "
  "different cannot call anything. It shows the pipeline can decide "
  "'different' in whole images; the margin-scale sensitivity is the pilot's power",
  swaps=False,
  seeds_reason="60 fresh seeds (1000-1059, none the pilot's), the pilot's answer rounded up to "
  "tens (`gelujax.study.forms.pilot`: the pairs that decide gelu_tanh − gelu with 80% power at "
  "the family's strictest level, with the SD of its 10 differences at its one-sided 80% upper "
  "confidence bound, at the larger of the two lrs' needs)",
)  # fmt: skip


def pilot(finished: dict[str, runs.Run], design: Design = POWERED) -> dict[float, dict[str, Any]]:
  """What the pilot (``finished``: DESIGN's `PILOT_RUNS`) says of ``design``'s seed count: at
  each of its lrs, gelu_tanh − gelu's paired differences in whole test images, their SD and
  Hodges–Lehmann shift, and the pairs that decide that shift with 80% power at the forms
  family's strictest level (``pairs``; ``pairs_bound`` with the SD at its one-sided
  `gelujax.study.power.PILOT_BOUND` upper confidence bound, `gelujax.study.power.pairs_at_bound`);
  ``seeds``: the largest ``pairs_bound``, rounded up to tens."""
  metric = design.metrics[0]
  family = [c for c in comparisons(design) if not c.control and c.metric.key == metric.key]
  level = design.alpha / len({(c.first, c.second, c.learning_rate) for c in family})
  gelu, tanh = (runs.values(finished[name], metric.key) for name in PILOT_RUNS)
  found: dict[float, dict[str, Any]] = {}
  for lr in design.learning_rates:
    first, second = compared_values(find_lr(tanh, lr), find_lr(gelu, lr), metric)
    d = np.asarray([first[s] - second[s] for s in first])
    pairs, bound = power.pairs_at_bound(d, level=level, margin=metric.margin)
    found[lr] = {
      "differences": d.tolist(),
      "sd": float(np.std(d, ddof=1)),
      "shift": float(stats.walsh_median(d)),
      "pairs": pairs,
      "pairs_bound": bound,
    }
  needed = max(v["pairs_bound"] or stats.MAX_SEEDS for v in found.values())
  return {"level": level, "seeds": power.in_tens(needed), "lrs": found}


@dataclasses.dataclass(frozen=True)
class Comparison:
  """One pre-registered test: the paired shift of ``first`` from ``second`` (first minus
  second, seed by seed) on ``metric`` at ``learning_rate`` in ``dtype``; a positive ``control``
  (which must be found *different*), a ``negative`` control (one network against itself on
  other seeds, which must be found *equivalent*), or else a comparison of forms."""

  first: str
  second: str
  dtype: str
  learning_rate: float
  metric: Metric
  control: bool = False
  negative: bool = False

  @property
  def is_form(self) -> bool:
    """A comparison of forms, neither control."""
    return not (self.control or self.negative)

  @property
  def family(self) -> tuple[str, str, str]:
    """Holm's correction runs within (forms, control or negative control, dtype, metric)."""
    name = CONTROL_FAMILY if self.control else NEGATIVE_FAMILY if self.negative else FORMS_FAMILY
    return (name, self.dtype, self.metric.key)


def comparisons(design: Design = DESIGN) -> list[Comparison]:
  """Every test: each pair of forms (later form minus earlier, in the design's order) and the
  control minus ``gelu``, at every lr, in every dtype, on every metric."""
  forms = design.forms
  pairs = [(b, a) for i, a in enumerate(forms) for b in forms[i + 1 :]]
  if design.control in design.arms:
    pairs.append((design.control, forms[0]))
  return [
    Comparison(first, second, dtype, lr, metric, control=design.control in (first, second))
    for metric in design.metrics
    for dtype in design.dtypes
    for lr in design.learning_rates
    for first, second in pairs
  ]


@dataclasses.dataclass(frozen=True)
class Outcome:
  """A comparison's evidence and verdict.

  Attributes:
    comparison: what was compared.
    seeds: the seeds paired (both networks finite).
    differences: first minus second per seed, as compared (logs for a ratio metric).
    shift: the paired Hodges–Lehmann shift (median of the Walsh averages).
    interval: its exact distribution-free interval and achieved level.
    p_zero: the two-sided signed-rank p of a zero shift (descriptive, uncorrected); 1 where
      every difference is 0.
    equivalence: the paired TOST and beyond-the-margin tests.
    p_holm: the equivalence test's p after Holm within the comparison's family.
    verdict: equivalent, different or inconclusive.
    direction: for a shift: ``"higher"`` or ``"lower"`` (first against second).
    pairs_needed: for an inconclusive one, the pairs with which the observed shift would be
      decided with 80% power at the family's strictest level (None: no number would).
  """

  comparison: Comparison
  seeds: tuple[int, ...]
  differences: tuple[float, ...]
  shift: float
  interval: tuple[float, float, float]
  p_zero: float
  equivalence: stats.Equivalence
  p_holm: float = math.nan
  verdict: str = INCONCLUSIVE
  direction: str = ""
  pairs_needed: int | None = None


def compared_values(
  first: dict[int, float], second: dict[int, float], metric: Metric
) -> tuple[dict[int, float], dict[int, float]]:
  """Each arm's values as compared (logs for a ratio metric), on the seeds, in order, that both
  networks have a finite value for."""
  seeds = [
    s for s in sorted(first) if s in second and math.isfinite(first[s]) and math.isfinite(second[s])
  ]
  return tuple(
    dict(zip(seeds, map(float, metric.compared([arm[s] for s in seeds])), strict=True))
    for arm in (first, second)
  )


def paired_outcome(
  comparison: Comparison, first: dict[int, float], second: dict[int, float]
) -> Outcome:
  """The paired tests of one comparison (seed -> value of each arm), before Holm: the paired
  comparison of matched seeds (:class:`gelujax.study.verdicts.PairedComparison`) and the
  equivalence tests of its differences."""
  paired = verdicts.PairedComparison.of(*compared_values(first, second, comparison.metric))
  margin = comparison.metric.margin
  if paired is None:
    nan = math.nan
    return Outcome(comparison, (), (), nan, (nan, nan, nan), nan, stats.Equivalence(margin, 1, 1))
  d = np.asarray(paired.differences)
  return Outcome(
    comparison,
    paired.seeds,
    paired.differences,
    paired.shift,
    (paired.low, paired.high, paired.confidence),
    paired.p if paired.zeros < len(d) else 1.0,  # no shift at all: p = 1
    stats.paired_equivalence_test(d, margin),
  )


def judge(outcomes: Sequence[Outcome], alpha: float = stats.ALPHA) -> list[Outcome]:
  """The verdicts, Holm's correction run within each family.

  The rule: a comparison's p is its equivalence test's (:attr:`gelujax.study.stats.Equivalence.p`,
  twice the smaller of the TOST p and the beyond-the-margin p, so either decision is made at
  the level of one test). Where its Holm-adjusted p is below ``alpha`` (as every judge decides:
  an exact paired p is a multiple of 1/2^n, never exactly a level like 0.05) the verdict is the
  decision that p stands for: *equivalent* (the paired shift lies within ±margin) or *different*
  (it lies beyond the margin, ``direction`` saying which way). Otherwise *inconclusive*, with the
  pairs that would decide the observed shift. A comparison without pairs is inconclusive.
  """
  families: dict[tuple[str, str, str], list[int]] = {}
  for i, o in enumerate(outcomes):
    families.setdefault(o.comparison.family, []).append(i)
  judged = list(outcomes)
  for members in families.values():
    family = [
      # A comparison without pairs: p = 1 (never decided), inconclusive rather than pending.
      judge_rule.Test(
        outcomes[i].equivalence.p if outcomes[i].seeds else 1.0,
        judge_rule.EITHER,
        within=outcomes[i].equivalence.equivalent,
      )
      for i in members
    ]
    strictest = alpha / len(members)
    for i, decision in zip(members, judge_rule.decide(family, alpha), strict=True):
      o = outcomes[i]
      direction = "" if not o.seeds or o.shift == 0 else ("higher" if o.shift > 0 else "lower")
      needed = None
      if decision.verdict == INCONCLUSIVE:
        margin = o.comparison.metric.margin
        needed = power.pairs_for_power(o.differences, level=strictest, margin=margin)
      judged[i] = dataclasses.replace(
        o, p_holm=decision.holm, verdict=decision.verdict, direction=direction,
        pairs_needed=needed,
      )  # fmt: skip
  return judged


def make_grids(design: Design, out: Path) -> list[grids.Grid]:
  """One grid per dtype and arm (dtype major), every lr and seed its members."""
  from gelujax import tasks  # Here: tasks imports the models.

  spec = tasks.get(design.task).replace(
    dataset=design.dataset, dropout=design.dropout, epochs=design.epochs
  )
  return [
    grids.Grid(
      design.run_name(arm, dtype),
      spec.replace(activation=arm, dtype=dtype),
      out / "runs" / design.run_name(arm, dtype),
      design.learning_rates,
    )
    for dtype in design.dtypes
    for arm in design.arms
  ]


def swap_targets(design: Design, arm: str, dtype: str) -> list[tuple[str, str]]:
  """What a network trained with ``arm`` in ``dtype`` is evaluated with, besides itself: each
  other form in its own dtype (forms only), and its own activation in each lower-precision dtype
  (a float32 network)."""
  targets = [(f, dtype) for f in design.forms if arm in design.forms and f != arm]
  if dtype == "float32":
    targets += [(arm, d) for d in design.dtypes if d != "float32"]
  return targets


def evaluate_swaps(
  design: Design, grid: grids.Grid, *, out: Path, data_dir: str | None
) -> list[wrong_form.WrongForm] | None:
  """The grid's networks on the test split run with each of :func:`swap_targets` against their
  own activation, kept in ``out/wrong_form/<run>.json`` (`gelujax.study.wrong_form.keep`); None
  where neither kept nor restorable."""
  targets = swap_targets(design, grid.spec.activation, grid.spec.dtype)
  return wrong_form.keep(grid.workdir, targets, wrong_form.kept_path(out, grid.name), data_dir)


def finished_runs(design: Design, out: Path) -> dict[str, runs.Run]:
  """The study's finished grids, each read once: run name -> its files."""
  return runs.finished(out, {name: name for name in design.run_names()})


def still_falling(design: Design, finished: dict[str, runs.Run]) -> dict[str, dict[str, Any]]:
  """How much each compared *final* metric (``final.train_loss``) still fell at the end of the
  runs, from their ``metrics.jsonl``: per grid and lr, the median over its members of the fall
  over the last fifth of training (:func:`gelujax.study.curves.still_falling`), and the margin
  in epochs of that fall (the margin over the mean fall per epoch of the logs, for a ratio
  metric). Returns metric key -> ``{"low", "high"`` (the medians' range), ``"start",
  "epoch"`` (the epochs the fifth spans), ``"cells"``, ``"epochs_low", "epochs_high"`` (the
  margin in epochs; NaN for a metric not compared as a ratio)``}``, for the metrics whose
  largest median fall is at least :data:`gelujax.study.curves.FALLING_SHARE`."""
  from gelujax.study import curves  # Here: curves reads the paper's class counts.

  found: dict[str, dict[str, Any]] = {}
  for metric in design.metrics:
    if not metric.key.startswith("final."):
      continue
    key = metric.key.split(".", 1)[1]
    facts = [
      fact
      for name in design.run_names()
      if name in finished
      for lr in design.learning_rates
      if (fact := curves.still_falling(finished[name], lr, key)) is not None
    ]
    if not facts or max(f["median"] for f in facts) < curves.FALLING_SHARE:
      continue
    epochs = [
      metric.margin / (-math.log1p(-f["median"]) / (f["epoch"] - f["start"]))
      if metric.log and f["median"] > 0
      else math.nan
      for f in facts
    ]
    found[metric.key] = {
      "low": min(f["median"] for f in facts),
      "high": max(f["median"] for f in facts),
      "start": facts[0]["start"],
      "epoch": facts[0]["epoch"],
      "cells": len(facts),
      "epochs_low": min(epochs),
      "epochs_high": max(epochs),
    }
  return found


def find_lr(values: dict[float, Any], learning_rate: float) -> Any:
  return next((v for lr, v in values.items() if runs.same_lr(lr, learning_rate)), {})


def analyse(design: Design, finished: dict[str, runs.Run]) -> tuple[list[Outcome], list[str]]:
  """Every comparison whose two grids have finished (``finished``: `finished_runs`), judged; and
  the runs not finished."""
  missing = [name for name in design.run_names() if name not in finished]
  cache: dict[tuple[str, str], dict[float, dict[int, float]]] = {}

  def values(arm: str, c: Comparison) -> dict[int, float]:
    name = design.run_name(arm, c.dtype)
    if (name, c.metric.key) not in cache:
      cache[name, c.metric.key] = runs.values(finished[name], c.metric.key)
    return find_lr(cache[name, c.metric.key], c.learning_rate)

  outcomes = [
    paired_outcome(c, values(c.first, c), values(c.second, c))
    for c in comparisons(design)
    if all(design.run_name(a, c.dtype) in finished for a in (c.first, c.second))
  ]
  return judge(outcomes, design.alpha), missing


def pair_words(o: Outcome) -> str:
  c = o.comparison
  return f"{c.first} − {c.second}" + (" (control)" if c.control else "")
