"""The facts the GELU forms studies' corrections state (`gelujax.study.corrections`), each
derived from the runs or the paper's record at render time: the paper's own gaps beside a
margin, Fig. 2's ratios, the forms' paired spread and what it could resolve, test error in whole
images."""

from __future__ import annotations

from collections.abc import Sequence

from gelujax.study import corrections, forms, runs, stats
from gelujax.study.forms import Design, Outcome


def paper_gaps() -> list[tuple[float, str, str]]:
  """The gaps between GELU's test error and a baseline's that the paper reports (its
  hypotheses' values): (gap in points, where, baseline)."""
  from gelujax.paper import PAPER, figure  # Here: only the reports read the paper's values.

  gaps = []
  for task, record in PAPER.items():
    for h in record.hypotheses:
      if h.metric.endswith("test_error") and None not in h.paper:
        gaps.append((abs(h.paper[0] - h.paper[1]) * h.scale, f"{figure(task)} {task}", h.baseline))
  return gaps


def margin_caveat(metric: forms.Metric) -> str:
  """Where ``metric`` is a test error whose margin exceeds the smallest gap the paper reports
  between two activations, what an *equivalent* does not rule out; else ``""``."""
  gaps = paper_gaps()
  if not metric.key.endswith("test_error") or not gaps:
    return ""
  smallest, place, baseline = min(gaps)
  margin = metric.shown(metric.margin)
  if margin <= smallest:
    return ""
  return (
    f"the margin ±{margin:.3g} points is {margin / smallest:.3g} times the smallest test-error "
    f"gap the GELU paper reports ({smallest:.2f} points, {place}, {baseline}): an *equivalent* "
    "does not rule out a gap of that size"
  )


def paper_gaps_words(metric: forms.Metric) -> str:
  """The gaps between GELU's test error and a baseline's that the paper reports (its
  hypotheses' values), against ``metric``'s margin."""
  gaps = paper_gaps()
  if not gaps:
    return ""
  by_place: dict[str, list[str]] = {}
  for gap, place, baseline in gaps:
    by_place.setdefault(place, []).append(f"{baseline} {gap:.2f}")
  smallest, place, baseline = min(gaps)
  margin = metric.shown(metric.margin)
  said = (
    "the test-error gaps the paper reports between gelu_tanh and a baseline are, in points, "
    + "; ".join(f"{place}: {', '.join(found)}" for place, found in by_place.items())
    + f". The smallest, {smallest:.2f} points ({place}, {baseline}), is "
  )
  if margin > smallest:
    said += (
      f"below the margin ±{margin:.3g} (which is {margin / smallest:.3g} times it): an "
      "*equivalent* here does not rule out a gap of that size"
    )
  else:
    said += f"at least the margin ±{margin:.3g}"
  return said


def fig2_ratios_words() -> str:
  """Fig. 2's final train losses, each baseline's as a multiple of gelu_tanh's, by dropout."""
  from gelujax.paper import PAPER  # Here: only the corrections read the paper's values.

  ratios = [
    (h.dropout, h.baseline, h.paper[1] / h.paper[0])
    for h in PAPER["mnist"].hypotheses
    if h.metric == "final.train_loss" and None not in h.paper and h.paper[0]
  ]
  by_dropout: dict[float, list[str]] = {}
  for dropout, baseline, ratio in ratios:
    by_dropout.setdefault(dropout, []).append(f"{baseline} {ratio:.3g}x")
  apart = [dropout for dropout, _, ratio in ratios if max(ratio, 1 / ratio) >= 2]
  return (
    "Fig. 2's final train losses, each baseline's as a multiple of gelu_tanh's: "
    + "; ".join(f"dropout {d:g}: {', '.join(found)}" for d, found in by_dropout.items())
    + f". A factor of 2 or more in {len(apart)} of {len(ratios)}, "
    + (f"all with dropout {apart[0]:g}" if len(set(apart)) == 1 else "")
  ).rstrip(", ")


def paired_sd_words(design: Design, outcomes: Sequence[Outcome]) -> str:
  """What the design's pairs could resolve on test error (:func:`forms.paired_spread`)."""
  spread = forms.paired_spread(design, outcomes)
  if not spread:
    return ""
  metric = next(m for m in design.metrics if m.key == "best.test_error")
  margin = metric.amount(f"±{metric.shown(metric.margin):.3g}")

  def pairs(found: list[int | None]) -> str:
    known = [n for n in found if n is not None]
    words = f"{min(known)}–{max(known)}" if known else ""
    if len(known) < len(found):
      words += (" or " if known else "") + f"more than {stats.MAX_SEEDS}"
    return words

  seeds = max(v["seeds"] for v in spread.values())
  enough = sum(n is not None and n <= seeds for v in spread.values() for n in v["pairs"])
  cells = sum(len(v["pairs"]) for v in spread.values())
  return (
    f"With {seeds} pairs the margin could resolve little: the SD of the forms' paired test-error "
    "differences is "
    + ", ".join(
      f"{v['sd_low']:.2f}–{v['sd_high']:.2f} points at lr {lr:g}" for lr, v in spread.items()
    )
    + f"; were the true shift 0, calling it *equivalent* within {margin} with 80% power at the "
    "family's strictest level would take "
    + ", ".join(f"{pairs(v['pairs'])} pairs at lr {lr:g}" for lr, v in spread.items())
    + f" (`power.pairs_for_power`); {seeds} pairs suffice in {enough} of the {cells} "
    "comparisons"
  )


def whole_images_words(design: Design, finished: dict[str, runs.Run]) -> str:
  """What comparing the test errors in whole images would change (:func:`forms.whole_images`)."""
  found = forms.whole_images(design, finished)
  if found is None:
    return ""
  return (
    f"Of the {found['differences']} paired test-error differences, {found['broken_ties']} are "
    "tied in whole images with another of their comparison but not as floats, "
    f"{found['zeros']} are 0 in whole images but not as floats, and {found['at_margin']} lie "
    "exactly on the margin in whole images but not as floats. Compared in whole images, the p "
    f"a verdict rests on would change in {found['p_changed']} of the {found['tests']} test-error "
    f"comparisons (by at most {found['p_largest']:.2g}), and the verdict in "
    f"{found['verdicts_changed']}"
  )


def correction_lines(
  design: Design, outcomes: Sequence[Outcome], finished: dict[str, runs.Run]
) -> list[str]:
  """The design's corrections (`gelujax.study.corrections`), each with the facts that show it,
  derived here from the paper's record and the runs."""
  error = next((m for m in design.metrics if m.key == "best.test_error"), None)
  facts = {
    "paper_gaps": lambda: paper_gaps_words(error) if error else "",
    "fig2_ratios": fig2_ratios_words,
    "paired_sd": lambda: paired_sd_words(design, outcomes),
    "whole_images": lambda: whole_images_words(design, finished),
  }
  return corrections.lines(design.name, design.date, facts)
