"""Whether a forms study's *equivalent* verdicts are calibrated, and how near its pairs are to one
network.

A control arm found *different* from gelu shows that the design can see a gap; only a gap of
about the margin's size shows that it can see the gaps an *equivalent* rules out. So an
*equivalent* is *calibrated* where the design is shown to detect a gap of about the margin:

- by its control (:func:`control_calibrates`): the control was found *different* in the
  equivalent's cell with an observed gap of at most :data:`CONTROL_MARGINS` margins; or
- by its own sensitivity (:func:`sensitivity`): the comparison's own paired differences,
  centred at zero and resampled (a fixed, seeded bootstrap), shifted by 0, 1 and 2 margins and
  each resample judged by the same paired TOST (`gelujax.study.stats.paired_equivalence_test`)
  at the family's strictest level, find a true shift of :data:`SHIFT_MARGINS` margins
  *different* in at least :data:`CALIBRATED_RATE` of the resamples.

Otherwise it is an *equivalent* whose control does not calibrate it (:data:`UNCALIBRATED`).

Each comparison's pairs share a seed (one initial draw, one batch order), so an *equivalent* is a
same-seed statement: one network and the same network with the other form. :func:`closeness`
says how near the two arms' networks stay: the per-seed correlation of their values, the share
of pairs whose members pick the same best epoch, each arm's SD across seeds beside the paired
SD; a pair is *nearly one network* where the correlation is at least :data:`NEARLY_ONE`.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from gelujax.study import forms, judge, numbers, runs, stats, transformer_runs
from gelujax.study.forms import Design, Outcome
from gelujax.study.judge import DIFFERENT, EQUIVALENT
from gelujax.study.transformer_runs import Result

# The bootstrap: its resamples and its seed, fixed so that every render gives the same rates.
RESAMPLES = 2000
BOOTSTRAP_SEED = 0
# The shifts each comparison's resamples are moved by, in margins.
SHIFTS = (0, 1, 2)
# The rule: a design calibrates an *equivalent* where a true shift of SHIFT_MARGINS margins is
# found *different* in at least CALIBRATED_RATE of the resamples. 2 margins: a shift of exactly
# one margin lies on the boundary, where *different* is found at about the test's level whatever
# the design; twice the margin is the smallest round gap that an *equivalent* at that margin
# claims to rule out with room to spare. 80%: the power every design of this project is sized
# for (`gelujax.study.stats.POWER`).
SHIFT_MARGINS = 2
CALIBRATED_RATE = stats.POWER
# A control calibrates where it was found *different* with an observed gap of at most this many
# margins: a gap of about the margin's size, not one many times it.
CONTROL_MARGINS = 3.0
# A pair is nearly one network where its two arms' per-seed values correlate at least this much:
# for arms of equal spread the paired SD is then at most sqrt(2 (1 - 0.9)) = 0.45 of the SD
# across seeds, so the interval is that much tighter than two independent networks' would be.
NEARLY_ONE = 0.9

CALIBRATED_BY_CONTROL = "calibrated by the control"
CALIBRATED_BY_SENSITIVITY = "calibrated by its own sensitivity"
UNCALIBRATED = "control uncalibrated"


@dataclasses.dataclass(frozen=True)
class Sensitivity:
  """What a comparison's own paired differences detect (:func:`sensitivity`).

  Attributes:
    resamples: the bootstrap's resamples.
    level: the level each resample is judged at.
    equivalent_at_zero: the share of resamples shifted by 0 found *equivalent*.
    different: shift in margins (1, 2) -> the share of resamples found *different*.
  """

  resamples: int
  level: float
  equivalent_at_zero: float
  different: Mapping[int, float]

  @property
  def calibrates(self) -> bool:
    """Whether a true shift of :data:`SHIFT_MARGINS` margins is found *different* in at least
    :data:`CALIBRATED_RATE` of the resamples."""
    return self.different[SHIFT_MARGINS] >= CALIBRATED_RATE

  def to_json(self) -> dict:
    return {
      "resamples": self.resamples,
      "level": self.level,
      "equivalent_at_zero": self.equivalent_at_zero,
      "different": {str(k): v for k, v in self.different.items()},
      "calibrates": self.calibrates,
    }


def decide(differences: np.ndarray, margin: float, level: float) -> str:
  """The paired TOST's decision on ``differences`` at ``level``: ``"equivalent"``,
  ``"different"`` or ``"inconclusive"``, as `gelujax.study.forms.judge` decides one test."""
  e = stats.paired_equivalence_test(differences, margin)
  if e.p < level:
    return "equivalent" if e.equivalent else "different"
  return "inconclusive"


def sensitivity(
  differences: Sequence[float],
  margin: float,
  level: float,
  *,
  resamples: int = RESAMPLES,
  seed: int = BOOTSTRAP_SEED,
) -> Sensitivity:
  """The comparison's own paired differences, centred at zero (their mean subtracted), resampled
  with replacement ``resamples`` times (NumPy's ``default_rng(seed)``; the same resamples for
  every shift), each resample moved by 0, 1 and 2 margins and judged by the paired TOST at
  ``level``: the share found *equivalent* at 0, and *different* at 1 and 2 margins."""
  d = np.asarray(differences, np.float64)
  centred = d - d.mean()
  rng = np.random.default_rng(seed)
  drawn = rng.integers(0, len(d), size=(resamples, len(d)))
  found: dict[int, list[str]] = {k: [] for k in SHIFTS}
  for index in drawn:
    sample = centred[index]
    for k in SHIFTS:
      found[k].append(decide(sample + k * margin, margin, level))
  return Sensitivity(
    resamples,
    level,
    sum(v == "equivalent" for v in found[0]) / resamples,
    {k: sum(v == "different" for v in found[k]) / resamples for k in SHIFTS if k},
  )


@functools.lru_cache(maxsize=256)
def cached_sensitivity(differences: tuple[float, ...], margin: float, level: float) -> Sensitivity:
  """:func:`sensitivity` at its defaults, kept for the render that asks for it again."""
  return sensitivity(differences, margin, level)


def control_calibrates(control_verdict: str, control_shift: float, margin: float) -> bool:
  """Whether a control calibrates: found *different* with an observed gap of at most
  :data:`CONTROL_MARGINS` margins."""
  return control_verdict == "different" and abs(control_shift) <= CONTROL_MARGINS * margin


def status(control_calibrated: bool, found: Sensitivity | None) -> str:
  """An *equivalent*'s calibration: by the control, by its own sensitivity, or neither."""
  if control_calibrated:
    return CALIBRATED_BY_CONTROL
  if found is not None and found.calibrates:
    return CALIBRATED_BY_SENSITIVITY
  return UNCALIBRATED


@dataclasses.dataclass(frozen=True)
class Closeness:
  """How near a comparison's two arms stay, seed by seed (:func:`closeness`).

  Attributes:
    pairs: the seeds both arms have a finite value for.
    correlation: the Pearson correlation of the two arms' per-seed values (NaN where either
      does not vary).
    same_epoch: the pairs whose two members pick the same best epoch (None where not known).
    sd_first, sd_second: each arm's SD across seeds (ddof 1).
    sd_paired: the SD of the paired differences (ddof 1).
  """

  pairs: int
  correlation: float
  same_epoch: int | None
  sd_first: float
  sd_second: float
  sd_paired: float

  @property
  def nearly_one(self) -> bool:
    """Whether the pairs are nearly one network (:data:`NEARLY_ONE`)."""
    return math.isfinite(self.correlation) and self.correlation >= NEARLY_ONE

  def to_json(self) -> dict:
    return dataclasses.asdict(self) | {"nearly_one": self.nearly_one}


def closeness(
  first: Mapping[int, float],
  second: Mapping[int, float],
  first_epochs: Mapping[int, float] | None = None,
  second_epochs: Mapping[int, float] | None = None,
) -> Closeness:
  """The two arms' per-seed values (seed -> value, as compared) on the seeds both have finite,
  and their best epochs (seed -> epoch) where given."""
  seeds = [
    s for s in sorted(first) if s in second and math.isfinite(first[s]) and math.isfinite(second[s])
  ]
  a = np.array([first[s] for s in seeds], np.float64)
  b = np.array([second[s] for s in seeds], np.float64)
  if len(seeds) < 2:
    nan = math.nan
    return Closeness(len(seeds), nan, None, nan, nan, nan)
  correlation = math.nan
  if np.std(a) > 0 and np.std(b) > 0:
    correlation = float(np.corrcoef(a, b)[0, 1])
  same = None
  if first_epochs is not None and second_epochs is not None:
    same = sum(first_epochs.get(s) == second_epochs.get(s) for s in seeds)
  return Closeness(
    len(seeds),
    correlation,
    same,
    float(np.std(a, ddof=1)),
    float(np.std(b, ddof=1)),
    float(np.std(a - b, ddof=1)),
  )


UNCALIBRATED_MARK = "‡"  # an *equivalent* whose control does not calibrate it, nor its own spread


def cell_key(o: Outcome) -> tuple[str, str, str, float, str]:
  c = o.comparison
  return (c.first, c.second, c.dtype, c.learning_rate, c.metric.key)


def _controls_and_sizes(
  outcomes: Sequence[Outcome],
) -> tuple[dict[tuple[str, float, str], Outcome], collections.Counter]:
  """Each cell's control outcome, by (dtype, lr, metric), and each family's size (its
  strictest Holm level is alpha over it)."""
  controls = {
    (o.comparison.dtype, o.comparison.learning_rate, o.comparison.metric.key): o
    for o in outcomes
    if o.comparison.control
  }
  return controls, collections.Counter(o.comparison.family for o in outcomes)


def calibrations(design: Design, outcomes: Sequence[Outcome]) -> dict[tuple, str]:
  """Each forms *equivalent* whose cell's control was found different (not †) -> what
  calibrates it (`gelujax.study.calibration`): the control, where found different within
  `CONTROL_MARGINS` margins; else its own paired differences' sensitivity at its
  family's strictest level; else :data:`gelujax.study.calibration.UNCALIBRATED`."""
  controls, sizes = _controls_and_sizes(outcomes)
  found = {}
  for o in outcomes:
    c = o.comparison
    control = controls.get((c.dtype, c.learning_rate, c.metric.key))
    if c.control or o.verdict != EQUIVALENT or control is None or control.verdict != DIFFERENT:
      continue
    margin = c.metric.margin
    if control_calibrates(control.verdict, control.shift, margin):
      found[cell_key(o)] = CALIBRATED_BY_CONTROL
      continue
    level = design.alpha / sizes[c.family]
    sensitivity = cached_sensitivity(tuple(o.differences), margin, level)
    found[cell_key(o)] = status(False, sensitivity)
  return found


def sensitivity_lines(design: Design, outcomes: Sequence[Outcome]) -> list[str]:
  """The sensitivity of each *equivalent* its control does not calibrate: the shares of its
  resampled differences found *equivalent* at a shift of 0 and *different* at 1 and 2 margins
  (`gelujax.study.calibration.sensitivity`), and the control's gap in margins."""
  calibrated = calibrations(design, outcomes)
  controls, sizes = _controls_and_sizes(outcomes)
  lines = []
  for o in outcomes:
    status = calibrated.get(cell_key(o))
    if status is None or status == CALIBRATED_BY_CONTROL:
      continue
    c = o.comparison
    control = controls[(c.dtype, c.learning_rate, c.metric.key)]
    level = design.alpha / sizes[c.family]
    s = cached_sensitivity(tuple(o.differences), c.metric.margin, level)
    lines.append(
      f"{forms.pair_words(o)}, {c.dtype}, lr {c.learning_rate:g}, {c.metric.label}: *equivalent* "
      f"with the same seeds; the control {numbers.signed(control.shift / c.metric.margin)} "
      f"margins away; its own sensitivity ({s.resamples} resamples of its paired differences "
      f"centred at zero, each judged at {s.level:.3g}): *equivalent* at a shift of 0 in "
      f"{100 * s.equivalent_at_zero:.1f}%, *different* at 1 margin in "
      f"{100 * s.different[1]:.1f}% and at 2 margins in {100 * s.different[2]:.1f}%: {status}."
    )
  return lines


def closeness_lines(
  design: Design, outcomes: Sequence[Outcome], finished: dict[str, runs.Run]
) -> list[str]:
  """How near the two arms' networks stay, seed by seed, for each *equivalent* the control was
  found different beside (`gelujax.study.calibration.closeness`): the per-seed correlation of
  their values as compared, the pairs whose members pick the same best epoch (a best-epoch
  metric), each arm's SD across seeds beside the paired SD; where they stay nearly one network,
  that its verdict is a same-seed statement."""
  calibrated = calibrations(design, outcomes)
  lines = []
  for o in outcomes:
    if cell_key(o) not in calibrated:
      continue
    c = o.comparison
    values, epochs = [], []
    for arm in (c.first, c.second):
      run = finished[design.run_name(arm, c.dtype)]
      values.append(forms.find_lr(runs.values(run, c.metric.key), c.learning_rate))
      epochs.append({m["seed"]: m["best_epoch"] for m in runs.lr_members(run, c.learning_rate)})
    first, second = forms.compared_values(*values, c.metric)
    best = c.metric.key.startswith("best.")
    k = closeness(first, second, *(epochs if best else (None, None)))
    same = (
      f", the same best epoch in {k.same_epoch} of {k.pairs} pairs"
      if k.same_epoch is not None
      else ""
    )
    sds = ", ".join(c.metric.amount(numbers.number(c.metric.shown(v), digits=3)) for v in (
      k.sd_first, k.sd_second
    ))  # fmt: skip
    line = (
      f"{forms.pair_words(o)}, {c.dtype}, lr {c.learning_rate:g}, {c.metric.label}: per-seed "
      f"correlation of the two arms {k.correlation:+.2f}{same}; SD across seeds ({c.first}, "
      f"{c.second}) {sds}; paired SD "
      f"{c.metric.amount(numbers.number(c.metric.shown(k.sd_paired), digits=3))}"
    )
    if k.nearly_one:
      line += (
        f": nearly one network (correlation at least {NEARLY_ONE:g}), so its "
        "*equivalent* is a same-seed statement, one initial draw and one batch order trained "
        "with either form"
      )
    lines.append(line + ".")
  return lines


def uncalibrated(o: Outcome, calibrated: dict[tuple, str]) -> bool:
  """Whether an *equivalent* is marked ‡ (:data:`UNCALIBRATED_MARK`)."""
  return calibrated.get(cell_key(o)) == UNCALIBRATED


UNCALIBRATED_WORDS = (
  "the control was found different from gelu, but more than {margins:g} margins away, and "
  "their own paired differences do not find a true {shift}-margin shift different in "
  "{rate:g}% of resamples: *equivalent* with the same seeds, control uncalibrated"
)


def uncalibrated_words() -> str:
  """What ‡ means, in words, from `gelujax.study.calibration`'s rule."""
  return UNCALIBRATED_WORDS.format(
    margins=CONTROL_MARGINS,
    shift=SHIFT_MARGINS,
    rate=100 * CALIBRATED_RATE,
  )


# An *equivalent* whose control does not calibrate it, nor its own sensitivity (as reported).
REPORTED_UNCALIBRATED = f"equivalent (same seeds), {UNCALIBRATED}"


@dataclasses.dataclass(frozen=True)
class Check:
  """A forms comparison's closeness and calibration (`gelujax.study.calibration`).

  Attributes:
    closeness: how near its two arms' networks stay, seed by seed.
    control_margins: its metric's control gap (control − gelu, observed), in margins.
    sensitivity: what its own paired differences detect (None: not an *equivalent*, or the
      control calibrates it).
    status: for an *equivalent*: calibrated by the control, by its own sensitivity, or not.
  """

  closeness: Closeness
  control_margins: float
  sensitivity: Sensitivity | None
  status: str

  def to_json(self) -> dict[str, Any]:
    return {
      "closeness": self.closeness.to_json(),
      "control_margins": self.control_margins,
      "sensitivity": None if self.sensitivity is None else self.sensitivity.to_json(),
      "status": self.status,
    }


@dataclasses.dataclass(frozen=True)
class Checked(Result):
  """A :class:`gelujax.study.transformer_runs.Result` with each forms comparison's :class:`Check`
  (key: first, second, measure key): an *equivalent* that neither its control nor its own
  sensitivity calibrates is reported as :data:`REPORTED_UNCALIBRATED`."""

  checks: Mapping[tuple[str, str, str], Check] = dataclasses.field(default_factory=dict)

  def check(self, o: Any) -> Check | None:
    c = o.comparison
    return self.checks.get((c.first, c.second, c.metric.key))

  def reported(self, o: forms.Outcome) -> str:
    found = super().reported(o)
    check = self.check(o)
    if found == judge.EQUIVALENT and check and check.status == UNCALIBRATED:
      return REPORTED_UNCALIBRATED
    return found


def reported_words(result: Result, o: Any) -> str:
  """A forms verdict as reported (:meth:`Checked.reported`), an *equivalent* with what
  calibrates it: ``"equivalent (same seeds), calibrated by its own sensitivity"``."""
  found = result.reported(o)
  check = result.check(o) if isinstance(result, Checked) else None
  if found == judge.EQUIVALENT and check is not None and o.comparison.is_form:
    return f"{found} (same seeds), {check.status}"
  return found


def checked(design: Design, result: Result, finished: Mapping[str, runs.Run]) -> Checked:
  """``result`` with each forms comparison's closeness (its arms' values as compared, and their
  best epochs) and, for an *equivalent*, its calibration: by its metric's control where that
  was found *different* within `CONTROL_MARGINS` margins, else by the sensitivity
  of its own paired differences at its family's strictest level."""
  fields = {f.name: getattr(result, f.name) for f in dataclasses.fields(Result)}
  if result.missing:
    return Checked(**fields)
  checks = {}
  for measure in design.measures:
    metric = design.metric(measure)
    chosen = [o for o in result.forms if o.comparison.metric.key == measure.key]
    control = next(o for o in chosen if o.comparison.control)
    forms_only = [o for o in chosen if o.comparison.is_form]
    gap = control.shift / metric.margin
    by_control = control_calibrates(control.verdict, control.shift, metric.margin)
    for o in forms_only:
      c = o.comparison
      values, epochs = [], []
      for arm in (c.first, c.second):
        run = finished[arm]
        found = transformer_runs.arm_values(design, arm, run)[measure.key]
        values.append(transformer_runs.as_compared(metric, found))
        members = runs.lr_members(run, design.learning_rates[arm])
        epochs.append({m["seed"]: m["best_epoch"] for m in members})
      near = closeness(*values, *epochs)
      own = None
      if o.verdict == judge.EQUIVALENT and not by_control:
        level = design.alpha / len(forms_only)
        own = sensitivity(o.differences, metric.margin, level)
      how = status(by_control, own)
      checks[(c.first, c.second, measure.key)] = Check(near, gap, own, how)
  return Checked(**fields, checks=checks)
