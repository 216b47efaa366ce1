"""How a result's verdicts are reached, in words: its README's method and design changes.

`method` is the paragraph that says how each hypothesis meets its data (the seeds, the lr
selection and its candidates, the tests, Holm's correction, the verdicts and their caveats),
with the achieved levels of the result's intervals (`interval_levels`, `paired_levels`);
`design_change_lines` states each dated change of ``gelujax.paper.DESIGN_CHANGES`` that applies
to the result.
"""

from __future__ import annotations

from gelujax.paper import BASELINES, CANDIDATE_ALPHA, DESIGN_CHANGES
from gelujax.study import best, curves, stats
from gelujax.study.analysis import Analysis


def method(task: str, analysis: Analysis) -> str:
  """The README's paragraph on how the verdicts are reached."""
  design = analysis.design
  if design.select_lr and design.candidates:
    seeds = (
      "Each run's learning rate is selected on its selection seeds (the grid's), and its "
      "candidate lrs are the selected one and every lr whose per-seed best selection metric "
      "the exact rank-sum test does not tell apart from the selected lr's (two-sided p >= "
      f"{CANDIDATE_ALPHA:g}; the design change below). Each candidate is trained on fresh "
      "evaluation seeds (`runs/<run>_eval/` at the selected lr, `runs/<run>_eval_lr<lr>/` at "
      "another candidate), so the selection cannot favour the seeds that judge it, and each "
      "hypothesis is tested at every pair of a candidate lr of GELU's run and one of the "
      "baseline's, each pair a test of its family. A verdict is stated only where every pair "
      "gives the same one; otherwise it *depends on the learning rate*, each pair's result "
      "shown; while a pair's seeds are not trained it is *pending*."
    )
  elif design.select_lr:
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
    f"{seeds} {best_epoch_words()} A hypothesis compares the per-seed values of GELU's run "
    "(the paper's `gelu_tanh`) and a baseline's by the exact Wilcoxon–Mann–Whitney rank-sum test "
    "(mid-ranks for ties), two-sided: a verdict may go either way, and a test of the paper's "
    "direction alone could never find it wrong. An equivalence claim is tested by two "
    "one-sided rank tests of the shift against ±its margin (TOST) and by the test that the "
    "shift lies beyond the margin; its p is twice the smaller. The p-values of each family "
    "(primary: the paper's claims; secondary: its own) are adjusted by Holm's method within "
    "the family (over every pair of lrs of every hypothesis), a pending one counting as "
    f"p = 1. Verdicts, at Holm p < {stats.ALPHA:g}: "
    "*confirmed* (in the paper's direction), *refuted* (against it, or beyond the margin), "
    "*equivalent* (within the margin); otherwise *inconclusive*, with the way it leans (the "
    "side of 0, or of the margin, its shift lies on) and the seeds a side that would decide "
    f"the observed effect with {stats.POWER:.0%} power if it were the true one (a normal "
    "approximation to the Hodges–Lehmann shift: its standard error s·sqrt(π/3 · 2/n) with n "
    "seeds a side and s the pooled standard deviation, at "
    f"{stats.ALPHA:g} over the family's size, the strictest step of Holm's correction). "
    "A verdict carries its caveats: the tested metric still falling at the last epoch (a "
    "value after the last epoch whose median fall over the last fifth of training is at least "
    f"{curves.FALLING_SHARE:.0%} in either run), a run that does not learn, fewer epochs than "
    "the paper trained. "
    "Every comparison gives the Hodges–Lehmann shift (the median of all differences, GELU "
    "minus baseline, or run minus baseline) with its exact distribution-free interval (at "
    f"least {stats.CONFIDENCE:.0%}; {interval_levels(analysis)}) beside the p. A seed fixes "
    "the initial draw, the batch order and the dropout stream whatever the activation, so the "
    "two runs' values of one seed are a pair: each judged pair of lrs is also compared seed by "
    "seed (exploratory, beside the pre-registered unpaired test): the exact Wilcoxon "
    "signed-rank test of the differences (zeros dropped, mid-ranks for ties) and the paired "
    "Hodges–Lehmann shift (the median of the differences' Walsh averages) with its exact "
    f"interval ({paired_levels(analysis)}). Every activation that is not a baseline "
    f"({', '.join(BASELINES)}) is compared with each baseline and each reference "
    f"({', '.join(analysis.references)}) trained beside it, both ways: unpaired and seed by "
    "seed. These and everything else are exploratory: effects with intervals and uncorrected "
    "p, no verdicts."
  )


def best_epoch_words() -> str:
  """The sentence that states a member's best epoch and its tie rule (`gelujax.study.best`)."""
  return (
    "A member's best epoch (the best-validation epoch of its best metrics) is the one with the "
    "lowest value of the task's selection metric; where epochs tie on it, "
    f"{best.TIE_WORDS[best.EARLIEST]} (the trainer's `best_epoch`, `gelujax.study.best`)."
  )


def design_change_lines(task: str, analysis: Analysis) -> list[str]:
  """The README's statement of each design change that applies to the result: its rule, its
  reason, the earlier design, and what it changed here."""
  lines = []
  for change in DESIGN_CHANGES:
    if task not in change.tasks or not analysis.design.select_lr:
      continue
    effect_here = (
      "Here some hypothesis has more than one pair of candidate lrs: the verdicts of the "
      "earlier design are kept below, as such."
      if analysis.changed()
      else "Here every run has one candidate lr: the verdicts are those of the earlier design."
    )
    lines += [
      f"## Design change of {change.date}: {change.title} (made after seeing data)",
      "",
      f"Rule: {change.rule}",
      "",
      f"Why: {change.reason}",
      "",
      f"Earlier design: {change.earlier} {effect_here}",
      "",
    ]
  return lines


def interval_levels(analysis: Analysis) -> str:
  """``"96.8% with 5 seeds a side, 95.7% with 10"``: the achieved level of the intervals of
  the result's comparisons, by their sizes."""
  verdicts = (*analysis.primary, *analysis.secondary)
  comparisons = [o.comparison for v in verdicts for o in v.outcomes]
  comparisons += [e.comparison for e in analysis.exploratory]
  comparisons += [s.comparison for s in analysis.selections]
  sizes = sorted({(len(c.a), len(c.b)) for c in comparisons if c is not None})
  if not sizes:
    return "no comparison here"
  words = []
  for m, n in sizes:
    level = stats.shift_interval(range(m), range(m, m + n))[2]
    side = f"{m} seeds a side" if m == n else f"{m} vs {n} seeds"
    words.append(f"{level:.1%} with {side}" if level < 1 else f"none with {side}")
  return ", ".join(words)


def paired_levels(analysis: Analysis) -> str:
  """``"95.1% with 10 pairs, none with 5"``: the achieved level of the paired intervals, the
  judged pairs' and the exploratory comparisons'."""
  paired = [o.paired for v in (*analysis.primary, *analysis.secondary) for o in v.outcomes]
  paired += [e.paired for e in analysis.exploratory]
  sizes = sorted({len(d.seeds) for d in paired if d is not None})
  if not sizes:
    return "no pairs here"
  words = []
  for n in sizes:
    level = stats.paired_interval(range(1, n + 1))[2]
    words.append(f"{level:.1%} with {n} pairs" if level < 1 else f"none with {n} pairs")
  return ", ".join(words)
