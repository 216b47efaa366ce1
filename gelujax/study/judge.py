"""The one rule by which every study turns a family of tests into verdicts.

Each study gathers its own evidence (unpaired seeds at candidate lrs, paired seeds, counts of
whole examples) and computes one p per test with its exact test; the decision is this module's,
the same for all:

1. Holm's step-down correction over the family (`gelujax.study.stats.holm`), a test that cannot
   be run yet (pending, or no evidence) counting as p = 1.
2. A test is decided where its Holm-adjusted p is **below** the level (an exact p is a count
   over a power of two or a binomial coefficient, never exactly a level such as 0.05).
3. The words of a decided test follow from what was claimed (:data:`CLAIMS`) and what the test
   found: a directional claim is *confirmed* where the statistic lies on the claimed side of
   zero and *refuted* where on the other; a claim of equivalence is *equivalent* where the
   decision is that the shift lies within the margin and *refuted* where beyond it; a question
   with no claim (two forms, within a margin or not) is *equivalent* or *different*. A test not
   decided is *inconclusive*, one that could not be run *pending*.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from gelujax.study import stats

CONFIRMED, REFUTED, EQUIVALENT = "confirmed", "refuted", "equivalent"
DIFFERENT, INCONCLUSIVE, PENDING = "different", "inconclusive", "pending"
# What a test may claim: a direction of the shift (first minus second below or above zero),
# equivalence within a margin, or nothing (the margin decides between equivalent and different).
LOWER, HIGHER, WITHIN, EITHER = "lower", "higher", "equivalent", "either"
CLAIMS = (LOWER, HIGHER, WITHIN, EITHER)


@dataclasses.dataclass(frozen=True)
class Test:
  """One test of a family, before the correction.

  Attributes:
    p: its exact p (for a margin: twice the smaller of the TOST's and the beyond-the-margin
      test's, `gelujax.study.stats.Equivalence.p`, so either decision is made at one test's
      level); ignored where :attr:`pending`.
    claim: one of :data:`CLAIMS`.
    side: where the statistic lies: -1 below zero (first lower), +1 above, 0 on it; for a
      directional claim.
    within: for a margin: whether the decision its p stands for is "within the margin".
    pending: the test cannot be run yet (a run not finished, no pairs).
  """

  p: float
  claim: str
  side: int = 0
  within: bool = False
  pending: bool = False

  def __post_init__(self):
    if self.claim not in CLAIMS:
      raise ValueError(f"A test's claim is one of {', '.join(CLAIMS)}; got {self.claim!r}.")


@dataclasses.dataclass(frozen=True)
class Decision:
  """A test's Holm-adjusted p and its verdict word."""

  holm: float
  verdict: str

  @property
  def decided(self) -> bool:
    return self.verdict not in (INCONCLUSIVE, PENDING)


def decide(family: Sequence[Test], alpha: float = stats.ALPHA) -> list[Decision]:
  """The decisions of one family at level ``alpha``, in its order (the module's rule)."""
  adjusted = stats.holm([1.0 if t.pending else t.p for t in family])
  decisions = []
  for t, holm in zip(family, adjusted, strict=True):
    if t.pending:
      verdict = PENDING
    elif not holm < alpha:
      verdict = INCONCLUSIVE
    elif t.claim == WITHIN:
      verdict = EQUIVALENT if t.within else REFUTED
    elif t.claim == EITHER:
      verdict = EQUIVALENT if t.within else DIFFERENT
    else:
      verdict = CONFIRMED if t.side == (-1 if t.claim == LOWER else 1) else REFUTED
    decisions.append(Decision(holm, verdict))
  return decisions
