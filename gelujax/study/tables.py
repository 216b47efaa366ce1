"""The Markdown tables of a result, from its rows (:func:`gelujax.study.runs.summarize_run`),
noise evaluations and :class:`gelujax.study.analysis.Analysis`.

Every number is printed by :func:`gelujax.study.numbers.number` (4 significant digits; shifts and
intervals 3), every verdict and outcome worded by :mod:`gelujax.study.wording`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gelujax.study import numbers, runs, wording
from gelujax.study.analysis import Analysis, Exploratory
from gelujax.study.noise import noise_at
from gelujax.study.numbers import number
from gelujax.study.runs import LrRow, RunRow
from gelujax.study.stats import Stats
from gelujax.study.verdicts import Outcome, Verdict
from gelujax.study.wording import format_shift


def diverged_label(row: RunRow) -> str:
  """``"2/5 diverged"``, or ``""`` when no member of the selected lr diverged."""
  selected = row.selected
  if selected is None:
    total = sum(g.members for g in row.grid)
    return f"{total}/{total} diverged"
  if selected.diverged:
    return f"{selected.diverged}/{selected.members} diverged"
  return ""


def unstable_label(row: RunRow, stats: LrRow) -> str:
  """``"1/5"``: members of ``stats``'s lr with a training-loss jump."""
  jumps = (row.curves or {}).get("jumps", [])
  seeds = {j["seed"] for j in jumps if runs.same_lr(j["learning_rate"], stats.learning_rate)}
  return f"{len(seeds)}/{stats.members}"


def format_table(
  rows: Sequence[RunRow],
  *,
  metric: str,
  label: str,
  scale: float = 1.0,
  paper: Mapping[str, float] | None = None,
  extra: Sequence[tuple[str, str, float]] = (),
  selection: Mapping[str, str] | None = None,
) -> str:
  """A Markdown table: per run the lr shown, diverged and unstable members, the paper's number
  and ours.

  Args:
    rows: :func:`gelujax.study.runs.summarize_run` rows; each shows its ``selected`` lr.
    metric: the reported statistic, e.g. ``"best.test_error"``.
    label: its column heading, e.g. ``"test error (%)"``.
    scale: multiplies every value shown (100 for percent).
    paper: the paper's value by run name (unscaled, like ours); runs absent from it show "–".
    extra: further ``(metric, heading, scale)`` columns, shown as medians.
    selection: run name -> a last column on how its lr was selected.
  """
  paper = paper or {}
  head = ["run", "lr", "seeds", "diverged", "unstable", f"paper {label}", f"median {label}"]
  head += [f"mean ± std {label}", *[heading for _, heading, _ in extra]]
  if selection is not None:
    head.append("lr selection")
  lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  for row in rows:
    selected = row.selected
    if selected is None:
      cells = [
        row.run,
        "–",
        "–",
        diverged_label(row),
        "–",
        number(paper.get(row.run), scale),
      ]
      cells += ["–"] * (len(head) - len(cells))
    else:
      stats = selected.metrics.get(metric, Stats.of([]))
      cells = [
        row.run,
        f"{selected.learning_rate:g}",
        numbers.seeds(selected.seeds),
        diverged_label(row) or f"0/{selected.members}",
        unstable_label(row, selected),
        number(paper.get(row.run), scale),
        number(stats.median, scale),
        f"{number(stats.mean, scale)} ± {number(stats.std, scale, 2)}",
      ]
      for key, _, extra_scale in extra:
        cells.append(number(selected.median(key), extra_scale))
      if selection is not None:
        cells.append(selection.get(row.run, "–"))
    lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines) + "\n"


def format_grid(
  rows: Sequence[RunRow],
  *,
  metric: str,
  label: str,
  scale: float = 1.0,
  mark_selected: bool = True,
) -> str:
  """A Markdown table of every lr of every run: diverged and unstable members, the median
  selection metric (which picks the lr where one is selected) and the median of ``metric``
  (labelled ``label``, times ``scale``). With ``mark_selected``, each row's ``selected`` lr is
  marked "(selected)"; without (a design that selects no lr), none is."""
  lines = [
    f"| run | lr | diverged | unstable | median best selection metric | median {label} |",
    "|---|---|---|---|---|---|",
  ]
  for row in rows:
    for g in row.grid:
      mark = " (selected)" if mark_selected and g is row.selected else ""
      lines.append(
        f"| {row.run} | {g.learning_rate:g}{mark} | {g.diverged}/{g.members} | "
        f"{unstable_label(row, g)} | {number(g.select_median)} "
        f"({row.select_metric}) | {number(g.median(metric), scale)} |"
      )
  return "\n".join(lines) + "\n"


def format_noise_table(
  results: Mapping[str, Mapping[str, Any]],
  *,
  at: Sequence[float] = (0.0, 1.0, 3.0),
  paper: Mapping[str, Mapping[float, float]] | None = None,
) -> str:
  """A Markdown table of median test accuracy and log loss at noise levels ``at``.

  Args:
    results: run name -> :func:`gelujax.study.noise.evaluate_noise` result.
    at: the noise levels shown (interpolated when between evaluated levels).
    paper: run name -> noise level -> the paper's accuracy, shown beside ours.
  """
  paper = paper or {}
  head = ["run", "lr", "seeds", "diverged"]
  head += [f"accuracy a={a:g} (paper)" for a in at] + [f"log loss a={a:g}" for a in at]
  lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  for name, result in results.items():
    cells = [
      name,
      f"{result['learning_rate']:g}",
      numbers.seeds(result["seeds"]),
      f"{result['diverged']}/{result['members']}",
    ]
    for a in at:
      ours = number(noise_at(result, "accuracy", a), digits=3)
      theirs = paper.get(name.removesuffix(runs.EVAL_SUFFIX), {}).get(a)
      cells.append(ours if theirs is None else f"{ours} ({theirs:g})")
    cells += [number(noise_at(result, "loss", a), digits=3) for a in at]
    lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines) + "\n"


HYPOTHESES_HEAD = (
  "| # | claim | paper | lrs: GELU vs baseline | ours: median GELU vs baseline | "
  "HL shift [exact CI] | p | Holm p | verdict |"
)


def _lrs(learning_rates: tuple[float | None, float | None]) -> str:
  return " vs ".join("–" if lr is None else f"{lr:g}" for lr in learning_rates)


def _outcome_cells(v: Verdict, o: Outcome) -> list[str]:
  """The cells of one pair of lrs: the lrs, our medians, the shift, p, Holm p and the outcome
  with its caveats."""
  h, c = v.hypothesis, o.comparison
  if c is None:
    return [_lrs(o.learning_rates), "–", "–", "–", "–"]
  ours = (
    f"{number(c.median_a, h.scale)} vs {number(c.median_b, h.scale)} "
    f"({o.seeds}; {len(c.a)} vs {len(c.b)})"
  )
  return [_lrs(o.learning_rates), ours, format_shift(c, h.scale), f"{o.p:.2g}", f"{o.holm:.2g}"]


def _with_caveats(words: str, v: Verdict, o: Outcome) -> str:
  caveat = wording.caveat_words(o, v.hypothesis)
  return f"{words}; {caveat}" if caveat else words


def format_hypotheses(
  family: Sequence[Verdict], first: int = 1, analysis: Analysis | None = None
) -> str:
  """A Markdown table of one family's verdicts: the claim, the paper's values, the lrs tested,
  our medians, the Hodges–Lehmann shift (GELU minus baseline) with its exact interval, the
  p-value, the Holm-adjusted p-value within the family and the verdict with its caveats. Rows
  are numbered from ``first``; a hypothesis tested at several pairs of candidate lrs has a row
  for its verdict, then one per pair (``1a``, ``1b``, ...)."""
  lines = [HYPOTHESES_HEAD, "|---|---|---|---|---|---|---|---|---|"]
  for i, v in enumerate(family, first):
    h = v.hypothesis
    paper = " vs ".join(number(x, h.scale) for x in h.paper)
    if all(x is None for x in h.paper):
      paper = "–"
    words = wording.verdict_words(v, analysis)
    if v.single is not None:
      cells = _outcome_cells(v, v.single)
      lines.append(
        f"| {i} | {h.describe()} | {paper} | {' | '.join(cells)} | "
        f"{_with_caveats(words, v, v.single)} |"
      )
      continue
    pairs = f"{len(v.outcomes)} pairs of candidate lrs" if v.outcomes else "–"
    caveat = wording.verdict_caveat_words(v)  # every pair's, on the verdict's row too
    words += f"; {caveat}" if caveat else ""
    lines.append(f"| {i} | {h.describe()} | {paper} | {pairs} | – | – | – | – | {words} |")
    for k, o in enumerate(v.outcomes):
      words = _with_caveats(wording.outcome_words(o, h), v, o)
      lines.append(
        f"| {i}{wording.pair_letter(k)} | | | {' | '.join(_outcome_cells(v, o))} | {words} |"
      )
  return "\n".join(lines) + "\n"


def format_exploratory(found: Sequence[Exploratory]) -> str:
  """A Markdown table of exploratory comparisons (no correction, no significance words)."""
  lines = [
    "| where | metric | run | baseline | seeds | run median | baseline median | HL shift "
    "[exact CI] | p (uncorrected) | pairs | paired shift [exact CI] | signed-rank p |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|",
  ]
  for e in found:
    c, d, scale = e.comparison, e.paired, e.metric.scale
    paired = "0 | – | –" if d is None else f"{len(d.seeds)} | {format_shift(d, scale)} | {d.p:.2g}"
    lines.append(
      f"| {e.scope} | {e.metric.label} | {e.run} | {e.baseline} | {e.seeds} | "
      f"{number(c.median_a, scale)} | {number(c.median_b, scale)} | "
      f"{format_shift(c, scale)} | {c.p:.2g} | {paired} |"
    )
  return "\n".join(lines) + "\n"


def format_jumps(analysis: Analysis) -> str:
  """A Markdown table of every training-loss jump."""
  lines = [
    "| run | lr | seed | epoch | training loss | running minimum | ratio |",
    "|---|---|---|---|---|---|---|",
  ]
  for run, _, kind, j in analysis.curves:
    if kind == "jump":
      lines.append(
        f"| {run} | {j['learning_rate']:g} | {j['seed']} | {j['epoch']:g} | "
        f"{number(j['value'])} | {number(j['running_min'])} | {j['ratio']:.3g} |"
      )
  return "\n".join(lines) + "\n"
