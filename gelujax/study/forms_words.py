"""The words of the GELU forms studies' verdicts, derived from the outcomes, none typed: a
cell's shift and verdict, what more pairs would decide, the tallies with their marks, the
findings, what a result does not say, and its headline rows of results/README.md."""

from __future__ import annotations

import collections
import math
from collections.abc import Sequence

from gelujax.study import (
  calibration,
  corrections,
  forms,
  forms_corrections,
  numbers,
  overview,
  registry,
  stats,
)
from gelujax.study.forms import Design, Outcome
from gelujax.study.judge import DIFFERENT, EQUIVALENT, INCONCLUSIVE


def shift_words(o: Outcome) -> str:
  """``"+0.04 points [-0.02, +0.11]"``: the paired shift and its interval, in the units shown."""
  m = o.comparison.metric
  if not o.seeds:
    return "no pairs"
  low, high, _ = o.interval
  shift, low, high = (numbers.signed(m.shown(v)) for v in (o.shift, low, high))
  return f"{m.amount(shift)} [{low}, {high}]"


def verdict_words(o: Outcome) -> str:
  """The verdict as a cell says it: equivalent; different, first higher; inconclusive, with
  its lean and the pairs that would decide it."""
  if o.verdict == EQUIVALENT:
    return "**equivalent**"
  if o.verdict == DIFFERENT:
    return f"**different**: {o.comparison.first} {o.direction}"
  lean = f"leans {o.direction}" if o.direction else "no lean"
  return f"inconclusive ({lean}; {pairs_words(o)})"


def decision_words(o: Outcome) -> str:
  """The decision that more pairs would reach if the observed shift were the true one
  (:func:`gelujax.study.power.pairs_for_power`): *equivalent* for a shift inside the margin,
  *different* for one beyond it."""
  return DIFFERENT if abs(o.shift) > o.comparison.metric.margin else EQUIVALENT


def pairs_words(o: Outcome) -> str:
  """What would decide an inconclusive comparison, and which way: ``"~44 pairs would find it
  equivalent"``; ``"more than 1000 pairs would find it different"`` where
  :func:`gelujax.study.power.pairs_for_power` gives up at :data:`gelujax.study.stats.MAX_SEEDS`;
  no number where the shift lies exactly on the margin, or too few pairs to tell."""
  if len(o.seeds) < 3:
    return "too few pairs to estimate the pairs that would decide"
  if abs(o.shift) == o.comparison.metric.margin:
    return "no number of pairs decides a shift exactly at the margin"
  if o.pairs_needed:
    return f"~{o.pairs_needed} pairs would find it {decision_words(o)}"
  return f"more than {stats.MAX_SEEDS} pairs would find it {decision_words(o)}"


def control_gaps(outcomes: Sequence[Outcome]) -> set[tuple[str, float, str]]:
  """(dtype, lr, metric key) where the control was not found different from gelu: there the
  design could not tell the control from gelu, and a forms verdict of *equivalent* says little."""
  return {
    (o.comparison.dtype, o.comparison.learning_rate, o.comparison.metric.key)
    for o in outcomes
    if o.comparison.control and o.verdict != DIFFERENT
  }


def tally(outcomes: Sequence[Outcome], control: bool) -> dict[str, int]:
  """How many comparisons (forms, or the control) got each verdict."""
  chosen = [o for o in outcomes if o.comparison.control == control]
  return {v: sum(o.verdict == v for o in chosen) for v in (EQUIVALENT, DIFFERENT, INCONCLUSIVE)}


def count_words(counts: dict[str, int], daggers: int = 0, uncalibrated: int = 0) -> str:
  """``"22 equivalent (10 †, 2 ‡), 0 different, 32 inconclusive"``: ``daggers`` of the
  equivalent are marked † (the control was not found different there), ``uncalibrated`` ‡ (it
  was, but does not calibrate them, nor does their own sensitivity)."""
  marks = ", ".join(
    f"{n} {mark}"
    for n, mark in ((daggers, "†"), (uncalibrated, calibration.UNCALIBRATED_MARK))
    if n
  )
  return ", ".join(
    f"{n} {verdict}" + (f" ({marks})" if verdict == EQUIVALENT and marks else "")
    for verdict, n in counts.items()
  )


def daggered(o: Outcome, gaps: set[tuple[str, float, str]]) -> bool:
  """Whether a forms comparison's *equivalent* is marked †: the control was not found
  different from gelu in its dtype, lr and metric (``gaps``: :func:`control_gaps`)."""
  c = o.comparison
  return (
    o.verdict == EQUIVALENT and not c.control and (c.dtype, c.learning_rate, c.metric.key) in gaps
  )


def equivalents_line(
  design: Design, outcomes: Sequence[Outcome], falling: dict[str, dict] | None = None
) -> str:
  """Which of the forms' *equivalent* verdicts are calibrated (by the control, found different from
  gelu in their dtype, lr and metric), and which are † (it was not), per metric; a metric still
  falling at the end of the runs (``falling``: :func:`forms.still_falling`) says so."""
  falling = falling or {}
  gaps = control_gaps(outcomes)
  calibrated = calibration.calibrations(design, outcomes)
  found = [o for o in outcomes if not o.comparison.control and o.verdict == EQUIVALENT]
  if not found:
    return "No comparison of the forms is *equivalent*."
  parts = []
  for metric in design.metrics:
    chosen = [o for o in found if o.comparison.metric.key == metric.key]
    if chosen:
      marked = sum(daggered(o, gaps) for o in chosen)
      unmarked = sum(calibration.uncalibrated(o, calibrated) for o in chosen)
      part = f"{metric.label}: {len(chosen) - marked - unmarked} calibrated, "
      part += f"{unmarked} {calibration.UNCALIBRATED_MARK}, {marked} †"
      if metric.key in falling:
        fact = falling[metric.key]
        part += (
          f", on a loss still falling {100 * fact['low']:.1f}% to {100 * fact['high']:.1f}% "
          f"over the last fifth of training"
        )
      parts.append(part)
  marked = sum(daggered(o, gaps) for o in found)
  statuses = collections.Counter(calibrated.get(calibration.cell_key(o)) for o in found)
  unmarked = statuses[calibration.UNCALIBRATED]
  head = (
    f"Of the {len(found)} *equivalent*, {statuses[calibration.CALIBRATED_BY_CONTROL]} "
    f"{'is' if statuses[calibration.CALIBRATED_BY_CONTROL] == 1 else 'are'} calibrated by the "
    f"control ({design.control} was found different from gelu within "
    f"{calibration.CONTROL_MARGINS:g} margins in their dtype, lr and metric), "
    f"{statuses[calibration.CALIBRATED_BY_SENSITIVITY]} by their own sensitivity (their paired "
    f"differences, resampled {calibration.RESAMPLES} times, find a true "
    f"{calibration.SHIFT_MARGINS}-margin shift different in at least "
    f"{100 * calibration.CALIBRATED_RATE:g}% of resamples: `gelujax.study.calibration`), "
    f"{unmarked} {'is' if unmarked == 1 else 'are'} {calibration.UNCALIBRATED_MARK} "
    f"({calibration.uncalibrated_words()}) "
    f"and {marked} {'is' if marked == 1 else 'are'} † (the control was not found different: "
    "there the design could not tell the control from gelu either)"
  )
  return f"{head}; by metric: {'; '.join(parts)}."


def falling_words(metric: forms.Metric, fact: dict) -> str:
  """A final metric still falling at the end of the runs (:func:`forms.still_falling`), and what
  its margin is in epochs of that fall."""
  words = (
    f"{metric.label} still falls at the last epoch: its median fall over the last fifth of "
    f"training (epochs {fact['start']:g}–{fact['epoch']:g}) is {100 * fact['low']:.1f}% to "
    f"{100 * fact['high']:.1f}% across the {fact['cells']} grids and lrs"
  )
  if math.isfinite(fact["epochs_low"]):
    margin = metric.amount(f"±{metric.shown(metric.margin):.3g}")
    words += (
      f", so its margin {margin} is {fact['epochs_low']:.1f} to {fact['epochs_high']:.1f} "
      "epochs of that fall: an *equivalent* on it says the arms lie within that much training "
      "of each other, on a loss that has not settled"
    )
  return words


def findings(
  design: Design,
  outcomes: Sequence[Outcome],
  missing: Sequence[str],
  falling: dict[str, dict] | None = None,
) -> list[str]:
  """The result in sentences, every count and direction derived from the outcomes; ``falling``:
  the final metrics still falling at the end of the runs (:func:`forms.still_falling`), each
  flagged after its tallies."""
  falling = falling or {}
  if missing:
    return [
      f"Pending: {len(missing)} of {len(design.arms) * len(design.dtypes)} grids are not "
      f"finished ({', '.join(missing)}); the verdicts below are of the finished ones only, with "
      "Holm's correction over the tests that can be made so far."
    ]
  lines = []
  gaps = control_gaps(outcomes)
  calibrated = calibration.calibrations(design, outcomes)
  form_outcomes = [o for o in outcomes if not o.comparison.control]
  counts = count_words(
    tally(outcomes, False),
    sum(daggered(o, gaps) for o in form_outcomes),
    sum(calibration.uncalibrated(o, calibrated) for o in form_outcomes),
  )
  lines.append(
    f"The forms, {len(form_outcomes)} pre-registered comparisons: {counts}. "
    + equivalents_line(design, outcomes, falling)
  )
  lines += calibration.sensitivity_lines(design, outcomes)
  lines.append(
    f"The control ({design.control} − gelu), {sum(tally(outcomes, True).values())} comparisons: "
    f"{count_words(tally(outcomes, True))}."
  )
  for metric in design.metrics:
    for dtype in design.dtypes:
      chosen = [
        o for o in form_outcomes
        if o.comparison.metric.key == metric.key and o.comparison.dtype == dtype
      ]  # fmt: skip
      different = [o for o in chosen if o.verdict == DIFFERENT]
      counts = count_words(
        tally(chosen, False),
        sum(daggered(o, gaps) for o in chosen),
        sum(calibration.uncalibrated(o, calibrated) for o in chosen),
      )
      line = f"{metric.label}, {dtype}: {counts}"
      if different:
        line += "; different: " + "; ".join(
          f"{o.comparison.first} {o.direction} than {o.comparison.second} at lr "
          f"{o.comparison.learning_rate:g} ({shift_words(o)})"
          for o in different
        )
      lines.append(line + ".")
    if metric.key in falling:
      lines.append(falling_words(metric, falling[metric.key]) + ".")
  if gaps:
    lines.append(
      f"Where the control was not found different from gelu ({len(gaps)} of "
      f"{len(design.dtypes) * len(design.learning_rates) * len(design.metrics)} dtype, lr and "
      f"metric cells), the design could not tell {design.control} from gelu either: an "
      "*equivalent* there "
      "(marked †) says little about the forms."
    )
  return lines


def headline_rows(
  design: Design, outcomes: Sequence[Outcome], falling: dict[str, dict] | None = None
) -> list[dict]:
  """The study's rows of ``results/README.md`` (:mod:`gelujax.study.overview`): one per
  pre-registered family (forms or control, dtype, metric), with each comparison's paired shift
  [interval], the family's tally (the † among its equivalents) and its caveats: where the
  control was not found different from gelu, and a final metric still falling."""
  falling = falling or {}
  gaps = control_gaps(outcomes)
  calibrated = calibration.calibrations(design, outcomes)
  families: dict[tuple[str, str, str], list[Outcome]] = {}
  for o in outcomes:
    families.setdefault(o.comparison.family, []).append(o)
  rows = []
  for (kind, dtype, key), chosen in families.items():
    metric = chosen[0].comparison.metric
    margin = metric.amount(f"±{metric.shown(metric.margin):.3g}")
    control = kind == forms.CONTROL_FAMILY
    claim = (
      f"{design.control} − gelu (the positive control) beyond {margin}"
      if control
      else f"the forms ({', '.join(design.forms)}) pairwise within {margin}"
    )
    marked = sum(daggered(o, gaps) for o in chosen)
    caveats = []
    if marked:
      lrs = sorted({o.comparison.learning_rate for o in chosen if daggered(o, gaps)})
      caveats.append(
        f"{marked} † (at lr {', '.join(f'{lr:g}' for lr in lrs)} the control was not found "
        f"different from gelu: the design could not tell {design.control} from gelu there)"
      )
    unmarked = sum(calibration.uncalibrated(o, calibrated) for o in chosen)
    if unmarked:
      caveats.append(
        f"{unmarked} {calibration.UNCALIBRATED_MARK} ({calibration.uncalibrated_words()})"
      )
    if key in falling:
      fact = falling[key]
      caveats.append(
        f"the loss still falls {100 * fact['low']:.1f}% to {100 * fact['high']:.1f}% over the "
        f"last fifth of training: the margin is {fact['epochs_low']:.1f} to "
        f"{fact['epochs_high']:.1f} epochs of that fall"
      )
    if not control:
      caveats += [c for c in (forms_corrections.margin_caveat(metric),) if c]
    corrected = corrections.CORRECTIONS.get(design.name, ())
    if corrected and not control:
      caveats.append(
        f"the design's stated reasons and rules have {len(corrected)} "
        f"correction{'s' * (len(corrected) != 1)}, in its README"
      )
    if not control:
      caveats.append(f"what it does not say: {'; '.join(limit_parts(design))}")
    rows.append(
      {
        "kind": overview.FAMILY,
        "where": f"{design.name}, {kind}: {key}, {dtype}",
        "claim": f"{claim}: {metric.label}, {dtype}, lrs {numbers.lrs(design.learning_rates)}",
        "paper": "–",
        "ours": "<br>".join(
          f"{forms.pair_words(o)}, lr {o.comparison.learning_rate:g}: {shift_words(o)} ({o.verdict}"
          + (" †" if daggered(o, gaps) else "")
          + (f" {calibration.UNCALIBRATED_MARK}" if calibration.uncalibrated(o, calibrated) else "")
          + ")"
          for o in chosen
        ),
        "verdict": count_words(tally(chosen, control), marked, unmarked),
        "caveats": "; ".join(caveats),
      }
    )
  return rows


def headline_summary(
  design: Design, outcomes: Sequence[Outcome], falling: dict[str, dict] | None = None
) -> str:
  """The study in one line of the top-level README: its forms comparisons' tally, and how many
  of its *equivalent* are calibrated, on which metrics, and how many are not (‡)."""
  falling = falling or {}
  gaps = control_gaps(outcomes)
  calibrated = calibration.calibrations(design, outcomes)
  chosen = [o for o in outcomes if not o.comparison.control]
  found = [o for o in chosen if o.verdict == EQUIVALENT]
  survivors = [
    o for o in found if not daggered(o, gaps) and not calibration.uncalibrated(o, calibrated)
  ]
  unmarked = sum(calibration.uncalibrated(o, calibrated) for o in found)
  on = {o.comparison.metric.key: o.comparison.metric for o in survivors}
  where = "; ".join(
    f"{sum(o.comparison.metric.key == key for o in survivors)} on {m.label}"
    + (", a loss still falling at the last epoch" if key in falling else "")
    for key, m in on.items()
  )
  whose = "gelujax's own study of the GELU forms"
  if registry.users(design) is not None:
    whose = "a study of your own"
  return (
    f"{whose} (`{design.name}`): {len(chosen)} pre-registered "
    f"comparisons of the forms, "
    f"{count_words(tally(chosen, False), sum(daggered(o, gaps) for o in found), unmarked)}; "
    f"{len(survivors)} of the {len(found)} *equivalent* calibrated (by the control within "
    f"{calibration.CONTROL_MARGINS:g} margins, or by their own sensitivity)"
    + (f": {where}" if where else "")
    + (f"; {unmarked} control uncalibrated ({calibration.UNCALIBRATED_MARK})" if unmarked else "")
    + "."
  )


def limits(design: Design) -> str:
  """What the result does not say."""
  return f"What this does not say: {'; '.join(limit_parts(design))}."


def limit_parts(design: Design) -> list[str]:
  """What the result does not say, item by item (the README's line, and each forms row's
  caveats in the overview)."""
  paper = design.task == "mnist"  # the paper's Fig. 2 MLP, as gelujax's own forms studies train
  data = "Fashion-MNIST" if design.dataset == "fashion_mnist" else f"`{design.dataset}`"
  model = "the paper's 8-layer MLP" if paper else f"`{design.task}`'s model"
  epochs = f"{design.epochs} epochs" + (", not the paper's 50" if paper else "")
  dropout = "no dropout" if design.dropout == 0 else f"dropout {design.dropout:g}"
  parts = [
    f"one data set ({data}), one architecture ({model}) and one optimizer; {epochs}; {dropout}"
  ]
  if any(d != "float32" for d in design.dtypes):
    parts.append(
      "bfloat16 as XLA computes it on this CPU, which may differ from a GPU's or TPU's bfloat16 "
      "arithmetic"
    )
  end = "a verdict of *equivalent* is within the stated margins only"
  if design.swaps:
    end += (
      ", and the swap changes are those of networks trained to the end of the run, not at "
      "their best-validation epoch"
    )
  return [*parts, end]
