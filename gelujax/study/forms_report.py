"""The README, tables, figure and summary of the GELU forms study (:mod:`gelujax.study.forms`),
written from the runs' files alone: every word that states a verdict, a direction or a count is
derived here from the outcomes, none typed by hand. :func:`reproduce` is the study end to end:
its grids trained, their swaps evaluated (:mod:`gelujax.study.forms`), then the result written
here."""

from __future__ import annotations

import collections
import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from gelujax import workdir as workdirs
from gelujax.study import (
  calibration,
  corrections,
  forms,
  grids,
  numbers,
  overview,
  plots,
  provenance,
  readme,
  registry,
  runs,
  stats,
)
from gelujax.study.forms import Design, Outcome
from gelujax.study.judge import DIFFERENT, EQUIVALENT, INCONCLUSIVE

FIGURE = "forms.png"
SWAP_KEYS = (("error", "test error (points)", 100.0), ("loss", "test log loss (nats)", 1.0))


def pair_words(o: Outcome) -> str:
  c = o.comparison
  return f"{c.first} − {c.second}" + (" (control)" if c.control else "")


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


UNCALIBRATED_MARK = "‡"  # an *equivalent* whose control does not calibrate it, nor its own spread


def cell_key(o: Outcome) -> tuple[str, str, str, float, str]:
  c = o.comparison
  return (c.first, c.second, c.dtype, c.learning_rate, c.metric.key)


def calibrations(design: Design, outcomes: Sequence[Outcome]) -> dict[tuple, str]:
  """Each forms *equivalent* whose cell's control was found different (not †) -> what
  calibrates it (`gelujax.study.calibration`): the control, where found different within
  `calibration.CONTROL_MARGINS` margins; else its own paired differences' sensitivity at its
  family's strictest level; else :data:`gelujax.study.calibration.UNCALIBRATED`."""
  controls = {
    (o.comparison.dtype, o.comparison.learning_rate, o.comparison.metric.key): o
    for o in outcomes
    if o.comparison.control
  }
  sizes = collections.Counter(o.comparison.family for o in outcomes)
  found = {}
  for o in outcomes:
    c = o.comparison
    control = controls.get((c.dtype, c.learning_rate, c.metric.key))
    if c.control or o.verdict != EQUIVALENT or control is None or control.verdict != DIFFERENT:
      continue
    margin = c.metric.margin
    if calibration.control_calibrates(control.verdict, control.shift, margin):
      found[cell_key(o)] = calibration.CALIBRATED_BY_CONTROL
      continue
    level = design.alpha / sizes[c.family]
    sensitivity = calibration.cached_sensitivity(tuple(o.differences), margin, level)
    found[cell_key(o)] = calibration.status(False, sensitivity)
  return found


def sensitivity_lines(design: Design, outcomes: Sequence[Outcome]) -> list[str]:
  """The sensitivity of each *equivalent* its control does not calibrate: the shares of its
  resampled differences found *equivalent* at a shift of 0 and *different* at 1 and 2 margins
  (`gelujax.study.calibration.sensitivity`), and the control's gap in margins."""
  calibrated = calibrations(design, outcomes)
  controls = {
    (o.comparison.dtype, o.comparison.learning_rate, o.comparison.metric.key): o
    for o in outcomes
    if o.comparison.control
  }
  sizes = collections.Counter(o.comparison.family for o in outcomes)
  lines = []
  for o in outcomes:
    status = calibrated.get(cell_key(o))
    if status is None or status == calibration.CALIBRATED_BY_CONTROL:
      continue
    c = o.comparison
    control = controls[(c.dtype, c.learning_rate, c.metric.key)]
    level = design.alpha / sizes[c.family]
    s = calibration.cached_sensitivity(tuple(o.differences), c.metric.margin, level)
    lines.append(
      f"{pair_words(o)}, {c.dtype}, lr {c.learning_rate:g}, {c.metric.label}: *equivalent* "
      f"with the same seeds; the control {numbers.signed(control.shift / c.metric.margin)} "
      f"margins away; its own sensitivity ({s.resamples} resamples of its paired differences "
      f"centred at zero, each judged at {s.level:.3g}): *equivalent* at a shift of 0 in "
      f"{100 * s.equivalent_at_zero:.1f}%, *different* at 1 margin in "
      f"{100 * s.different[1]:.1f}% and at 2 margins in {100 * s.different[2]:.1f}%: {status}."
    )
  return lines


def closeness_lines(
  design: Design, outcomes: Sequence[Outcome], finished: dict[str, runs.Run]
) -> list[str]:
  """How near the two arms' networks stay, seed by seed, for each *equivalent* the control was
  found different beside (`gelujax.study.calibration.closeness`): the per-seed correlation of
  their values as compared, the pairs whose members pick the same best epoch (a best-epoch
  metric), each arm's SD across seeds beside the paired SD; where they stay nearly one network,
  that its verdict is a same-seed statement."""
  calibrated = calibrations(design, outcomes)
  lines = []
  for o in outcomes:
    if cell_key(o) not in calibrated:
      continue
    c = o.comparison
    values, epochs = [], []
    for arm in (c.first, c.second):
      run = finished[design.run_name(arm, c.dtype)]
      values.append(forms.find_lr(runs.values(run, c.metric.key), c.learning_rate))
      epochs.append({m["seed"]: m["best_epoch"] for m in runs.lr_members(run, c.learning_rate)})
    first, second = forms.compared_values(*values, c.metric)
    best = c.metric.key.startswith("best.")
    k = calibration.closeness(first, second, *(epochs if best else (None, None)))
    same = (
      f", the same best epoch in {k.same_epoch} of {k.pairs} pairs"
      if k.same_epoch is not None
      else ""
    )
    sds = ", ".join(c.metric.amount(numbers.number(c.metric.shown(v), digits=3)) for v in (
      k.sd_first, k.sd_second
    ))  # fmt: skip
    line = (
      f"{pair_words(o)}, {c.dtype}, lr {c.learning_rate:g}, {c.metric.label}: per-seed "
      f"correlation of the two arms {k.correlation:+.2f}{same}; SD across seeds ({c.first}, "
      f"{c.second}) {sds}; paired SD "
      f"{c.metric.amount(numbers.number(c.metric.shown(k.sd_paired), digits=3))}"
    )
    if k.nearly_one:
      line += (
        f": nearly one network (correlation at least {calibration.NEARLY_ONE:g}), so its "
        "*equivalent* is a same-seed statement, one initial draw and one batch order trained "
        "with either form"
      )
    lines.append(line + ".")
  return lines


def uncalibrated(o: Outcome, calibrated: dict[tuple, str]) -> bool:
  """Whether an *equivalent* is marked ‡ (:data:`UNCALIBRATED_MARK`)."""
  return calibrated.get(cell_key(o)) == calibration.UNCALIBRATED


def verdict_table(design: Design, outcomes: Sequence[Outcome], metric: forms.Metric) -> list[str]:
  """One metric's verdicts: a row per pair, a column per dtype and lr."""
  columns = [(d, lr) for d in design.dtypes for lr in design.learning_rates]
  gaps = control_gaps(outcomes)
  calibrated = calibrations(design, outcomes)
  found = {
    (pair_words(o), o.comparison.dtype, o.comparison.learning_rate): o
    for o in outcomes
    if o.comparison.metric.key == metric.key
  }
  pairs = list(dict.fromkeys(p for p, *_ in found))
  lines = [
    "| paired shift | " + " | ".join(f"{d}, lr {lr:g}" for d, lr in columns) + " |",
    "|---|" + "---|" * len(columns),
  ]
  for pair in pairs:
    cells = []
    for d, lr in columns:
      o = next((v for (p, dt, r), v in found.items() if p == pair and dt == d and r == lr), None)
      if o is None:
        cells.append("pending")
        continue
      mark = " †" if daggered(o, gaps) else ""
      mark += f" {UNCALIBRATED_MARK}" if uncalibrated(o, calibrated) else ""
      cells.append(f"{verdict_words(o)}{mark}<br>{shift_words(o)}")
    lines.append(f"| {pair} | " + " | ".join(cells) + " |")
  return lines


def full_table(outcomes: Sequence[Outcome]) -> list[str]:
  """Every comparison with every number its verdict rests on."""
  lines = [
    "| metric | dtype | lr | paired shift | n | shift [interval, level] | p (shift 0) | "
    "p (TOST) | p (beyond) | p | Holm p | verdict |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|",
  ]
  for o in outcomes:
    c, e = o.comparison, o.equivalence
    level = f", {100 * o.interval[2]:.1f}%" if o.seeds else ""
    lines.append(
      f"| {c.metric.key} | {c.dtype} | {c.learning_rate:g} | {pair_words(o)} | {len(o.seeds)} "
      f"| {shift_words(o)}{level} | {o.p_zero:.3g} | {e.p_equivalent:.3g} | {e.p_beyond:.3g} "
      f"| {e.p:.3g} | {o.p_holm:.3g} | {verdict_words(o)} |"
    )
  return lines


def arm_table(design: Design, finished: dict[str, runs.Run], metric: forms.Metric) -> list[str]:
  """Each arm's median (and min-max over seeds) of a metric, per dtype and lr, from the
  finished grids (`forms.finished_runs`)."""
  columns = [(d, lr) for d in design.dtypes for lr in design.learning_rates]
  lines = [
    "| arm | " + " | ".join(f"{d}, lr {lr:g}" for d, lr in columns) + " |",
    "|---|" + "---|" * len(columns),
  ]
  for arm in design.arms:
    cells = []
    found = {  # dtype -> lr -> seed -> value
      d: runs.values(finished[name], metric.key)
      for d in design.dtypes
      if (name := design.run_name(arm, d)) in finished
    }
    for d, lr in columns:
      if d not in found:
        cells.append("pending")
        continue
      values = forms.find_lr(found[d], lr)
      x = metric.shown_values([v for v in values.values() if math.isfinite(v)])
      diverged = len(values) - len(x)
      cell = f"{np.median(x):.4g} ({x.min():.4g}–{x.max():.4g})" if len(x) else numbers.DASH
      cells.append(cell + (f", {diverged} diverged" if diverged else ""))
    lines.append(f"| {arm} | " + " | ".join(cells) + " |")
  return lines


@dataclasses.dataclass(frozen=True)
class Swap:
  """The change when networks trained with ``arm`` in ``dtype`` at ``learning_rate`` are
  evaluated with ``activation`` in ``to_dtype``: per network, swapped minus own."""

  arm: str
  dtype: str
  activation: str
  to_dtype: str
  learning_rate: float
  key: str
  changes: tuple[float, ...]

  @property
  def shift(self) -> float:
    return stats.walsh_median(self.changes)

  @property
  def interval(self) -> tuple[float, float, float]:
    return stats.paired_interval(self.changes)


def read_swaps(design: Design, out: Path) -> list[Swap]:
  """Every swap kept in ``out/swaps/``, per lr and metric (diverged networks left out)."""
  found = []
  for dtype in design.dtypes:
    for arm in design.arms:
      path = forms.swap_path(out, design.run_name(arm, dtype))
      if not path.exists():
        continue
      kept = workdirs.read_json(path)
      own, *others = kept["evaluations"]
      for other in others:
        for lr in design.learning_rates:
          index = [i for i, m in enumerate(kept["members"]) if runs.same_lr(m["learning_rate"], lr)]
          for key, *_ in SWAP_KEYS:
            changes = tuple(
              other[key][i] - own[key][i]
              for i in index
              if other[key][i] is not None and own[key][i] is not None
            )
            found.append(Swap(arm, dtype, other["activation"], other["dtype"], lr, key, changes))
  return found


def swap_table(design: Design, swaps: Sequence[Swap], key: str, scale: float) -> list[str]:
  """One metric's swap changes: a row per (trained, evaluated) pair, a column per lr."""
  lines = [
    "| trained with | evaluated with | "
    + " | ".join(f"lr {lr:g}: change [interval]; largest |change|" for lr in design.learning_rates)
    + " |",
    "|---|---|" + "---|" * len(design.learning_rates),
  ]
  rows: dict[tuple[str, str, str, str], dict[float, Swap]] = {}
  for s in swaps:
    if s.key == key:
      rows.setdefault((s.arm, s.dtype, s.activation, s.to_dtype), {})[s.learning_rate] = s
  for (arm, dtype, activation, to_dtype), by_lr in rows.items():
    cells = []
    for lr in design.learning_rates:
      s = by_lr.get(lr)
      if s is None or not s.changes:
        cells.append(numbers.DASH)
        continue
      low, high, _ = s.interval
      largest = max(abs(c) for c in s.changes) * scale
      shift, low, high = (numbers.signed(v, scale=scale) for v in (s.shift, low, high))
      cells.append(f"{shift} [{low}, {high}]; {largest:.3g}")
    lines.append(f"| {arm}, {dtype} | {activation}, {to_dtype} | " + " | ".join(cells) + " |")
  return lines


MARKERS = {EQUIVALENT: "o", DIFFERENT: "s", INCONCLUSIVE: "D"}


def draw_figure(design: Design, outcomes: Sequence[Outcome], path: Path) -> Path:
  """Every comparison's paired shift with its interval, in units of its margin (the band ±1 is
  the equivalence margin), the marker its verdict: a panel per metric (rows) and dtype
  (columns), on a scale linear within ±1 and logarithmic beyond (the control's shifts are many
  margins)."""
  metrics, dtypes = design.metrics, design.dtypes
  fig = Figure(figsize=(5.5 * len(dtypes), 4.2 * len(metrics)), layout="constrained")
  FigureCanvasAgg(fig)
  axes = fig.subplots(len(metrics), len(dtypes), squeeze=False)
  for row, metric in enumerate(metrics):
    for col, dtype in enumerate(dtypes):
      ax = axes[row][col]
      shown = [
        o for o in outcomes if o.comparison.metric.key == metric.key and o.comparison.dtype == dtype
      ]
      ax.axvspan(-1.0, 1.0, color="0.88", lw=0)
      ax.axvline(0.0, color="0.4", lw=0.8)
      pairs = list(dict.fromkeys(pair_words(o) for o in shown))
      for y, o in enumerate(shown):
        if not o.seeds:
          continue
        x, (low, high, _) = o.shift / metric.margin, o.interval
        lo, hi = low / metric.margin, high / metric.margin
        ax.errorbar(
          x, y, xerr=[[x - lo], [hi - x]], fmt=MARKERS[o.verdict], capsize=3,
          color=f"C{pairs.index(pair_words(o)) % 10}",
          markerfacecolor="white" if o.verdict == INCONCLUSIVE else None,
        )  # fmt: skip
      ax.set_yticks(range(len(shown)))
      ax.set_yticklabels([f"{pair_words(o)}, lr {o.comparison.learning_rate:g}" for o in shown],
                         fontsize=7)  # fmt: skip
      ax.invert_yaxis()
      ax.set_xscale("symlog", linthresh=1.0)
      ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
      ax.set_xlabel(
        f"paired shift in margins ({metric.amount(f'±{metric.shown(metric.margin):.3g}')}), "
        f"exact {100 * stats.CONFIDENCE:g}% interval",
        fontsize=8,
      )
      ax.set_title(f"{metric.label}, {dtype}", fontsize=9)
  fig.suptitle(
    f"GELU forms on {design.dataset}, {len(design.seeds)} paired seeds: grey, the equivalence "
    "margin; marker: equivalent ●, different ■, inconclusive ◇"
  )
  return plots.save_figure(fig, path)


def tally(outcomes: Sequence[Outcome], control: bool) -> dict[str, int]:
  """How many comparisons (forms, or the control) got each verdict."""
  chosen = [o for o in outcomes if o.comparison.control == control]
  return {v: sum(o.verdict == v for o in chosen) for v in (EQUIVALENT, DIFFERENT, INCONCLUSIVE)}


def count_words(counts: dict[str, int], daggers: int = 0, uncalibrated: int = 0) -> str:
  """``"22 equivalent (10 †, 2 ‡), 0 different, 32 inconclusive"``: ``daggers`` of the
  equivalent are marked † (the control was not found different there), ``uncalibrated`` ‡ (it
  was, but does not calibrate them, nor does their own sensitivity)."""
  marks = ", ".join(
    f"{n} {mark}" for n, mark in ((daggers, "†"), (uncalibrated, UNCALIBRATED_MARK)) if n
  )
  return ", ".join(
    f"{n} {verdict}" + (f" ({marks})" if verdict == EQUIVALENT and marks else "")
    for verdict, n in counts.items()
  )


UNCALIBRATED_WORDS = (
  "the control was found different from gelu, but more than {margins:g} margins away, and "
  "their own paired differences do not find a true {shift}-margin shift different in "
  "{rate:g}% of resamples: *equivalent* with the same seeds, control uncalibrated"
)


def uncalibrated_words() -> str:
  """What ‡ means, in words, from `gelujax.study.calibration`'s rule."""
  return UNCALIBRATED_WORDS.format(
    margins=calibration.CONTROL_MARGINS,
    shift=calibration.SHIFT_MARGINS,
    rate=100 * calibration.CALIBRATED_RATE,
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
  calibrated = calibrations(design, outcomes)
  found = [o for o in outcomes if not o.comparison.control and o.verdict == EQUIVALENT]
  if not found:
    return "No comparison of the forms is *equivalent*."
  parts = []
  for metric in design.metrics:
    chosen = [o for o in found if o.comparison.metric.key == metric.key]
    if chosen:
      marked = sum(daggered(o, gaps) for o in chosen)
      unmarked = sum(uncalibrated(o, calibrated) for o in chosen)
      part = f"{metric.label}: {len(chosen) - marked - unmarked} calibrated, "
      part += f"{unmarked} {UNCALIBRATED_MARK}, {marked} †"
      if metric.key in falling:
        fact = falling[metric.key]
        part += (
          f", on a loss still falling {100 * fact['low']:.1f}% to {100 * fact['high']:.1f}% "
          f"over the last fifth of training"
        )
      parts.append(part)
  marked = sum(daggered(o, gaps) for o in found)
  statuses = collections.Counter(calibrated.get(cell_key(o)) for o in found)
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
    f"{unmarked} {'is' if unmarked == 1 else 'are'} {UNCALIBRATED_MARK} ({uncalibrated_words()}) "
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
  calibrated = calibrations(design, outcomes)
  form_outcomes = [o for o in outcomes if not o.comparison.control]
  counts = count_words(
    tally(outcomes, False),
    sum(daggered(o, gaps) for o in form_outcomes),
    sum(uncalibrated(o, calibrated) for o in form_outcomes),
  )
  lines.append(
    f"The forms, {len(form_outcomes)} pre-registered comparisons: {counts}. "
    + equivalents_line(design, outcomes, falling)
  )
  lines += sensitivity_lines(design, outcomes)
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
        sum(uncalibrated(o, calibrated) for o in chosen),
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


def swap_groups(swaps: Sequence[Swap]) -> dict[str, list[Swap]]:
  """The swaps by direction: one group per (trained with, evaluated with) pair of forms, each
  network in its own dtype (``"gelu → gelu_sigmoid"``), then one per arm and change of dtype
  (``"relu, float32 → bfloat16"``), so that no group pools a swap with its opposite."""
  forms_first = sorted(swaps, key=lambda s: s.dtype != s.to_dtype)  # stable: the design's order
  groups: dict[str, list[Swap]] = {}
  for s in forms_first:
    if s.dtype == s.to_dtype:
      label = f"{s.arm} → {s.activation}, each network in its own dtype"
    else:
      label = f"{s.arm}, {s.dtype} → {s.to_dtype}"
    groups.setdefault(label, []).append(s)
  return groups


def swap_findings(design: Design, swaps: Sequence[Swap]) -> list[str]:
  """What each direction of swap changed (:func:`swap_groups`), per metric: the median change
  over its networks (every lr and dtype), how many went up and down, the range, and whether the
  largest change lies beyond the study's margin for that metric."""
  margins = {m.key: m for m in design.metrics}
  lines = []
  for label, chosen in swap_groups(swaps).items():
    parts, networks = [], 0
    for key, words, scale in SWAP_KEYS:
      changes = np.asarray([c for s in chosen if s.key == key for c in s.changes])
      if not len(changes):
        continue
      networks = max(networks, len(changes))
      low, high = changes.min() * scale, changes.max() * scale
      part = (
        f"{words} median {numbers.signed(float(np.median(changes)) * scale)}, "
        f"{int((changes > 0).sum())} up and {int((changes < 0).sum())} down, from "
        f"{numbers.signed(low)} to {numbers.signed(high)}"
      )
      metric = margins.get(f"best.test_{key}")
      if metric is not None and not metric.log:
        margin = metric.shown(metric.margin)
        beyond = int((np.abs(changes) * scale > margin * (1 + 1e-9)).sum())
        if beyond:
          part += f", {beyond} beyond the study's margin ±{margin:.3g}"
      parts.append(part)
    scope = (
      "every lr, seed and dtype" if len({s.dtype for s in chosen}) > 1 else "every lr and seed"
    )
    if parts:
      lines.append(f"Swap {label} ({networks} networks: {scope}): " + "; ".join(parts) + ".")
  return lines


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


def headline_rows(
  design: Design, outcomes: Sequence[Outcome], falling: dict[str, dict] | None = None
) -> list[dict]:
  """The study's rows of ``results/README.md`` (:mod:`gelujax.study.overview`): one per
  pre-registered family (forms or control, dtype, metric), with each comparison's paired shift
  [interval], the family's tally (the † among its equivalents) and its caveats: where the
  control was not found different from gelu, and a final metric still falling."""
  falling = falling or {}
  gaps = control_gaps(outcomes)
  calibrated = calibrations(design, outcomes)
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
    unmarked = sum(uncalibrated(o, calibrated) for o in chosen)
    if unmarked:
      caveats.append(f"{unmarked} {UNCALIBRATED_MARK} ({uncalibrated_words()})")
    if key in falling:
      fact = falling[key]
      caveats.append(
        f"the loss still falls {100 * fact['low']:.1f}% to {100 * fact['high']:.1f}% over the "
        f"last fifth of training: the margin is {fact['epochs_low']:.1f} to "
        f"{fact['epochs_high']:.1f} epochs of that fall"
      )
    if not control:
      caveats += [c for c in (margin_caveat(metric),) if c]
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
        "kind": "family",
        "where": f"{design.name}, {kind}: {key}, {dtype}",
        "claim": f"{claim}: {metric.label}, {dtype}, lrs {numbers.lrs(design.learning_rates)}",
        "paper": "–",
        "ours": "<br>".join(
          f"{pair_words(o)}, lr {o.comparison.learning_rate:g}: {shift_words(o)} ({o.verdict}"
          + (" †" if daggered(o, gaps) else "")
          + (f" {UNCALIBRATED_MARK}" if uncalibrated(o, calibrated) else "")
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
  calibrated = calibrations(design, outcomes)
  chosen = [o for o in outcomes if not o.comparison.control]
  found = [o for o in chosen if o.verdict == EQUIVALENT]
  survivors = [o for o in found if not daggered(o, gaps) and not uncalibrated(o, calibrated)]
  unmarked = sum(uncalibrated(o, calibrated) for o in found)
  on = {o.comparison.metric.key: o.comparison.metric for o in survivors}
  where = "; ".join(
    f"{sum(o.comparison.metric.key == key for o in survivors)} on {m.label}"
    + (", a loss still falling at the last epoch" if key in falling else "")
    for key, m in on.items()
  )
  return (
    f"gelujax's own study of the GELU forms (`{design.name}`): {len(chosen)} pre-registered "
    f"comparisons of the forms, "
    f"{count_words(tally(chosen, False), sum(daggered(o, gaps) for o in found), unmarked)}; "
    f"{len(survivors)} of the {len(found)} *equivalent* calibrated (by the control within "
    f"{calibration.CONTROL_MARGINS:g} margins, or by their own sensitivity)"
    + (f": {where}" if where else "")
    + (f"; {unmarked} control uncalibrated ({UNCALIBRATED_MARK})" if unmarked else "")
    + "."
  )


def design_lines(design: Design) -> list[str]:
  """The design, as :data:`gelujax.study.forms.DESIGN` fixes it."""
  n = len(design.seeds)
  families = {}
  for c in forms.comparisons(design):
    families.setdefault(c.family, 0)
    families[c.family] += 1
  floors = []
  for (kind, dtype, key), size in sorted(families.items()):
    strictest = design.alpha / size
    equivalent, beyond = 2 * 0.5**n, 4 * 0.5**n  # the smallest p of each decision
    if equivalent > strictest or beyond > strictest:
      floors.append(f"{kind}/{dtype}/{key} (smallest p {equivalent:.3g}, strictest level "
                    f"{strictest:.3g})")  # fmt: skip
  sizes = " and ".join(
    f"{n} tests in each {kind} family"
    for kind, n in sorted({(k[0], size) for k, size in families.items()})
  )
  lines = [
    f"Fixed in `gelujax/study/forms.py` (`{registry.variable(design)}`, {design.date}) before any "
    "of its runs was "
    "trained:",
    "",
    f"- Task: the GELU paper's Fig. 2 MLP (`--task={design.task}`) on {design.dataset}, "
    f"dropout {design.dropout:g}, the paper's batch size and optimizer, {design.epochs} epochs: "
    f"{design.epochs_reason}.",
    f"- Arms: {', '.join(design.arms)} ({design.control_reason}).",
    f"- Every arm at every lr ({numbers.lrs(design.learning_rates)}), with the same {n} seeds "
    "(one seed: one initial draw and one batch order in every arm, so every comparison is "
    "paired by seed), "
    f"computing in {' and '.join(design.dtypes)} (parameters, optimizer state and losses are "
    "float32 either way).",
    f"- Compared: each pair of forms (later minus earlier) and {design.control} − gelu, at "
    "each lr and in "
    "each dtype, on:",
  ]
  for m in design.metrics:
    margin = m.amount(f"±{m.shown(m.margin):.3g}")
    lines.append(f"  - {m.label} (`{m.key}`), margin {margin}: {m.reason}.")
  lines += [
    "- Tests: the paired shift is the Hodges–Lehmann median of the Walsh averages of the "
    f"per-seed differences, with its exact {100 * stats.CONFIDENCE:g}% interval; the "
    "equivalence test is two one-sided exact signed-rank tests of the differences moved by the "
    "margin (TOST), the beyond-the-margin test the one-sided one in the other direction, "
    "doubled; a comparison's p is twice the smaller of the two, so either decision is made at "
    "the level of one test. Holm's correction runs within each family: (forms or control, "
    f"dtype, metric), {sizes}, at level {design.alpha:g}.",
    "- Verdicts: *equivalent* (the shift lies within the margin), *different* (beyond it, with "
    "its direction) where the Holm-adjusted p is below the level; else *inconclusive*, with "
    "the way the shift leans and the pairs that would decide it with 80% power (a normal "
    "approximation, taking the observed shift as the true one). The two-sided signed-rank p "
    "of a zero shift is shown beside it, uncorrected and descriptive.",
    f"- The best epoch: {design.tie_rule}.",
  ]
  if design.seeds_reason:
    lines.insert(5, f"- Seeds: {design.seeds_reason}.")
  if design.swaps:
    lines.append(
      "- Swap at inference (exploratory, no verdicts): every network, restored after its last "
      "epoch, evaluated on the test split with each other form in its own dtype, and every "
      "float32 network in bfloat16; the change (swapped minus its own evaluation) per network, "
      "its paired shift and exact interval."
    )
  if floors:
    lines.append(f"- With {n} pairs these families cannot reach their strictest level: "
                 f"{'; '.join(floors)}.")  # fmt: skip
  else:
    lines.append(
      f"- With {n} pairs every decision can reach the strictest level of its family (the "
      f"smallest p: {2 * 0.5**n:.3g} for equivalence, {4 * 0.5**n:.3g} beyond the margin)."
    )
  return lines


def training_lines(design: Design, out: Path, root: Path, project: bool = True) -> list[str]:
  lines = provenance.provenance_lines(out, "grid")
  lines.append("")
  lines.append(
    f"Re-render from these files alone: `{readme.command_name(project)} --task={design.name} "
    f"--out={grids.repo_relative(out, root)} --render`."
  )
  return lines


def limits(design: Design) -> str:
  """What the result does not say."""
  return f"What this does not say: {'; '.join(limit_parts(design))}."


def limit_parts(design: Design) -> list[str]:
  """What the result does not say, item by item (the README's line, and each forms row's
  caveats in the overview)."""
  parts = [
    "one data set (Fashion-MNIST), one architecture (the paper's 8-layer MLP) and one "
    f"optimizer; {design.epochs} epochs, not the paper's 50; no dropout",
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


def title(design: Design) -> str:
  return (
    f"Which GELU? The forms trained{' and swapped' * design.swaps} on {design.dataset} "
    f"({', '.join(design.forms)}; {design.control} as the control; {len(design.seeds)} paired "
    f"seeds, lrs {numbers.lrs(design.learning_rates)}, "
    f"{' and '.join(design.dtypes)}, {design.epochs} epochs)"
  )


def write_result(design: Design, *, out: Path, root: Path, project: bool = True) -> Path:
  """Writes ``out``'s README.md, table.md, figure and summary.json; returns ``out``; and the
  project's overview where ``out`` is under its results/ (:func:`reproduce`)."""
  finished = forms.finished_runs(design, out)  # Each grid read once, for every table.
  outcomes, missing = forms.analyse(design, finished)
  swaps = read_swaps(design, out)
  falling = forms.still_falling(design, finished)
  judged, swapped = findings(design, outcomes, missing, falling), swap_findings(design, swaps)
  close = closeness_lines(design, outcomes, finished) if not missing else []
  found = judged + close + swapped
  corrected = correction_lines(design, outcomes, finished) if not missing else []
  if outcomes:
    draw_figure(design, outcomes, out / FIGURE)
  table = ["# Every comparison", "", *full_table(outcomes), "", "# Each arm", ""]
  for metric in design.metrics:
    table += [f"## {metric.label}", "", *arm_table(design, finished, metric), ""]
  (out / "table.md").write_text("\n".join(table) + "\n")
  lines = [
    f"# {title(design)}",
    "",
    "Do the GELU forms train differently, and can a network trained with one be run with "
    "another? `gelu` is the exact erf form (PyTorch's and TensorFlow's default), `gelu_tanh` "
    "the tanh approximation (`jax.nn.gelu`'s and Flax's default, the GELU paper's), "
    "`gelu_sigmoid` x·σ(1.702x).",
    "",
    "## Findings",
    "",
    *[f"- {line}" for line in found],
    "",
    limits(design),
    "",
    *(["## Corrections", "", *corrected, ""] if corrected else []),
    "## Design",
    "",
    *design_lines(design),
    "",
    "## Verdicts",
    "",
    f"Each cell: the verdict, then the paired shift [exact {100 * stats.CONFIDENCE:g}% "
    "interval]. † marks an *equivalent* where the control was not found different either; "
    f"{UNCALIBRATED_MARK} one where {uncalibrated_words()} (`gelujax.study.calibration`).",
  ]
  for metric in design.metrics:
    lines += ["", f"### {metric.label}", "", *verdict_table(design, outcomes, metric)]
  if outcomes:
    lines += ["", f"![paired shifts]({FIGURE})"]
  lines += [""]
  if design.swaps:
    lines += ["## Swapped at inference", ""]
    for key, label, scale in SWAP_KEYS:
      lines += [f"### Change in {label}", "", *swap_table(design, swaps, key, scale), ""]
  lines += ["## Training", "", *training_lines(design, out, root, project), ""]
  lines += ["All numbers: `table.md`."]
  (out / "README.md").write_text("\n".join(lines) + "\n")
  workdirs.write_json(
    out / "summary.json",
    {
      "study": design.name,
      "title": title(design),
      "missing": list(missing),
      # The rows of results/README.md and the line of the top-level README's summary.
      "headline": headline_rows(design, outcomes, falling),
      "headline_summary": (
        f"{title(design)}: {judged[0]}" if missing else headline_summary(design, outcomes, falling)
      ),
      "outcomes": [dataclasses.asdict(o) for o in outcomes],
    },
  )
  if project and out.resolve().is_relative_to((root / "results").resolve()):
    overview.write_results_overview(root)
  return out


def reproduce(
  design: Design,
  *,
  out: Path,
  root: Path,
  data_dir: str | None = None,
  train: bool = True,
  command: str = f"python experiments/reproduce.py --task={forms.TASK}",
  project: bool = True,
) -> Path:
  """Trains every grid of the design that is not finished (resuming partial ones), evaluates
  each finished grid's swaps, and writes the result into ``out``; ``train=False`` trains and
  evaluates nothing and renders from the files already there. Training records ``command``
  and the code's revision (`gelujax.study.provenance.record_provenance`). ``root`` and
  ``project`` as :func:`gelujax.study.reproduce` takes them: a user's study
  (``project=False``) leaves the project's overview alone."""
  provenance.train_or_check(
    design.name, lambda: forms.make_grids(design, out), seeds=design.seeds, out=out, root=root,
    data_dir=data_dir, train=train, command=command,
    after=lambda grid: (
      design.swaps and forms.evaluate_swaps(design, grid, out=out, data_dir=data_dir)
    ),
  )  # fmt: skip
  return write_result(design, out=out, root=root, project=project)
