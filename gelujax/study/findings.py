"""The words of a result: one fixed rule per kind of statement, from the statistics alone.

Every sentence of a results README that judges a hypothesis, describes an effect or says what a
curve shows is written here from :class:`gelujax.study.analysis.Analysis`, each kind by one
rule, as a line ``- <Kind> [<where>]: ...``:

- ``Hypothesis``: a verdict (:data:`gelujax.study.verdicts.VERDICTS`), with its shift,
  interval, p and Holm p; an inconclusive one with the seeds a side that would decide it.
- ``Paper values``: a claim whose values, as read off the paper's figure, are ordered against
  the claim's own direction.
- ``Does not learn``, ``Still improving``, ``Final value on a spike``, ``Unstable``: what the
  curves show, by the rules of :mod:`gelujax.study.curves`.
- ``Selection``: each run's selected lr against the runner-up (exploratory).
- ``Sensitivity``: each selected-lr hypothesis on the selection seeds at each lr both runs
  trained, and whether its shift has the sign of the selected-lr result (exploratory).

Exploratory lines state effects (shift, interval, uncorrected p), never significance. Typed
prose around the findings may explain and interpret them; it never states a ranking or a
significance (tests/test_results.py re-derives every line of the committed results).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from gelujax.paper import FIGURES, LOWER, Hypothesis
from gelujax.study import curves, stats
from gelujax.study.analysis import Analysis, Sensitivity
from gelujax.study.verdicts import INCONCLUSIVE, PENDING, Comparison, Verdict


def method(task: str, analysis: Analysis) -> str:
  """The README's paragraph on how the verdicts are reached."""
  design = analysis.design
  if design.select_lr:
    seeds = (
      "Each run's learning rate is selected on its selection seeds (the grid's); the "
      "hypotheses are tested on fresh evaluation seeds trained at that lr only "
      "(`runs/<run>_eval/`), so the selection cannot favour the seeds that judge it."
    )
  elif design.evaluation_seeds:
    seeds = (
      "No learning rate is selected: each lr is a hypothesis of its own, tested on the grid's "
      "seeds together with the evaluation seeds trained at every lr (`runs/<run>_eval/`)."
    )
  else:
    seeds = "No learning rate is selected: the hypotheses are tested on the grid's seeds."
  return (
    f"{seeds} A hypothesis compares the per-seed values of GELU's run (the paper's "
    "`gelu_tanh`) and a baseline's by the exact Wilcoxon–Mann–Whitney rank-sum test "
    "(mid-ranks for ties), two-sided: a verdict may go either way, and a test of the paper's "
    "direction alone could never find it wrong. An equivalence claim is tested by two "
    "one-sided rank tests of the shift against ±its margin (TOST) and by the test that the "
    "shift lies beyond the margin; its p is twice the smaller. The p-values of each family "
    "(primary: the paper's claims; secondary: its own) are adjusted by Holm's method within "
    f"the family, a pending hypothesis counting as p = 1. Verdicts, at Holm p < {stats.ALPHA:g}: "
    "*confirmed* (in the paper's direction), *refuted* (against it, or beyond the margin), "
    "*equivalent* (within the margin); otherwise *inconclusive*, with the seeds a side that "
    f"would decide the observed effect with {stats.POWER:.0%} power (a normal approximation "
    "to the Hodges–Lehmann shift: the observed shift taken as the true one, its standard error "
    "s·sqrt(π/3 · 2/n) with n seeds a side and s the pooled standard deviation, at "
    f"{stats.ALPHA:g} over the family's size, the strictest step of Holm's correction). "
    "Every comparison gives the Hodges–Lehmann shift (the median of all differences, GELU "
    "minus baseline, or run minus baseline) with its exact distribution-free interval (at "
    f"least {stats.CONFIDENCE:.0%}; {interval_levels(analysis)}) beside the p. Everything else "
    "is exploratory: effects with intervals and uncorrected p, no verdicts."
  )


def interval_levels(analysis: Analysis) -> str:
  """``"96.8% with 5 seeds a side, 95.7% with 10"``: the achieved level of the intervals of
  the result's comparisons, by their sizes."""
  comparisons = [v.comparison for v in (*analysis.primary, *analysis.secondary)]
  comparisons += [e.comparison for e in analysis.exploratory]
  comparisons += [s["comparison"] for s in analysis.selections]
  sizes = sorted({(len(c.a), len(c.b)) for c in comparisons if c is not None})
  if not sizes:
    return "no comparison here"
  words = []
  for m, n in sizes:
    level = stats.shift_interval(range(m), range(m, m + n))[2]
    side = f"{m} seeds a side" if m == n else f"{m} vs {n} seeds"
    words.append(f"{level:.1%} with {side}" if level < 1 else f"none with {side}")
  return ", ".join(words)


def seeds_needed_words(verdict: Verdict) -> str:
  """``"23 seeds a side for 80% power at the observed effect"``, or why there is no such
  number."""
  n, c, margin = verdict.seeds_needed, verdict.comparison, verdict.hypothesis.margin
  if n is not None:
    return f"{n} seeds a side for {stats.POWER:.0%} power at the observed effect"
  if len(c.a) + len(c.b) < 3:
    return "too few seeds to estimate the seeds a side 80% power would need"
  if abs(c.shift) == (margin or 0.0):
    where = "at the margin" if margin else "of 0"
    return f"no number of seeds decides the observed shift {where}"
  return (
    f"more than {stats.MAX_SEEDS} seeds a side for {stats.POWER:.0%} power at the observed effect"
  )


def verdict_words(verdict: Verdict) -> str:
  """``"confirmed"``, ``"inconclusive: 23 seeds a side for 80% power at the observed
  effect"``, ``"pending: evaluation seeds not trained"``."""
  if verdict.verdict == PENDING:
    return verdict.seeds
  if verdict.verdict == INCONCLUSIVE:
    return f"{INCONCLUSIVE}: {seeds_needed_words(verdict)}"
  return verdict.verdict


def format_number(value: float | None, scale: float = 1.0, digits: int = 4) -> str:
  """A table cell: ``value * scale`` to ``digits`` significant digits; NaN/None -> ``"–"``;
  infinities as ``"-inf"``, ``"inf"``."""
  if value is None or math.isnan(value):
    return "–"
  if math.isinf(value):
    return "inf" if value > 0 else "-inf"
  return f"{value * scale:.{digits}g}"


def format_shift(comparison: Comparison, scale: float = 1.0) -> str:
  """``"-0.0271 [-0.0312, -0.0229]"``: the Hodges–Lehmann shift and its exact interval."""
  shift, low, high = (
    format_number(v, scale, 3) for v in (comparison.shift, comparison.low, comparison.high)
  )
  return f"{shift} [{low}, {high}]"


def number(value: float, scale: float = 1.0, digits: int = 4) -> str:
  return format_number(value, scale, digits)


def effect(comparison: Comparison, scale: float = 1.0, p: float | None = None) -> str:
  """``"shift -0.0271 [-0.0312, -0.0229], p = 0.0079"``: with ``p``, that p (a verdict's),
  else the comparison's rank-sum p."""
  p = comparison.p if p is None else p
  return f"shift {format_shift(comparison, scale)}, p = {p:.2g}"


def hypothesis_line(task: str, index: int, verdict: Verdict) -> str:
  """``- Hypothesis [Fig. 2, 1]: gelu_tanh below relu: ...: confirmed (gelu_tanh 0.08 vs relu
  0.11; shift ..., p = ..., Holm ...).``, with the verdict's own p (an equivalence claim's TOST
  or beyond-the-margin p, not the rank-sum p of the shift), the p its table row shows."""
  h, c = verdict.hypothesis, verdict.comparison
  head = f"- Hypothesis [{FIGURES.get(task, task)}, {h.family} {index}]: {h.describe()}"
  if c is None:
    return f"{head}: {verdict_words(verdict)}."
  return (
    f"{head}: {verdict_words(verdict)} ({h.gelu} {number(c.median_a, h.scale)} vs "
    f"{h.baseline} {number(c.median_b, h.scale)}, {verdict.seeds}; "
    f"{effect(c, h.scale, verdict.p)}, Holm {verdict.holm:.2g})."
  )


def contradiction_line(task: str, h: Hypothesis) -> str:
  gelu, baseline = (number(v, h.scale) for v in h.paper)
  side = "above" if h.direction == LOWER else "below"
  return (
    f"- Paper values [{FIGURES.get(task, task)}, {h.describe()}]: the paper's text claims "
    f"{h.claim()}, but its values, {h.gelu} {gelu} vs {h.baseline} {baseline}, put {h.gelu} "
    f"{side} {h.baseline}: the values quoted contradict the claim's direction; the hypothesis "
    "tests the text's claim."
  )


def curve_line(run: str, learning_rate: float | None, kind: str, fact: Mapping[str, Any]) -> str:
  """One fact of :mod:`gelujax.study.curves` in words."""
  where = f"{run}, lr {learning_rate:g}" if learning_rate is not None else run
  if kind == "not_learning":
    return (
      f"- Does not learn [{where}]: median test error at the best epoch "
      f"{number(fact['median'], 100)}% (seeds {number(fact['low'], 100)}–"
      f"{number(fact['high'], 100)}%), above {curves.NOT_LEARNING_SHARE:.0%} of the chance "
      f"error ({number(fact['chance'], 100)}% for {fact['classes']} classes); final training loss "
      f"{number(fact['train_low'])}–{number(fact['train_high'])}."
    )
  if kind == "improving":
    return (
      f"- Still improving [{where}]: the median best epoch is {fact['median']:g} of "
      f"{fact['epoch']:g}, after {curves.IMPROVING_AFTER:.0%} of training; {fact['at_last']} of "
      f"{fact['members']} members have their best selection metric at the last evaluation: "
      "training stopped while the run still improved."
    )
  if kind == "spike":
    return (
      f"- Final value on a spike [{where}, seed {fact['seed']}]: its training loss at the last "
      f"evaluation (epoch {fact['epoch']:g}), {number(fact['value'])}, is {fact['ratio']:.3g}x "
      f"its running minimum {number(fact['running_min'])}: every final value of this member "
      "was taken on that spike."
    )
  if kind == "jump":
    return (
      f"- Unstable [{run}, lr {fact['learning_rate']:g}, seed {fact['seed']}]: training loss "
      f"{number(fact['value'])} at epoch {fact['epoch']:g}, {fact['ratio']:.3g}x its running "
      f"minimum {number(fact['running_min'])}."
    )
  raise ValueError(f"No wording rule for a curve fact of kind {kind!r}.")


def curve_lines(analysis: Analysis) -> list[str]:
  lines = [curve_line(*fact) for fact in analysis.curves if fact[2] != "jump"]
  jumps = [curve_line(*fact) for fact in analysis.curves if fact[2] == "jump"]
  if not jumps:
    jumps = [
      f"- Unstable: none; no member's training loss exceeds {curves.JUMP_RATIO:g}x its running "
      "minimum."
    ]
  return lines + jumps


def selection_lines(analysis: Analysis) -> list[str]:
  lines = []
  for s in analysis.selections:
    head = f"- Selection [{s['run']}]"
    c = s["comparison"]
    if s["selected"] is None:
      lines.append(f"{head}: none, every member diverged.")
    elif c is None:
      only = "the grid's only lr" if s["lrs"] == 1 else "the only lr with a member not diverged"
      lines.append(f"{head}: lr {s['selected']:g}, {only}.")
    else:
      lines.append(
        f"{head}: lr {s['selected']:g} over lr {s['runner_up']:g}, median best {s['metric']} "
        f"{number(c.median_a)} vs {number(c.median_b)}; {effect(c)}."
      )
  return lines


def sensitivity_line(index: int, s: Sensitivity) -> str:
  h = s.hypothesis
  head = f"- Sensitivity [{h.family} {index}: {h.describe()}]"
  if s.reference is None:
    return f"{head}: no comparison at the selected lrs to set the fixed lrs against."
  reference, source = s.reference
  lr_gelu, lr_base = (f"{lr:g}" if lr is not None else "–" for lr in s.selected_lrs)
  parts = [
    f"at the selected lrs ({h.gelu} {lr_gelu}, {h.baseline} {lr_base}), {source}: "
    f"{effect(reference, h.scale)}"
  ]
  for lr, c in s.at_lr.items():
    if c is None:
      parts.append(f"at lr {lr:g}: not evaluated for both runs")
      continue
    agrees = s.agrees(lr)
    word = {True: "agrees", False: "disagrees", None: "no sign to compare"}[agrees]
    parts.append(f"at lr {lr:g}, selection seeds: {effect(c, h.scale)}: {word}")
  return f"{head}: " + "; ".join(parts) + "."


def write_findings(analysis: Analysis) -> dict[str, list[str]]:
  """The findings of a result, by section: each a list of ``- <Kind> ...`` lines."""
  task = analysis.task
  numbered = {id(v): i for family in (analysis.primary, analysis.secondary) for i, v in
              enumerate(family, 1)}  # fmt: skip
  sections = {
    "Verdicts": [
      hypothesis_line(task, numbered[id(v)], v) for v in (*analysis.primary, *analysis.secondary)
    ],
    "Paper values against their claim": [
      contradiction_line(task, h) for h in analysis.contradictions
    ],
    "What the curves show": curve_lines(analysis),
    "Learning-rate selection (exploratory)": selection_lines(analysis),
    "Fixed-lr sensitivity (exploratory)": [
      sensitivity_line(numbered[id(v)], s)
      for s in analysis.sensitivity
      for v in (*analysis.primary, *analysis.secondary)
      if v.hypothesis is s.hypothesis
    ],
  }
  return {name: lines for name, lines in sections.items() if lines}


def overview_findings(findings: Mapping[str, Sequence[str]]) -> list[str]:
  """The findings the top-level README repeats: every verdict, then the paper values that
  contradict their claim, the runs that do not learn and the final values taken on a spike."""
  keep = ("- Hypothesis [", "- Paper values [", "- Does not learn [", "- Final value on a spike [")
  return [line for lines in findings.values() for line in lines if line.startswith(keep)]
