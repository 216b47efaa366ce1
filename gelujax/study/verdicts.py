"""Verdicts on pre-registered hypotheses, and the comparisons behind every other statement.

A :class:`gelujax.paper.Hypothesis` is judged on the per-seed values of two runs, GELU's and a
baseline's (:class:`Evidence`), at each pair of their candidate learning rates (one pair, the
selected lrs, where the selection is decisive or the design has no candidates), with every
other hypothesis of its task's family:

- a directional claim (GELU below or above the baseline) by the exact two-sided rank-sum test
  (:func:`gelujax.study.stats.rank_test`): two-sided because a verdict can go either way, and a
  test on one side only could never find the paper wrong;
- an equivalence claim (within a margin) by :func:`gelujax.study.stats.equivalence_test`;
- the family's p-values adjusted by Holm's method over every candidate pair of every
  hypothesis, a pair still waiting for its seeds counting as p = 1, so that adding its seeds
  later can only lower the others' adjusted p;
- one outcome per candidate pair (:class:`Outcome`): *confirmed* (Holm p < alpha, in the
  paper's direction), *refuted* (Holm p < alpha, against it; for an equivalence claim: beyond
  the margin), *equivalent* (Holm p < alpha, within the margin), *inconclusive* (none of these:
  with the seeds a side that would decide the observed effect with 80% power, were it the true
  one), or *pending* (its evaluation seeds are not trained, or a run is missing);
- one verdict per hypothesis (:data:`VERDICTS`): its pairs' outcome where they all give the
  same one, *pending* while any pair is, else *depends on the learning rate*.

Every comparison, judged or exploratory, is a :class:`Comparison`: both medians, the
Hodges–Lehmann shift with its exact interval, and the two-sided p-value. Seeds are matched
across runs (one seed, one initial draw, one batch order, one dropout stream), so each judged
pair also carries its :class:`PairedComparison` on the seeds both runs trained: exploratory,
beside the pre-registered unpaired test.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from gelujax.paper import EQUIVALENT, Hypothesis
from gelujax.study import judge as judge_rule
from gelujax.study import power, stats
from gelujax.study.judge import CONFIRMED, INCONCLUSIVE, PENDING, REFUTED

DEPENDS = "depends on the learning rate"
VERDICTS = (CONFIRMED, REFUTED, EQUIVALENT, INCONCLUSIVE, DEPENDS, PENDING)


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
class PairedComparison:
  """Run ``a``'s values against run ``b``'s, seed by seed, on the seeds both have.

  Attributes:
    seeds: the paired seeds, in order.
    differences: a's value minus b's, per seed.
    shift: the paired Hodges–Lehmann shift, the median of the differences' Walsh averages.
    low, high: its exact interval (:func:`gelujax.study.stats.paired_interval`).
    confidence: the interval's achieved level (1 where too few pairs give none).
    p: the exact two-sided signed-rank p-value (zero differences dropped).
    zeros: differences that are exactly 0.
    correlation: Pearson's correlation of the pairs' two values (NaN with fewer than 3 pairs or
      a constant side): how much the pairing shares between the runs.
  """

  seeds: tuple[int, ...]
  differences: tuple[float, ...]
  shift: float
  low: float
  high: float
  confidence: float
  p: float
  zeros: int
  correlation: float

  @classmethod
  def of(cls, a: Mapping[int, float], b: Mapping[int, float]) -> PairedComparison | None:
    """The pairs of ``a`` and ``b`` (seed -> value), in ``a``'s seed order; None without any."""
    seeds = tuple(seed for seed in a if seed in b)
    if not seeds:
      return None
    x = np.array([a[s] for s in seeds], np.float64)
    y = np.array([b[s] for s in seeds], np.float64)
    d = x - y
    low, high, confidence = stats.paired_interval(d)
    correlation = math.nan
    if len(seeds) >= 3 and x.std() > 0 and y.std() > 0:
      correlation = float(np.corrcoef(x, y)[0, 1])
    return cls(
      tuple(int(s) for s in seeds),
      tuple(map(float, d)),
      stats.walsh_median(d),
      low,
      high,
      confidence,
      stats.signed_rank_test(d),
      int((d == 0).sum()),
      correlation,
    )

  def to_json(self) -> dict[str, Any]:
    return {
      **dataclasses.asdict(self),
      "seeds": list(self.seeds),
      "differences": list(self.differences),
    }


@dataclasses.dataclass(frozen=True)
class Evidence:
  """What a hypothesis is tested on at one pair of learning rates: GELU's and the baseline's
  per-seed values, and where they come from (``seeds``, e.g. ``"evaluation seeds 100–109 at
  the selected lr"``).

  Attributes:
    gelu, baseline: the values, in seed order.
    seeds: their source, in words.
    learning_rates: GELU's lr and the baseline's (None: not known, e.g. in a test).
    gelu_seeds, baseline_seeds: the seed of each value (empty: not known; no pairs then).
    caveats: ``(kind, fact)`` pairs that the verdict's words must carry (see
      :mod:`gelujax.study.analysis`): the tested metric still falling at the last epoch, a run
      that does not learn, fewer epochs than the paper trained.
  """

  gelu: tuple[float, ...]
  baseline: tuple[float, ...]
  seeds: str
  learning_rates: tuple[float | None, float | None] = (None, None)
  gelu_seeds: tuple[int, ...] = ()
  baseline_seeds: tuple[int, ...] = ()
  caveats: tuple[tuple[str, Any], ...] = ()

  def paired(self) -> PairedComparison | None:
    """The paired comparison on the seeds both sides have (None where seeds are not known)."""
    if len(self.gelu_seeds) != len(self.gelu) or len(self.baseline_seeds) != len(self.baseline):
      return None
    return PairedComparison.of(
      dict(zip(self.gelu_seeds, self.gelu, strict=True)),
      dict(zip(self.baseline_seeds, self.baseline, strict=True)),
    )


@dataclasses.dataclass(frozen=True)
class Candidate:
  """One pair of candidate learning rates of a hypothesis (GELU's, the baseline's) and what it
  is tested on there, or why it cannot be yet (``"pending: ..."``)."""

  learning_rates: tuple[float | None, float | None]
  evidence: Evidence | str


@dataclasses.dataclass(frozen=True)
class Outcome:
  """The test of one hypothesis at one pair of candidate learning rates.

  Attributes:
    learning_rates: GELU's lr and the baseline's.
    verdict: one of :data:`VERDICTS` but ``DEPENDS``.
    comparison: GELU against the baseline; None when pending.
    seeds: where the values come from (:attr:`Evidence.seeds`), or why it is pending.
    p: the pair's p-value: the two-sided rank-sum p, or an equivalence claim's
      :attr:`gelujax.study.stats.Equivalence.p`; 1 when pending.
    holm: ``p`` adjusted by Holm's method over every pair of every hypothesis of the family.
    equivalence: an equivalence claim's tests; else None.
    seeds_needed: for an inconclusive outcome, the seeds a side that would decide the observed
      effect with 80% power (None: no number would, or more than ``stats.MAX_SEEDS``).
    paired: the paired comparison on the seeds both runs have (exploratory); None without pairs.
    caveats: :attr:`Evidence.caveats`.
  """

  learning_rates: tuple[float | None, float | None]
  verdict: str
  comparison: Comparison | None
  seeds: str
  p: float
  holm: float
  equivalence: stats.Equivalence | None = None
  seeds_needed: int | None = None
  paired: PairedComparison | None = None
  caveats: tuple[tuple[str, Any], ...] = ()

  def to_json(self) -> dict[str, Any]:
    return {
      "learning_rates": list(self.learning_rates),
      "verdict": self.verdict,
      "comparison": self.comparison.to_json() if self.comparison else None,
      "seeds": self.seeds,
      "p": self.p,
      "holm": self.holm,
      "equivalence": dataclasses.asdict(self.equivalence) if self.equivalence else None,
      "seeds_needed": self.seeds_needed,
      "paired": self.paired.to_json() if self.paired else None,
      "caveats": [{"kind": kind, **fact} for kind, fact in self.caveats],
    }


@dataclasses.dataclass(frozen=True)
class Verdict:
  """The judgement of one hypothesis within its family.

  Attributes:
    hypothesis: what was claimed.
    verdict: one of :data:`VERDICTS`: the outcome of every candidate pair where they agree,
      ``PENDING`` while one is pending, else ``DEPENDS``.
    outcomes: one per candidate pair, the selected lrs' first.
    reason: why the hypothesis has no outcome (``"not run: ..."``); else empty.

  A hypothesis with one candidate pair reads like its outcome: :attr:`comparison`,
  :attr:`seeds`, :attr:`p`, :attr:`holm`, :attr:`equivalence`, :attr:`seeds_needed` are that
  pair's (with several pairs: None, the verdict's words, NaN).
  """

  hypothesis: Hypothesis
  verdict: str
  outcomes: tuple[Outcome, ...]
  reason: str = ""

  @property
  def single(self) -> Outcome | None:
    """The one outcome of a hypothesis with one candidate pair; else None."""
    return self.outcomes[0] if len(self.outcomes) == 1 else None

  @property
  def comparison(self) -> Comparison | None:
    return self.single.comparison if self.single else None

  @property
  def seeds(self) -> str:
    return self.single.seeds if self.single else self.reason

  @property
  def p(self) -> float:
    if self.single:
      return self.single.p
    return 1.0 if not self.outcomes else math.nan

  @property
  def holm(self) -> float:
    if self.single:
      return self.single.holm
    return 1.0 if not self.outcomes else math.nan

  @property
  def equivalence(self) -> stats.Equivalence | None:
    return self.single.equivalence if self.single else None

  @property
  def seeds_needed(self) -> int | None:
    return self.single.seeds_needed if self.single else None

  def pending(self) -> list[Outcome]:
    """The outcomes still waiting for their seeds."""
    return [o for o in self.outcomes if o.verdict == PENDING]

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
      "outcomes": [o.to_json() for o in self.outcomes],
    }


def _candidates(found: Evidence | str | Sequence[Candidate]) -> list[Candidate] | str:
  """The candidate pairs of what ``evidence`` returned: one pair for a bare Evidence or a
  pending reason; the reason itself where no pair exists (``"not run: ..."``)."""
  if isinstance(found, Evidence):
    return [Candidate(found.learning_rates, found)]
  if isinstance(found, str):
    return found if found.startswith("not run") else [Candidate((None, None), found)]
  return list(found)


def judge(
  hypotheses: Sequence[Hypothesis],
  evidence: Callable[[Hypothesis], Evidence | str | Sequence[Candidate]],
) -> list[Verdict]:
  """The verdicts of one family of hypotheses, in their order.

  Args:
    hypotheses: the family (e.g. a task's primary hypotheses).
    evidence: a hypothesis' values at each candidate pair of lrs (a :class:`Candidate` list),
      or, for one pair, its :class:`Evidence` or the reason it cannot be tested yet (e.g.
      ``"pending: evaluation seeds not trained"``; ``"not run: ..."``: the hypothesis has no
      pair at all).
  """
  found = [_candidates(evidence(h)) for h in hypotheses]
  # Every test of the family: (hypothesis index, candidate or None, comparison, equivalence, p).
  tests: list[tuple[int, Candidate | None, Comparison | None, stats.Equivalence | None, float]]
  tests = []
  for i, (h, pairs) in enumerate(zip(hypotheses, found, strict=True)):
    if isinstance(pairs, str):
      tests.append((i, None, None, None, 1.0))
      continue
    for candidate in pairs:
      e = candidate.evidence
      if isinstance(e, str):
        tests.append((i, candidate, None, None, 1.0))
        continue
      comparison = Comparison.of(e.gelu, e.baseline)
      if h.direction == EQUIVALENT:
        equivalence = stats.equivalence_test(e.gelu, e.baseline, h.margin)
        tests.append((i, candidate, comparison, equivalence, equivalence.p))
      else:
        tests.append((i, candidate, comparison, None, comparison.p))
  family = []
  for i, _, comparison, equivalence, p in tests:
    claim = hypotheses[i].direction
    if comparison is None:
      family.append(judge_rule.Test(p, claim, pending=True))
    elif equivalence is not None:
      family.append(judge_rule.Test(p, claim, within=equivalence.equivalent))
    else:
      family.append(judge_rule.Test(p, claim, side=stats.direction(comparison.a, comparison.b)))
  decisions = judge_rule.decide(family, stats.ALPHA)
  # The strictest level a step of Holm's correction asks of a p-value.
  level = stats.ALPHA / max(1, len(tests))
  outcomes: list[list[Outcome]] = [[] for _ in hypotheses]
  for (i, candidate, comparison, equivalence, p), decision in zip(tests, decisions, strict=True):
    h, holm, verdict = hypotheses[i], decision.holm, decision.verdict
    if candidate is None:
      continue
    e = candidate.evidence
    if comparison is None:
      outcomes[i].append(Outcome(candidate.learning_rates, PENDING, None, e, p, holm))
      continue
    needed = None
    if verdict == INCONCLUSIVE:
      needed = power.seeds_for_power(comparison.a, comparison.b, level=level, margin=h.margin)
    outcomes[i].append(
      Outcome(candidate.learning_rates, verdict, comparison, e.seeds, p, holm, equivalence,
              needed, e.paired(), e.caveats)
    )  # fmt: skip
  verdicts = []
  for h, pairs, judged in zip(hypotheses, found, outcomes, strict=True):
    if isinstance(pairs, str):
      verdicts.append(Verdict(h, PENDING, (), pairs))
      continue
    words = {o.verdict for o in judged}
    if PENDING in words:
      verdict = PENDING
    elif len(words) == 1:
      (verdict,) = words
    else:
      verdict = DEPENDS
    verdicts.append(Verdict(h, verdict, tuple(judged)))
  return verdicts


def sign(value: float) -> int:
  """-1, 0 or +1 (0 for NaN)."""
  return 0 if not value or math.isnan(value) else int(math.copysign(1, value))
