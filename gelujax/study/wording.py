"""The words of a verdict, of one pair's outcome and of a shift, one fixed rule each.

The findings (:mod:`gelujax.study.findings`) and the tables (:mod:`gelujax.study.tables`)
say a verdict in these words alone (`verdict_words`): ``confirmed``, ``refuted``,
``equivalent``; ``inconclusive`` with the way it leans (`lean_words`) and the seeds a side that
would decide it were the observed effect the true one (`seeds_needed_words`); ``pending`` with
the candidate lrs still to train and the command that trains them (`pending_words`); ``depends
on the learning rate`` with each pair's outcome (`outcome_words`); and its caveats
(`caveat_words`). A number is printed by :func:`gelujax.study.numbers.number`, a shift with
its interval by `format_shift` and with its p by `effect`.
"""

from __future__ import annotations

from gelujax.paper import EQUIVALENT, LOWER, Hypothesis
from gelujax.study import curves, numbers, stats
from gelujax.study.analysis import Analysis
from gelujax.study.numbers import number
from gelujax.study.verdicts import (
  DEPENDS,
  INCONCLUSIVE,
  PENDING,
  Comparison,
  Outcome,
  PairedComparison,
  Verdict,
)


def format_shift(comparison: Comparison | PairedComparison, scale: float = 1.0) -> str:
  """``"-0.0271 [-0.0312, -0.0229]"``: the Hodges–Lehmann shift (or the paired one) and its
  exact interval."""
  c = comparison
  return numbers.interval(c.shift, c.low, c.high, scale=scale, sign=False)


def effect(comparison: Comparison, scale: float = 1.0, p: float | None = None) -> str:
  """``"shift -0.0271 [-0.0312, -0.0229], p = 0.0079"``: with ``p``, that p (a verdict's),
  else the comparison's rank-sum p."""
  p = comparison.p if p is None else p
  return f"shift {format_shift(comparison, scale)}, p = {p:.2g}"


def verdict_effect(comparison: Comparison, h: Hypothesis) -> str:
  """:func:`effect` with the p a verdict on ``h`` would rest on: for an equivalence claim, its
  equivalence p (:func:`gelujax.study.stats.equivalence_test`: twice the smaller of the TOST
  and beyond-the-margin p), the rank-sum p of a zero shift beside it, labelled as such; for a
  claim of a direction, the rank-sum p itself."""
  if h.direction != EQUIVALENT:
    return effect(comparison, h.scale)
  found = stats.equivalence_test(comparison.a, comparison.b, h.margin)
  return (
    f"shift {format_shift(comparison, h.scale)}, equivalence p = {found.p:.2g} (within or "
    f"beyond ±{number(h.margin, h.scale)}), rank-sum p of a zero shift = "
    f"{comparison.p:.2g}"
  )


def seeds_needed_words(outcome: Outcome | Verdict, h: Hypothesis | None = None) -> str:
  """``"23 seeds a side for 80% power if the observed effect were the true one"``, or why
  there is no such number."""
  h = h or outcome.hypothesis
  n, c, margin = outcome.seeds_needed, outcome.comparison, h.margin
  if n is not None:
    return f"{n} seeds a side for {stats.POWER:.0%} power if the observed effect were the true one"
  if len(c.a) + len(c.b) < 3:
    return "too few seeds to estimate the seeds a side 80% power would need"
  if abs(c.shift) == (margin or 0.0):
    where = "at the margin" if margin else "of 0"
    return f"no number of seeds decides the observed shift {where}"
  return (
    f"more than {stats.MAX_SEEDS} seeds a side for {stats.POWER:.0%} power if the observed "
    "effect were the true one"
  )


def lean_words(outcome: Outcome | Verdict, h: Hypothesis | None = None) -> str:
  """Which way an inconclusive comparison leans: ``"leaning towards the claim"``, ``"leaning
  against the claim"`` (the side of 0 its shift lies on; for an equivalence claim, of the
  margin), or ``"leaning neither way"`` (a shift of exactly 0, or exactly the margin)."""
  h = h or outcome.hypothesis
  shift = outcome.comparison.shift
  if h.direction == EQUIVALENT:
    if abs(shift) == h.margin:
      return "leaning neither way"
    return "leaning towards the claim" if abs(shift) < h.margin else "leaning against the claim"
  if shift == 0.0:
    return "leaning neither way"
  towards = (shift < 0) == (h.direction == LOWER)
  return "leaning towards the claim" if towards else "leaning against the claim"


def outcome_words(outcome: Outcome, h: Hypothesis) -> str:
  """One pair's outcome: ``"confirmed"``, ``"inconclusive, leaning towards the claim: 23 seeds
  a side ..."``, or its pending reason."""
  if outcome.verdict == PENDING:
    return outcome.seeds
  if outcome.verdict == INCONCLUSIVE:
    return f"{INCONCLUSIVE}, {lean_words(outcome, h)}: {seeds_needed_words(outcome, h)}"
  return outcome.verdict


def lr_pair(h: Hypothesis, learning_rates: tuple[float | None, float | None]) -> str:
  """``"gelu_tanh lr 0.0001 vs relu lr 0.001"``."""
  a, b = ("–" if lr is None else f"{lr:g}" for lr in learning_rates)
  return f"{h.gelu} lr {a} vs {h.baseline} lr {b}"


def pending_words(verdict: Verdict, analysis: Analysis | None) -> str:
  """A pending verdict: the candidate lrs whose evaluation seeds are not trained and the
  command that trains them; else the first pending pair's reason."""
  missing = (analysis.untrained.get(verdict.hypothesis) if analysis else None) or []
  if not missing:
    pending = verdict.pending()
    return pending[0].seeds if pending else verdict.seeds
  lrs = ", ".join(f"{lr:g} of {run}" for run, lr, _ in missing)
  seeds = numbers.seeds(analysis.evaluation_seeds) if analysis.evaluation_seeds else ""
  names = ", ".join(name for *_, name in missing)
  command = f"`{analysis.command}` trains them" if analysis.command else "not trained yet"
  return (
    f"{PENDING}: candidate lr{'s' if len(missing) > 1 else ''} {lrs} "
    f"need{'' if len(missing) > 1 else 's'} evaluation seeds {seeds} ({names}; {command})"
  )


def verdict_words(verdict: Verdict, analysis: Analysis | None = None) -> str:
  """``"confirmed"``, ``"inconclusive, leaning towards the claim: 23 seeds a side for 80% power
  if the observed effect were the true one"``, ``"pending: ..."``, ``"depends on the learning
  rate: refuted at ...; confirmed at ..."``, ``"refuted at every pair of candidate lrs (4)"``."""
  h = verdict.hypothesis
  if verdict.verdict == PENDING:
    return pending_words(verdict, analysis)
  if verdict.single is not None:
    return outcome_words(verdict.single, h)
  if verdict.verdict == DEPENDS:
    groups: dict[str, list[str]] = {}
    for o in verdict.outcomes:
      groups.setdefault(o.verdict, []).append(lr_pair(h, o.learning_rates))
    parts = [f"{word} at {', '.join(pairs)}" for word, pairs in groups.items()]
    return f"{DEPENDS}: " + "; ".join(parts)
  return f"{verdict.verdict} at every pair of candidate lrs ({len(verdict.outcomes)})"


def _share(low: float, high: float) -> str:
  """``"4.8%"``, or ``"4.8–8.8%"`` for a range."""
  if f"{low:.1%}" == f"{high:.1%}":
    return f"{low:.1%}"
  return f"{100 * low:.1f}–{100 * high:.1f}%"


def _caveat_phrase(kind: str, fact: dict, h: Hypothesis, where: str = "") -> str:
  """One caveat in words; ``where``: at which pairs of candidate lrs (a merged ``falling``)."""
  if kind == "falling":
    shares = ", ".join(
      f"{run} {_share(*share) if isinstance(share, tuple) else f'{share:.1%}'}"
      for run, share in ((h.gelu, fact["gelu"]), (h.baseline, fact["baseline"]))
      if share is not None
    )
    return (
      f"the tested metric, final {fact['metric']}, still falls at the last epoch{where} (median "
      f"fall over the last fifth of training, epochs {fact['start']:g}–{fact['epoch']:g}: "
      f"{shares})"
    )
  if kind == "not_learning":
    return (
      f"{fact['run']} does not learn at lr {fact['learning_rate']:g} (median test error "
      f"{number(fact['median'], 100)}%, above {curves.NOT_LEARNING_SHARE:.0%} of the chance "
      f"error {number(fact['chance'], 100)}%)"
    )
  if kind == "epochs":
    return f"judged at epoch {fact['epochs']} of the paper's {fact['paper']}"
  raise ValueError(f"No wording rule for a caveat of kind {kind!r}.")


def caveat_words(outcome: Outcome, h: Hypothesis) -> str:
  """``"caveats: the tested metric ... still falls at the last epoch (...); ..."``, or ``""``."""
  words = [_caveat_phrase(kind, fact, h) for kind, fact in outcome.caveats]
  return "caveats: " + "; ".join(words) if words else ""


def verdict_caveat_words(verdict: Verdict) -> str:
  """Every caveat of a hypothesis' verdict, for each line that states it: a verdict with one pair
  of lrs carries that pair's (:func:`caveat_words`); one tested at several pairs carries the
  caveats of all of them, merged: the tested metric still falling at every pair (or at k of n),
  each run's median fall as a range over the pairs; each run that does not learn, at each lr;
  fewer epochs than the paper's. ``""`` where there are none."""
  h = verdict.hypothesis
  if verdict.single is not None:
    return caveat_words(verdict.single, h)
  judged = [o for o in verdict.outcomes if o.comparison is not None]
  words = []
  falling = [fact for o in judged for kind, fact in o.caveats if kind == "falling"]
  if falling:
    ranges = {}
    for side in ("gelu", "baseline"):
      shares = [f[side] for f in falling if f[side] is not None]
      ranges[side] = (min(shares), max(shares)) if shares else None
    where = (
      " at every pair of candidate lrs"
      if len(falling) == len(verdict.outcomes)
      else f" at {len(falling)} of the {len(verdict.outcomes)} pairs of candidate lrs"
    )
    words.append(_caveat_phrase("falling", {**falling[0], **ranges}, h, where))
  for kind in ("not_learning", "epochs"):
    for o in judged:
      for found, fact in o.caveats:
        phrase = _caveat_phrase(found, fact, h) if found == kind else ""
        if phrase and phrase not in words:
          words.append(phrase)
  return "caveats: " + "; ".join(words) if words else ""


def outcome_tail(h: Hypothesis, outcome: Outcome) -> str:
  """`` (gelu_tanh 0.08 vs relu 0.11, <seeds>; shift ..., p = ..., Holm ...)`` and its caveats,
  or ``""`` for a pending pair."""
  c = outcome.comparison
  if c is None:
    return ""
  caveat = caveat_words(outcome, h)
  return (
    f" ({h.gelu} {number(c.median_a, h.scale)} vs {h.baseline} {number(c.median_b, h.scale)}, "
    f"{outcome.seeds}; {effect(c, h.scale, outcome.p)}, Holm {outcome.holm:.2g})"
    + (f"; {caveat}" if caveat else "")
  )


def pair_letter(index: int) -> str:
  return "abcdefghijklmnopqrstuvwxyz"[index]
