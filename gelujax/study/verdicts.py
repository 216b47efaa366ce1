"""Verdicts on pre-registered hypotheses, and the comparisons behind every other statement.

A :class:`gelujax.paper.Hypothesis` is judged on the per-seed values of two runs, GELU's and a
baseline's (:class:`Evidence`), with every other hypothesis of its task's family:

- a directional claim (GELU below or above the baseline) by the exact two-sided rank-sum test
  (:func:`gelujax.study.stats.rank_test`): two-sided because a verdict can go either way, and a
  test on one side only could never find the paper wrong;
- an equivalence claim (within a margin) by :func:`gelujax.study.stats.equivalence_test`;
- the family's p-values adjusted by Holm's method, a hypothesis still waiting for its seeds
  counting as p = 1, so that adding its seeds later can only lower the others' adjusted p;
- one verdict each (:data:`VERDICTS`): *confirmed* (Holm p < alpha, in the paper's direction),
  *refuted* (Holm p < alpha, against it; for an equivalence claim: beyond the margin),
  *equivalent* (Holm p < alpha, within the margin), *inconclusive* (none of these: with the
  seeds a side that would decide the observed effect with 80% power), or *pending* (its
  evaluation seeds are not trained, or a run is missing).

Every comparison, judged or exploratory, is a :class:`Comparison`: both medians, the
Hodges–Lehmann shift with its exact interval, and the two-sided p-value.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from gelujax.paper import EQUIVALENT, HIGHER, LOWER, Hypothesis
from gelujax.study import stats

CONFIRMED, REFUTED, INCONCLUSIVE, PENDING = "confirmed", "refuted", "inconclusive", "pending"
VERDICTS = (CONFIRMED, REFUTED, EQUIVALENT, INCONCLUSIVE, PENDING)


@dataclasses.dataclass(frozen=True)
class Comparison:
  """Run ``a``'s per-seed values against run ``b``'s.

  Attributes:
    a, b: the values (in seed order).
    shift: the Hodges–Lehmann shift of ``a`` from ``b`` (negative: ``a`` lies lower).
    low, high: its exact confidence interval (:func:`gelujax.study.stats.shift_interval`).
    confidence: the interval's achieved level.
    p: the exact two-sided rank-sum p-value.
    ties: distinct values shared by several of the pooled seeds (given mid-ranks).
  """

  a: tuple[float, ...]
  b: tuple[float, ...]
  shift: float
  low: float
  high: float
  confidence: float
  p: float
  ties: int

  @classmethod
  def of(cls, a: Sequence[float], b: Sequence[float]) -> Comparison:
    a, b = tuple(map(float, a)), tuple(map(float, b))
    low, high, confidence = stats.shift_interval(a, b)
    return cls(
      a,
      b,
      stats.hodges_lehmann(a, b),
      low,
      high,
      confidence,
      stats.rank_test(a, b),
      stats.tied_values(a, b),
    )

  @property
  def median_a(self) -> float:
    return float(np.median(self.a))

  @property
  def median_b(self) -> float:
    return float(np.median(self.b))

  def to_json(self) -> dict[str, Any]:
    return {
      **dataclasses.asdict(self),
      "a": list(self.a),
      "b": list(self.b),
      "median_a": self.median_a,
      "median_b": self.median_b,
    }


@dataclasses.dataclass(frozen=True)
class Evidence:
  """What a hypothesis is tested on: GELU's and the baseline's per-seed values, and where they
  come from (``seeds``, e.g. ``"evaluation seeds 100–109 at the selected lr"``)."""

  gelu: tuple[float, ...]
  baseline: tuple[float, ...]
  seeds: str


@dataclasses.dataclass(frozen=True)
class Verdict:
  """The judgement of one hypothesis within its family.

  Attributes:
    hypothesis: what was claimed.
    verdict: one of :data:`VERDICTS`.
    comparison: GELU against the baseline; None when pending.
    seeds: where the values come from (:attr:`Evidence.seeds`), or why it is pending.
    p: the hypothesis' p-value: the two-sided rank-sum p, or an equivalence claim's
      :attr:`gelujax.study.stats.Equivalence.p`; 1 when pending.
    holm: ``p`` adjusted by Holm's method over the family.
    equivalence: an equivalence claim's tests; else None.
    seeds_needed: for an inconclusive verdict, the seeds a side that would decide the observed
      effect with 80% power (None: no number would, or more than ``stats.MAX_SEEDS``).
  """

  hypothesis: Hypothesis
  verdict: str
  comparison: Comparison | None
  seeds: str
  p: float
  holm: float
  equivalence: stats.Equivalence | None = None
  seeds_needed: int | None = None

  def to_json(self) -> dict[str, Any]:
    return {
      "hypothesis": dataclasses.asdict(self.hypothesis),
      "claim": self.hypothesis.describe(),
      "verdict": self.verdict,
      "comparison": self.comparison.to_json() if self.comparison else None,
      "seeds": self.seeds,
      "p": self.p,
      "holm": self.holm,
      "equivalence": dataclasses.asdict(self.equivalence) if self.equivalence else None,
      "seeds_needed": self.seeds_needed,
    }


def judge(
  hypotheses: Sequence[Hypothesis], evidence: Callable[[Hypothesis], Evidence | str]
) -> list[Verdict]:
  """The verdicts of one family of hypotheses, in their order.

  Args:
    hypotheses: the family (e.g. a task's primary hypotheses).
    evidence: a hypothesis' values, or the reason it cannot be tested yet (e.g. ``"pending:
      evaluation seeds not trained"``).
  """
  found = [evidence(h) for h in hypotheses]
  tests: list[tuple[Comparison | None, stats.Equivalence | None, float]] = []
  for h, e in zip(hypotheses, found, strict=True):
    if isinstance(e, str):
      tests.append((None, None, 1.0))
      continue
    comparison = Comparison.of(e.gelu, e.baseline)
    if h.direction == EQUIVALENT:
      equivalence = stats.equivalence_test(e.gelu, e.baseline, h.margin)
      tests.append((comparison, equivalence, equivalence.p))
    else:
      tests.append((comparison, None, comparison.p))
  adjusted = stats.holm([p for *_, p in tests])
  # The strictest level a step of Holm's correction asks of a p-value.
  level = stats.ALPHA / max(1, len(hypotheses))
  verdicts = []
  for h, e, (comparison, equivalence, p), holm in zip(
    hypotheses, found, tests, adjusted, strict=True
  ):
    if comparison is None:
      verdicts.append(Verdict(h, PENDING, None, e, p, holm))
      continue
    needed = None
    if holm < stats.ALPHA and equivalence is not None:
      verdict = EQUIVALENT if equivalence.equivalent else REFUTED
    elif holm < stats.ALPHA:
      side = stats.direction(comparison.a, comparison.b)
      verdict = CONFIRMED if side == {LOWER: -1, HIGHER: 1}[h.direction] else REFUTED
    else:
      verdict = INCONCLUSIVE
      needed = stats.seeds_for_power(comparison.a, comparison.b, level=level, margin=h.margin)
    verdicts.append(Verdict(h, verdict, comparison, e.seeds, p, holm, equivalence, needed))
  return verdicts


def sign(value: float) -> int:
  """-1, 0 or +1 (0 for NaN)."""
  return 0 if not value or math.isnan(value) else int(math.copysign(1, value))
