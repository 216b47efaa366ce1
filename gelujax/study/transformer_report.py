"""The README, table and summary of the transformer study (:mod:`gelujax.study.transformer`),
written from its runs' files, its kept wrong-form rows and its pilot's numbers alone: every
verdict, direction, count, margin and seed count is derived here or by the design's rule, none
typed by hand; while an arm is not finished, no verdict is given. :func:`reproduce` is the study
end to end: its grids trained, their wrong forms evaluated, then the result written here."""

from __future__ import annotations

import collections
import dataclasses
import math
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from gelujax import workdir as workdirs
from gelujax.study import (
  calibration,
  confirm_report,
  corrections,
  forms,
  forms_report,
  grids,
  judge,
  numbers,
  overview,
  power,
  provenance,
  readme,
  registry,
  runs,
  stats,
  transformer,
  wrong_form,
)
from gelujax.study.transformer import NOT_ESTABLISHED, SUPPORTED, Design, Measure, Result
from gelujax.study.verdicts import INCONCLUSIVE, REFUTED

ERROR_KEY = transformer.ERROR.key

FAMILY_KIND = "family"  # a study's rows of results/README.md (`gelujax.study.overview`)
BFLOAT16_SPACING = 2.0**-7  # bfloat16's spacing between 1 and 2 (8 significant bits)


# An *equivalent* whose control does not calibrate it, nor its own sensitivity (as reported).
UNCALIBRATED = f"equivalent (same seeds), {calibration.UNCALIBRATED}"


@dataclasses.dataclass(frozen=True)
class Check:
  """A forms comparison's closeness and calibration (`gelujax.study.calibration`).

  Attributes:
    closeness: how near its two arms' networks stay, seed by seed.
    control_margins: its metric's control gap (control − gelu, observed), in margins.
    sensitivity: what its own paired differences detect (None: not an *equivalent*, or the
      control calibrates it).
    status: for an *equivalent*: calibrated by the control, by its own sensitivity, or not.
  """

  closeness: calibration.Closeness
  control_margins: float
  sensitivity: calibration.Sensitivity | None
  status: str

  def to_json(self) -> dict[str, Any]:
    return {
      "closeness": self.closeness.to_json(),
      "control_margins": self.control_margins,
      "sensitivity": None if self.sensitivity is None else self.sensitivity.to_json(),
      "status": self.status,
    }


@dataclasses.dataclass(frozen=True)
class Checked(Result):
  """A :class:`gelujax.study.transformer.Result` with each forms comparison's :class:`Check`
  (key: first, second, measure key): an *equivalent* that neither its control nor its own
  sensitivity calibrates is reported as :data:`UNCALIBRATED`."""

  checks: Mapping[tuple[str, str, str], Check] = dataclasses.field(default_factory=dict)

  def check(self, o: Any) -> Check | None:
    c = o.comparison
    return self.checks.get((c.first, c.second, c.metric.key))

  def reported(self, o: forms.Outcome) -> str:
    found = super().reported(o)
    check = self.check(o)
    if found == judge.EQUIVALENT and check and check.status == calibration.UNCALIBRATED:
      return UNCALIBRATED
    return found


def reported_words(result: Result, o: Any) -> str:
  """A forms verdict as reported (:meth:`Checked.reported`), an *equivalent* with what
  calibrates it: ``"equivalent (same seeds), calibrated by its own sensitivity"``."""
  found = result.reported(o)
  check = result.check(o) if isinstance(result, Checked) else None
  if found == judge.EQUIVALENT and check is not None and not o.comparison.control:
    return f"{found} (same seeds), {check.status}"
  return found


def checked(design: Design, result: Result, finished: Mapping[str, runs.Run]) -> Checked:
  """``result`` with each forms comparison's closeness (its arms' values as compared, and their
  best epochs) and, for an *equivalent*, its calibration: by its metric's control where that
  was found *different* within `calibration.CONTROL_MARGINS` margins, else by the sensitivity
  of its own paired differences at its family's strictest level."""
  fields = {f.name: getattr(result, f.name) for f in dataclasses.fields(Result)}
  if result.missing:
    return Checked(**fields)
  checks = {}
  for measure in design.measures:
    metric = design.metric(measure)
    chosen = [o for o in result.forms if o.comparison.metric.key == measure.key]
    control = next(o for o in chosen if o.comparison.control)
    forms_only = [o for o in chosen if not o.comparison.control]
    gap = control.shift / metric.margin
    control_calibrates = calibration.control_calibrates(
      control.verdict, control.shift, metric.margin
    )
    for o in forms_only:
      c = o.comparison
      values, epochs = [], []
      for arm in (c.first, c.second):
        run = finished[arm]
        found = transformer.arm_values(design, arm, run)[measure.key]
        values.append(transformer.as_compared(metric, found))
        members = runs.lr_members(run, design.learning_rates[arm])
        epochs.append({m["seed"]: m["best_epoch"] for m in members})
      closeness = calibration.closeness(*values, *epochs)
      sensitivity = None
      if o.verdict == judge.EQUIVALENT and not control_calibrates:
        level = design.alpha / len(forms_only)
        sensitivity = calibration.sensitivity(o.differences, metric.margin, level)
      status = calibration.status(control_calibrates, sensitivity)
      checks[(c.first, c.second, measure.key)] = Check(closeness, gap, sensitivity, status)
  return Checked(**fields, checks=checks)


def effect_words(design: Design, measure: Measure, shift: float, low: float, high: float) -> str:
  """A paired shift and its interval as compared: ``"+12 images [+3, +20] (+0.12 points
  [...])"`` for a count of examples, ``"+0.0123 nats [...]"`` for a loss."""
  if measure.whole:  # Counts and half counts: a digit more than the split's size has.
    digits = len(str(design.examples)) + 1
    return confirm_report.shift_words(design, shift, low, high, digits=digits)
  shift, low, high = (numbers.signed(v) for v in (shift, low, high))
  return f"{shift} nats [{low}, {high}]"


def value_words(design: Design, measure: Measure, value: float) -> str:
  """A value as compared, as shown: a count of examples in percent of the split, a loss."""
  if measure.whole:
    return numbers.percent(value, design.examples)
  return numbers.fixed(value, places=4)


def margin_words(design: Design, measure: Measure) -> str:
  """``"±20 images (0.2 points)"``, ``"±0.01 nats"``."""
  margin = design.margins[measure.key]
  if measure.whole:
    return f"±{margin * design.examples:.4g} {design.unit} ({100 * margin:.3g} points)"
  return f"±{margin:g} nats"


def lrs_words(design: Design, first: str, second: str) -> str:
  return numbers.lrs(design.learning_rates[arm] for arm in (first, second))


def title(design: Design) -> str:
  seeds = f"{len(design.seeds)} fresh paired seeds" if design.seeds else "fresh paired seeds"
  return (
    f"Feed-forward activations in a transformer: {design.task} on {design.dataset}, "
    f"{len(design.arms)} arms ({design.control} the control) on {seeds}, each at its pilot's "
    f"lr, {design.epochs} epochs"
  )


# ------------------------------------------------------------------------------- verdicts


def ranking_table(design: Design, result: Result, measure: Measure, command: str) -> list[str]:
  """The ranking family on one measure: a row per hypothesis."""
  lines = [
    f"| # | claim | lrs | median first vs second ({'%' if measure.whole else 'nats'}) | "
    "paired shift [exact CI] | n | signed-rank p | Holm p | verdict |",
    "|---|---|---|---|---|---|---|---|---|",
  ]
  for o in result.ranking:
    h = o.hypothesis
    if h.metric != measure.key:
      continue
    cells = ["–"] * 5
    if o.paired is not None:
      c = o.paired
      cells = [
        f"{value_words(design, measure, o.medians[0])} vs "
        f"{value_words(design, measure, o.medians[1])}",
        f"{effect_words(design, measure, c.shift, c.low, c.high)}, {100 * c.confidence:.1f}%",
        str(len(c.seeds)),
        f"{o.p:.2g}",
        f"{o.holm:.2g}",
      ]
    lines.append(
      f"| {o.number} | {h.claim()} | {lrs_words(design, h.gelu, h.baseline)} | "
      + " | ".join(cells)
      + f" | {confirm_report.verdict_words(o, command)} |"
    )
  return lines


def forms_verdict_words(design: Design, result: Result, o: Any, measure: Measure) -> str:
  """A forms (or control) verdict as the study reports it: the control's gate applied, and a
  test the seeds left short of power marked."""
  reported = result.reported(o)
  check = result.check(o) if isinstance(result, Checked) else None
  if reported == NOT_ESTABLISHED:
    words = f"equivalent, **{NOT_ESTABLISHED}** (the control was not found different)"
  elif reported == UNCALIBRATED:
    words = f"equivalent (same seeds), **{calibration.UNCALIBRATED}**"
  elif reported == judge.EQUIVALENT and check is not None and not o.comparison.control:
    words = f"**equivalent** (same seeds), {check.status}"
  else:
    words = forms_report.verdict_words(o)
  c = o.comparison
  if not c.control and o.seeds:
    words += f"; zero-shift p {o.p_zero:.2g}"
  passed = o.verdict == judge.EQUIVALENT
  short = transformer.short_of_power(design, c.first, c.second, measure)
  if not c.control and not passed and short:
    words += "; could not have passed with the design's power (see Design)"
  return words


def forms_table(
  design: Design, result: Result, measure: Measure, control: bool = False
) -> list[str]:
  """The forms family (or the control) on one measure: a row per comparison."""
  lines = [
    "| comparison | lrs | margin | paired shift [exact CI] | n | p (TOST) | p (beyond) | p | "
    "Holm p | verdict |",
    "|---|---|---|---|---|---|---|---|---|---|",
  ]
  for o in result.forms:
    c = o.comparison
    if c.metric.key != measure.key or c.control != control:
      continue
    e = o.equivalence
    shift = "no pairs"
    if o.seeds:
      low, high, level = o.interval
      shift = f"{effect_words(design, measure, o.shift, low, high)}, {100 * level:.1f}%"
    lines.append(
      f"| {c.first} − {c.second} | {lrs_words(design, c.first, c.second)} | "
      f"{margin_words(design, measure)} | {shift} | {len(o.seeds)} | {e.p_equivalent:.3g} | "
      f"{e.p_beyond:.3g} | {e.p:.3g} | {o.p_holm:.3g} | "
      f"{forms_verdict_words(design, result, o, measure)} |"
    )
  return lines


def amount_words(design: Design, measure: Measure, value: float) -> str:
  """A value as compared, unsigned, in its unit: ``"12.3 images"``, ``"0.0012 nats"``."""
  unit = design.unit if measure.whole else "nats"
  return f"{numbers.number(value, digits=3)} {unit}"


def check_lines(design: Design, result: Result, measure: Measure) -> list[str]:
  """Each forms comparison's closeness (how near its two arms' networks stay) and, for an
  *equivalent*, what calibrates it (`gelujax.study.calibration`)."""
  if not isinstance(result, Checked) or not result.checks:
    return []
  lines = []
  for o in result.forms:
    c = o.comparison
    check = result.check(o)
    if c.control or c.metric.key != measure.key or check is None:
      continue
    k = check.closeness
    same = (
      f", the same best epoch in {k.same_epoch} of {k.pairs} pairs"
      if k.same_epoch is not None
      else ""
    )
    line = (
      f"- {c.first} − {c.second}: per-seed correlation of the two arms "
      f"{k.correlation:+.2f}{same}; SD across seeds {c.first} "
      f"{amount_words(design, measure, k.sd_first)}, {c.second} "
      f"{amount_words(design, measure, k.sd_second)}; paired SD "
      f"{amount_words(design, measure, k.sd_paired)}."
    )
    if k.nearly_one:
      line += (
        f" Its pairs stay nearly one network (correlation at least {calibration.NEARLY_ONE:g}): "
        "its verdict is a same-seed statement, one initial draw and one batch order trained "
        "with either form, not a statement about two networks drawn apart."
      )
    s = check.sensitivity
    if s is not None:
      line += (
        f" Its own sensitivity ({s.resamples} resamples of its paired differences centred at "
        f"zero, each judged at {s.level:.3g}): *equivalent* at a shift of 0 in "
        f"{100 * s.equivalent_at_zero:.1f}%, *different* at 1 margin in "
        f"{100 * s.different[1]:.1f}% and at 2 margins in {100 * s.different[2]:.1f}%"
        + (": it calibrates." if s.calibrates else ": it does not calibrate.")
      )
    if o.verdict == judge.EQUIVALENT:
      line += f" *Equivalent*: {check.status}."
    lines.append(line)
  if not lines:
    return []
  control = next(
    o for o in result.forms if o.comparison.control and o.comparison.metric.key == measure.key
  )
  gap = control.shift / design.metric(measure).margin
  return [
    f"Closeness and calibration (`gelujax.study.calibration`): the control ({design.control} − "
    f"gelu) was found {control.verdict} at {numbers.signed(gap, digits=3)} margins; it "
    f"calibrates an *equivalent* only where found *different* within "
    f"{calibration.CONTROL_MARGINS:g} margins, else an *equivalent* is calibrated where its "
    f"own paired differences find a true {calibration.SHIFT_MARGINS}-margin shift *different* "
    f"in at least {100 * calibration.CALIBRATED_RATE:g}% of resamples.",
    "",
    *lines,
  ]


def gate_line(design: Design, result: Result) -> str:
  """Whether the control passed, per measure, and what follows for the forms' *equivalent*."""
  found = [o for o in result.forms if o.comparison.control]
  parts = ", ".join(f"{o.comparison.metric.key}: {o.verdict}" for o in found)
  if result.control_passed():
    equivalents = [
      o for o in result.forms if not o.comparison.control and o.verdict == judge.EQUIVALENT
    ]
    statuses = count(
      result.check(o).status
      for o in equivalents
      if isinstance(result, Checked) and result.check(o) is not None
    )
    calibrated = "; ".join(f"{n}: {status}" for status, n in statuses.items())
    return (
      f"The control ({design.control} − gelu) was found *different* on every metric ({parts}): "
      "the design can tell a linear feed-forward from gelu. That alone calibrates no "
      f"*equivalent* (`gelujax.study.calibration`): of the {len(equivalents)} *equivalent*, "
      + (calibrated or "none checked")
      + "."
    )
  equivalents = sum(
    result.reported(o) == NOT_ESTABLISHED for o in result.forms if not o.comparison.control
  )
  return (
    f"The control ({design.control} − gelu) was not found *different* on every metric "
    f"({parts}): the design could not tell a linear feed-forward from gelu there, so each of "
    f"the forms' {equivalents} *equivalent* verdicts is reported as *{NOT_ESTABLISHED}*."
  )


def tally(result: Result) -> dict[str, dict[str, int]]:
  """family -> verdict -> how many (forms verdicts as reported, after the gate)."""
  found = {transformer.RANKING: count(o.verdict for o in result.ranking)}
  for family, control in ((transformer.FORMS, False), (transformer.CONTROL, True)):
    found[family] = count(
      reported_words(result, o) for o in result.forms if o.comparison.control == control
    )
  return found


def count(verdicts: Iterable[str]) -> dict[str, int]:
  """verdict -> how many, in the order first met."""
  return dict(collections.Counter(verdicts))


def tally_words(counts: dict[str, int]) -> str:
  return ", ".join(f"{n} {verdict}" for verdict, n in counts.items())


def verdict_lines(design: Design, result: Result, command: str) -> list[str]:
  """The verdicts, measure by measure and family by family; while an arm is pending, which, and
  no verdict."""
  if result.missing:
    return [
      f"Pending: {', '.join(result.missing)} not trained (`{command}` trains them). No verdict "
      "is given before every arm is trained: Holm's correction runs over whole families."
    ]
  lines = [
    "Each family is corrected by Holm's method within itself and its metric. Ranking: "
    f"*{SUPPORTED}* or *{REFUTED}* at a Holm p below {design.alpha:g} (the signed-rank "
    "statistic's side), else *inconclusive*. Forms and control: *equivalent* or *different* at "
    f"a Holm p below {design.alpha:g}, else *inconclusive*. Shifts are first minus second, "
    f"seed by seed, with their exact interval (at least {100 * stats.CONFIDENCE:g}%).",
  ]
  for measure in design.measures:
    lines += [
      "",
      f"### {measure.label.capitalize()}",
      "",
      "Ranking:",
      "",
      *ranking_table(design, result, measure, command),
      "",
      "Forms:",
      "",
      *forms_table(design, result, measure),
      "",
      *(lambda found: [*found, ""] if found else [])(check_lines(design, result, measure)),
      "Control:",
      "",
      *forms_table(design, result, measure, control=True),
    ]
  counts = tally(result)
  lines += [
    "",
    gate_line(design, result),
    "",
    "In all: " + "; ".join(f"{family}: {tally_words(n)}" for family, n in counts.items()) + ".",
  ]
  return lines


# ------------------------------------------------------------------------------- each arm


def arm_lines(design: Design, finished: dict[str, runs.Run], result: Result) -> list[str]:
  """Each arm's lr, members, diverged members, median and range of each measure, and the
  members whose best epoch is the last."""
  heads = " | ".join(f"{m.label}{' (%)' * m.whole}: median [min–max]" for m in design.measures)
  lines = [
    f"| arm | lr | members | diverged | {heads} | best epoch at the last ({design.epochs}) |",
    "|---|---|---|---|" + "---|" * len(design.measures) + "---|",
  ]
  for arm in design.arms:
    lr = f"{design.learning_rates[arm]:g}"
    if arm not in finished:
      lines.append(f"| {arm} | {lr} | pending |" + " – |" * (len(design.measures) + 2))
      continue
    values = transformer.arm_values(design, arm, finished[arm])
    cells = []
    for m in design.measures:
      metric = design.metric(m)
      x = [v for v in transformer.as_compared(metric, values[m.key]).values() if math.isfinite(v)]
      cells.append(median_range(x, lambda v, m=m: value_words(design, m, v)))
    first = values[design.measures[0].key]
    diverged = sum(not math.isfinite(v) for v in first.values())
    last = result.at_last.get(arm, [])
    seeds = f" (seeds {numbers.seeds(last)})" if last else ""
    lines.append(
      f"| {arm} | {lr} | {len(first)} | {diverged} | {' | '.join(cells)} | {len(last)}{seeds} |"
    )
  return lines


def seed_table(design: Design, finished: dict[str, runs.Run]) -> list[str]:
  """Every seed's compared value per arm and measure (the values the tests compare)."""
  lines = []
  for m in design.measures:
    metric = design.metric(m)
    arms = [a for a in design.arms if a in finished]
    values = {
      a: transformer.as_compared(metric, transformer.arm_values(design, a, finished[a])[m.key])
      for a in arms
    }
    unit = design.unit + " wrong" if m.whole else "nats"
    lines += [
      f"## {m.label} ({unit})",
      "",
      "| seed | " + " | ".join(arms) + " |",
      "|---|" + "---|" * len(arms),
    ]
    for seed in design.seeds:
      cells = []
      for a in arms:
        v = values[a].get(seed)
        shown = f"{v:.0f}" if m.whole else f"{v:.5f}"
        cells.append("–" if v is None else ("diverged" if math.isnan(v) else shown))
      lines.append(f"| {seed} | " + " | ".join(cells) + " |")
    lines.append("")
  return lines


# -------------------------------------------------------------------------------- beside


def beside_rows(design: Design, root: Path) -> list[tuple[str, int, list[float]]] | None:
  """The committed result ``design.beside``'s runs: (activation, seeds, each member's test error
  at its best-validation epoch, diverged members left out); None where it is not there."""
  folder = root / design.beside
  if not (folder / workdirs.SUMMARY_FILE).exists():
    return None
  rows = []
  for path in sorted((folder / "runs").iterdir()):
    if (path / workdirs.SUMMARY_FILE).exists():
      run = runs.load_run(path)
      x = [runs.member_value(m, ERROR_KEY) for m in run.members if not m["diverged"]]
      rows.append((run.activation, len(run.members), [v for v in x if math.isfinite(v)]))
  return rows


def paper_medians(design: Design, root: Path) -> dict[str, float]:
  """activation -> the paper's median test error, as ``design.beside``'s summary quotes them."""
  found: dict[str, float] = {}
  summary = workdirs.read_json(root / design.beside / workdirs.SUMMARY_FILE)
  for outcome in summary.get("outcomes", []):
    h = outcome["hypothesis"]
    for name, value in zip((h["gelu"], h["baseline"]), h["paper"], strict=True):
      if value is not None and h["metric"] == ERROR_KEY:
        found[name] = value
  return found


def median_range(x: list[float], words: Callable[[float], str]) -> str:
  """``x``'s median [min–max], each in ``words``; "–" for none."""
  return f"{words(float(np.median(x)))} [{words(min(x))}–{words(max(x))}]" if x else "–"


def beside_lines(design: Design, finished: dict[str, runs.Run], out: Path, root: Path) -> list[str]:
  """The arms' test error beside ``design.beside``'s runs and the paper's medians: a table, and
  the lowest median of each, with no test (other seeds, other models)."""
  found = beside_rows(design, root)
  if found is None:
    return [f"`{design.beside}` is not in this checkout: nothing to set beside."]
  link = Path(os.path.relpath(root / design.beside, out)).as_posix()
  lines = [
    f"Test error at the best-validation epoch of this study's arms, of {design.beside_words} "
    f"([`{design.beside}`]({link}/README.md)), and the paper's medians "
    "(which its summary quotes; the paper's tagger read pretrained embeddings). Other models on "
    "other seeds: set side by side, not tested.",
    "",
    "| model | activation | seeds | test error (%): median [min–max] |",
    "|---|---|---|---|",
  ]
  lowest: dict[str, tuple[float, str]] = {}
  ours = []
  for arm in design.arms:
    if arm in finished:
      values = transformer.arm_values(design, arm, finished[arm])[ERROR_KEY]
      x = [v for v in values.values() if math.isfinite(v)]
      ours.append((f"this study's {design.task}", arm, len(values), x))
  theirs = [(design.beside_words, a, n, x) for a, n, x in found]
  paper = [("the paper", a, None, [v]) for a, v in paper_medians(design, root).items()]
  for model, activation, seeds, x in [*ours, *theirs, *paper]:
    n = "–" if seeds is None else str(seeds)
    shown = f"{100 * x[0]:.2f}" if seeds is None else median_range(x, lambda v: f"{100 * v:.2f}")
    lines.append(f"| {model} | {activation} | {n} | {shown} |")
    if x and (model not in lowest or float(np.median(x)) < lowest[model][0]):
      lowest[model] = (float(np.median(x)), activation)
  if lowest:
    lines += [
      "",
      "Lowest median: "
      + "; ".join(f"{m}, {a} {100 * v:.2f}%" for m, (v, a) in lowest.items())
      + ".",
    ]
  return lines


# ---------------------------------------------------------------------------- wrong form


def form_gap() -> tuple[float, float]:
  """The largest |gelu(x) − gelu_tanh(x)| over x in [-8, 8] (float64, a grid of 1e-4), and
  where."""
  x = np.linspace(-8.0, 8.0, 160_001)
  exact = 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))
  tanh = 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
  gap = np.abs(exact - tanh)
  return float(gap.max()), float(abs(x[gap.argmax()]))


def interval_words(s: wrong_form.StatisticSummary, scale: float) -> str:
  """A statistic's paired centre and exact interval, times ``scale``."""
  if not s.n:
    return numbers.DASH
  centre, low, high = (numbers.signed(v, scale=scale) for v in (s.centre, s.low, s.high))
  return f"{centre} [{low}, {high}]"


def wrong_form_lines(design: Design, rows: dict[str, list[wrong_form.WrongForm]]) -> list[str]:
  """Every kept wrong-form row: per trained arm, form run with and dtype, the paired centre of
  each change over the networks with its exact interval."""
  lines = [
    "| trained with | run with | dtype | networks | test error change (points): centre [CI] | "
    "test loss change (nats): centre [CI] | largest logit change: median (max) | top-1 "
    "agreement (%): median (min) |",
    "|---|---|---|---|---|---|---|---|",
  ]
  for arm in design.wrong_forms:
    if arm not in rows:
      lines.append(f"| {arm} | pending | – | – | – | – | – | – |")
      continue
    for r in rows[arm]:
      error, loss = r.statistic("error_change"), r.statistic("loss_change")
      largest, agreement = r.statistic("largest_change"), r.statistic("agreement")
      kept = [n for n in r.networks if not n.diverged]
      most = max((n.largest_change for n in kept), default=math.nan)
      least = min((n.agreement for n in kept), default=math.nan)
      lines.append(
        f"| {r.trained} | {r.run_with} | {r.dtype} | {error.n} | "
        f"{interval_words(error, 100.0)} | {interval_words(loss, 1.0)} | "
        f"{largest.median:.3g} ({most:.3g}) | {100 * agreement.median:.2f} ({100 * least:.2f}) |"
      )
  return lines


def bfloat16_words() -> str:
  """Why the bfloat16 rows of gelu against gelu_tanh measure bfloat16's rounding."""
  gap, where = form_gap()
  return (
    f"In float32 a row measures the form. In bfloat16 the rows of gelu against gelu_tanh (and "
    f"back) measure bfloat16's rounding more than the form: the two forms differ by at most "
    f"{gap:.2g} (at x = ±{where:.2f}), while bfloat16 rounds values between 1 and 2 to steps of "
    f"{BFLOAT16_SPACING:.4g}, so each network computes erf and tanh with rounding errors many "
    "times the forms' gap, and the change between them is mostly those errors "
    "(`gelujax.study.wrong_form` compares both forms in the one dtype)."
  )


# ---------------------------------------------------------------------------------- design


def pilot_condition_words(margins: float) -> str:
  """Whether the pilot's condition for taking identity as the control (its gap "many times its
  margin", read as beyond `gelujax.study.calibration.CONTROL_MARGINS` margins and above gelu)
  holds at a pilot gap of ``margins``."""
  many = margins > calibration.CONTROL_MARGINS
  return (
    "the pilot's condition for taking it as the control (a gap many times its margin: more "
    f"than {calibration.CONTROL_MARGINS:g} margins, identity above gelu) "
    + ("holds" if many else "does not hold")
  )


def sizing_lines(design: Design) -> list[str]:
  """The rule's numbers: each metric's candidate margins and the pairs each needs, the forms
  comparisons' SD bounds and power at the seeds, the ranking's detectable shifts, the control's
  pilot gap."""
  s = design.sizing
  n = len(design.seeds)
  lines = []
  for m in design.measures:
    scale = design.examples if m.whole else 1.0
    needs = ", ".join(
      f"{numbers.number(margin, m.pilot.scale, 3)} {m.pilot.unit}: {pairs}"
      + (" (chosen)" if margin == design.margins[m.key] else "")
      for margin, pairs in s.needed[m.key].items()
    )
    lines.append(
      f"- {m.label.capitalize()}: margin {margin_words(design, m)}, from the pilot's "
      f"{m.pilot.label}. Pairs the forms family needs at each candidate margin: {needs}."
    )
    for first, second in design.forms:
      spread = s.spread(first, second, m)
      margin = design.margins[m.key]
      need = transformer.pairs_for_tost(design, spread.sd_bound, margin)
      reached = transformer.tost_power(design, spread.sd_bound, margin, n)
      short = transformer.short_of_power(design, first, second, m)
      lines.append(
        f"  - {first} − {second}: the pilot's SD {numbers.number(spread.sd, m.pilot.scale, 3)} "
        f"{m.pilot.unit} ({numbers.number(spread.sd_bound, m.pilot.scale, 3)} at its bound), "
        f"{need} pairs for {100 * design.power:g}% power; {n} seeds give "
        f"{100 * reached:.0f}%" + (": short of the design's power" if short else "") + "."
      )
    level = design.alpha / len(design.ranking)
    for first, second in design.ranking:
      spread = s.spread(first, second, m)
      if spread is None:
        continue
      shift = power.detectable_shift(spread.sd_bound * scale, n, level=level)
      words = f"{shift:.3g} nats"
      if m.whole:
        words = f"{shift:.3g} {design.unit} ({100 * shift / design.examples:.3g} points)"
      lines.append(
        f"  - ranking {first} below {second}: {n} pairs detect a shift of {words} with "
        f"{100 * design.power:g}% power at the family's strictest level ({level:.3g}, "
        "two-sided), the SD at the pilot's bound; the pilot's mean difference "
        f"{numbers.signed(spread.mean, scale=m.pilot.scale)} {m.pilot.unit}."
      )
    control = s.spread(design.control, "gelu", m)
    if control is not None:
      lines.append(
        f"  - control {design.control} − gelu: the pilot's mean difference "
        f"{numbers.signed(control.mean, scale=m.pilot.scale)} {m.pilot.unit}, "
        f"{numbers.signed(control.mean / design.margins[m.key])} margins: "
        + pilot_condition_words(control.mean / design.margins[m.key])
        + "."
      )
  return lines


def design_lines(design: Design, out: Path, root: Path) -> list[str]:
  """The design as :mod:`gelujax.study.transformer` fixes it, and the numbers its rule took from
  the pilot (its README linked where it lies under ``root``, relative to ``out``)."""
  s = design.sizing
  spec = design.spec()
  lr_rows = ", ".join(f"{arm} {design.learning_rates[arm]:g}" for arm in design.arms)
  renamed = "; ".join(
    f"{arm} in `runs/{design.folder(arm)}/`" for arm in design.arms if design.folder(arm) != arm
  )
  source = f"`{s.folder}`"
  target = root / s.folder / "README.md"
  if target.exists():
    source = f"[{source}]({Path(os.path.relpath(target, out)).as_posix()})"
  lines = [
    f"Fixed in `gelujax/study/transformer.py` (`{registry.variable(design)}`, {design.date}) "
    "before any of its runs was trained; its lrs, margins and seeds taken from the pilot's "
    f"result {source} (`{s.pilot}`) by the rule fixed with it "
    "(`gelujax.study.transformer.from_pilot`):",
    "",
    f"- Task: `{design.task}` on {design.dataset} (model `{spec.model}`, batch size "
    f"{spec.batch_size}, dropout {spec.dropout:g}, {spec.optimizer}), {design.epochs} epochs: "
    f"{design.epochs_reason}. The best epoch: {design.tie_rule}.",
    f"- Arms: {', '.join(design.arms)}, one run each (`runs/<arm>/`"
    + (f"; {renamed}" if renamed else "")
    + "), every arm on the same seeds: one seed gives one initial draw, one batch order and one "
    "dropout stream whatever the activation, so each comparison is paired by seed.",
    f"- Learning rates (from the pilot): {lr_rows}: {design.lr_rule}.",
    f"- Seeds (from the pilot): {len(design.seeds)}, "
    f"{numbers.seeds(design.seeds)}: {design.seeds_rule}; the floor is {s.floor} "
    f"pairs, the cap {design.max_seeds} ({design.cap_reason}). They are {design.seeds_reason}.",
    f"- Margins (from the pilot): {design.margin_rule}. Each forms test is sized at the forms "
    f"family's strictest one-sided level {s.level:.3g} (`gelujax.study.transformer."
    "tost_level`), the SD at the pilot's one-sided "
    f"{100 * design.pilot.bound:g}% upper bound:",
    *[f"  {line}" for line in sizing_lines(design)],
    f"- Compared: {design.measures_reason}.",
    f"- Ranking family ({len(design.ranking)} a metric: "
    + "; ".join(f"{a} below {b}" for a, b in design.ranking)
    + f"): {design.ranking_reason}.",
    f"- Forms family ({len(design.forms)} a metric: "
    + "; ".join(f"{a} − {b}" for a, b in design.forms)
    + f"): {design.forms_reason}.",
    f"- Control ({design.control} − gelu, one a metric): {design.control_reason}.",
    f"- The wrong form: {design.wrong_form_reason}.",
  ]
  return lines


def short_words(design: Design, measure: Measure) -> str:
  """The forms tests on ``measure`` the seed cap left short of the design's power, with their
  power at the pilot's SD bound; ``""`` where none is."""
  n = len(design.seeds)
  short = [
    f"{first} − {second} "
    f"({100 * transformer.tost_power(design, spread.sd_bound, design.margins[measure.key], n):.0f}%"
    f" at {n} seeds)"
    for first, second in design.forms
    if transformer.short_of_power(design, first, second, measure)
    and (spread := design.sizing.spread(first, second, measure)) is not None
  ]
  if not short:
    return ""
  return (
    f"short of the design's {100 * design.power:g}% power at the pilot's SD bound: "
    + ", ".join(short)
  )


def caveat_lines(design: Design) -> list[str]:
  found = design.pilot
  return [
    f"- One small transformer on one CPU-sized task: `{design.task}`, {design.epochs} epochs, "
    "one data set. Shazeer's comparisons were made in T5's pre-training at a far larger scale; "
    "a verdict here is about this task.",
    f"- Each arm's lr was chosen from the pilot's {len(found.learning_rates)} "
    f"({', '.join(f'{lr:g}' for lr in found.learning_rates)}) on its {len(found.seeds)} selection "
    "seeds: an arm's best lr may lie elsewhere, and an ordering here holds at these lrs.",
    "- *Equivalent* is within the stated margin only"
    + (
      ", and some forms tests were short of the design's power at it (see Design)"
      if design.is_filled
      and any(
        transformer.short_of_power(design, a, b, m)
        for a, b in design.forms
        for m in design.measures
      )
      else ", a margin the budget could show"
    )
    + "; *inconclusive* is not *no difference*: the seeds were sized for the forms family, and "
    "the shifts the ranking tests detect are stated under Design.",
    "- The wrong form is measured on the networks after their last epoch, not at their "
    "best-validation epoch, and bfloat16 as XLA computes it on this CPU, which may differ from "
    "an accelerator's.",
  ]


# ----------------------------------------------------------------------------- the result


def headline_rows(design: Design, result: Result) -> list[dict[str, Any]]:
  """The study's rows of ``results/README.md``: one per family and measure (none while an arm
  is pending), each with its caveats: the control's gate, the forms tests short of power and
  what the study does not show."""
  if result.missing:
    return []
  limits = "what it does not show: " + " ".join(
    line.removeprefix("- ") for line in caveat_lines(design)
  )
  rows = []
  for m in design.measures:
    ranking = [o for o in result.ranking if o.hypothesis.metric == m.key]
    rows.append(
      {
        "kind": FAMILY_KIND,
        "where": f"{design.name}, {transformer.RANKING}: {m.key}",
        "claim": "; ".join(o.hypothesis.claim() for o in ranking) + f": {m.label}",
        "paper": "–",
        "ours": "<br>".join(
          f"{o.hypothesis.claim()}: "
          + (
            effect_words(design, m, o.paired.shift, o.paired.low, o.paired.high)
            if o.paired
            else "no pairs"
          )
          + f" ({o.verdict})"
          for o in ranking
        ),
        "verdict": tally_words(count(o.verdict for o in ranking)),
        "caveats": limits,
      }
    )
    for control in (False, True):
      chosen = [
        o
        for o in result.forms
        if o.comparison.metric.key == m.key and o.comparison.control == control
      ]
      family = transformer.CONTROL if control else transformer.FORMS
      gate = "" if control or result.control_passed() else "the control was not found different"
      short = "" if control else short_words(design, m)
      rows.append(
        {
          "kind": FAMILY_KIND,
          "where": f"{design.name}, {family}: {m.key}",
          "claim": "; ".join(f"{o.comparison.first} − {o.comparison.second}" for o in chosen)
          + f" {'beyond' if control else 'within'} {margin_words(design, m)}: {m.label}",
          "paper": "–",
          "ours": "<br>".join(
            f"{o.comparison.first} − {o.comparison.second}: "
            f"{effect_words(design, m, o.shift, *o.interval[:2])} ({reported_words(result, o)})"
            for o in chosen
          ),
          "verdict": tally_words(count(reported_words(result, o) for o in chosen)),
          "caveats": "; ".join(c for c in (gate, short, limits) if c),
        }
      )
  return rows


def headline_summary(
  design: Design, result: Result, wrong: dict[str, list[wrong_form.WrongForm]]
) -> str:
  """The study's line in the top-level README: its families' tallies, the control, the wrong
  form's first float32 row (the exact form run with the other), and what it does not show."""
  name = f"gelujax's transformer study on {design.task} (`{design.name}`)"
  if result.missing:
    return f"{name}: pending ({', '.join(result.missing)} not trained)."
  counts = tally(result)
  labels = {m.key: m.label for m in design.measures}
  decided = [
    f"{o.hypothesis.claim()} {o.verdict} on {labels[o.hypothesis.metric]}"
    for o in result.ranking
    if o.verdict != INCONCLUSIVE
  ]
  members = len(design.arms) * len(design.seeds)
  improving = sum(len(seeds) for seeds in result.at_last.values())
  text = (
    f"{name}: "
    + "; ".join(
      f"{family} {tally_words(n)}"
      + (f" ({', '.join(decided)})" if decided and family == transformer.RANKING else "")
      for family, n in counts.items()
    )
    + f"; the control {'passed' if result.control_passed() else 'failed'}."
  )
  arm, others = next(iter(design.wrong_forms.items()))
  first = next(
    (r for r in wrong.get(arm, []) if r.run_with == others[0] and r.dtype == "float32"), None
  )
  if first is not None:
    error, agreement = first.statistic("error_change"), first.statistic("agreement")
    text += (
      f" Its {first.trained} networks run with {first.run_with} in float32 (exploratory): test "
      f"error change {interval_words(error, 100.0)} points, top-1 agreement median "
      f"{100 * agreement.median:.2f}%."
    )
  return text + (
    f" It shows one small transformer on {design.task}, {design.epochs} epochs on CPUs, each arm "
    f"at one lr ({improving} of its {members} networks still at their best at the last epoch); "
    "not Shazeer's pre-training scale."
  )


def training_lines(design: Design, out: Path, root: Path, project: bool) -> list[str]:
  command = readme.command_name(project)
  lines = provenance.provenance_lines(out, when_none="- none trained yet")
  return [
    *lines,
    "",
    f"Train (or resume): `{command} --task={design.name}`. Re-render "
    f"from these files alone: `{command} --task={design.name} "
    f"--out={grids.repo_relative(out, root)} --render`.",
  ]


def design_json(design: Design) -> dict[str, Any]:
  """What the rule gave, for summary.json."""
  s = design.sizing
  return {
    "pilot": s.pilot,
    "pilot_folder": s.folder,
    "learning_rates": dict(design.learning_rates),
    "margins": dict(design.margins),
    "seeds": list(design.seeds),
    "floor": s.floor,
    "level": s.level,
    "needed": {k: [{"margin": m, "pairs": n} for m, n in v.items()] for k, v in s.needed.items()},
    "spreads": [sp.to_json() for sp in s.spreads],
  }


def write_result(design: Design, *, out: Path, root: Path, project: bool = True) -> Path:
  """Writes ``out``'s README.md, table.md and summary.json from the runs and kept wrong-form
  rows there; returns ``out``; and the project's overview where ``out`` is under its results/."""
  design.check_filled()
  finished = transformer.finished_runs(design, out)
  result = checked(design, transformer.analyse(design, finished), finished)
  wrong = transformer.read_all_wrong_forms(design, out)
  command = f"{readme.command_name(project)} --task={design.name}"
  corrected = corrections.lines(design.name, design.date)
  (out / "table.md").write_text(
    "\n".join(["# Every seed", "", *seed_table(design, finished)]) + "\n"
  )
  lines = [
    f"# {title(design)}",
    "",
    "Which feed-forward activation does a small transformer train best with, and do the two "
    "GELU forms (and their gated counterparts) train to networks as good? A pre-registered "
    f"study on `{design.task}`: its hypotheses fixed in code before its runs, each "
    "arm's lr, the margins and the seeds taken from its pilot by a stated rule.",
    "",
    "## Verdicts",
    "",
    *verdict_lines(design, result, command),
    "",
    "## Each arm",
    "",
    *arm_lines(design, finished, result),
    "",
    *(
      [
        f"## Beside {design.beside_words} (descriptive)",
        "",
        *beside_lines(design, finished, out, root),
        "",
      ]
      if design.beside
      else []
    ),
    "## The wrong form (exploratory)",
    "",
    "Each trained network run with another form than it was trained with, on the test split: "
    "the change (other form minus its own) per network, its paired Hodges–Lehmann centre over "
    "the networks with the exact interval (`gelujax.study.wrong_form`).",
    "",
    *wrong_form_lines(design, wrong),
    "",
    bfloat16_words(),
    "",
    "## What this does not show",
    "",
    *caveat_lines(design),
    "",
    *(["## Corrections", "", *corrected, ""] if corrected else []),
    "## Design",
    "",
    *design_lines(design, out, root),
    "",
    "## Training",
    "",
    *training_lines(design, out, root, project),
    "",
    "Every seed's values: `table.md`.",
  ]
  (out / "README.md").write_text("\n".join(lines) + "\n")
  workdirs.write_json(
    out / workdirs.SUMMARY_FILE,
    {
      "study": design.name,
      "title": title(design),
      "missing": list(result.missing),
      "headline": headline_rows(design, result),
      overview.LEADS: True,
      "headline_summary": headline_summary(design, result, wrong),
      "design": design_json(design),
      "control_passed": None if result.missing else result.control_passed(),
      "best_at_last_epoch": dict(result.at_last),
      "ranking": [o.to_json() for o in result.ranking],
      "outcomes": [
        {
          **dataclasses.asdict(o),
          "reported": result.reported(o),
          **({"check": check.to_json()} if (check := result.check(o)) else {}),
        }
        for o in result.forms
      ],
      "wrong_form": {arm: [r.to_json() for r in rows] for arm, rows in wrong.items()},
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
  command: str = f"python experiments/reproduce.py --task={transformer.VIT.name}",
  project: bool = True,
) -> Path:
  """Trains every arm's grid of the (filled) design that is not finished (resuming partial
  ones), evaluates each finished grid's wrong forms, and writes the result into ``out``;
  ``train=False`` trains and evaluates nothing and renders from the files already there.
  Training records ``command`` and the code's revision
  (`gelujax.study.provenance.record_provenance`). ``root`` and ``project`` as
  :func:`gelujax.study.reproduce` takes them."""
  design.check_filled()
  provenance.train_or_check(
    design.name, lambda: transformer.make_grids(design, out), seeds=design.seeds, out=out,
    root=root, data_dir=data_dir, train=train, command=command,
    after=lambda grid: transformer.evaluate_wrong_forms(design, grid, out=out, data_dir=data_dir),
  )  # fmt: skip
  return write_result(design, out=out, root=root, project=project)
