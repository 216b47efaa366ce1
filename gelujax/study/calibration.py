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

import dataclasses
import functools
import math
from collections.abc import Mapping, Sequence

import numpy as np

from gelujax.study import stats

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
