"""The transformer study's verdicts as its README states them: each effect in the units shown with
its interval, the ranking and forms tables, the calibration and closeness lines, the control's
gate and the tallies, none typed by hand."""

from __future__ import annotations

import collections
from collections.abc import Iterable
from typing import Any

from gelujax.study import (
  calibration,
  confirm_report,
  forms_words,
  judge,
  numbers,
  report,
  stats,
  transformer,
)
from gelujax.study.transformer import NOT_ESTABLISHED, Design, Measure
from gelujax.study.transformer_runs import Result
from gelujax.study.verdicts import CONFIRMED, REFUTED

BFLOAT16_SPACING = 2.0**-7  # bfloat16's spacing between 1 and 2 (8 significant bits)


def effect_words(design: Design, measure: Measure, shift: float, low: float, high: float) -> str:
  """A paired shift and its interval as compared: ``"+12 images [+3, +20] (+0.12 points
  [...])"`` for a count of examples, ``"+0.0123 nats [...]"`` for a loss."""
  if measure.whole:  # Counts and half counts: a digit more than the split's size has.
    digits = len(str(design.examples)) + 1
    return confirm_report.shift_words(design, shift, low, high, digits=digits)
  return numbers.interval(shift, low, high, unit="nats")


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
    cells = report.paired_cells(
      o,
      lambda m: value_words(design, measure, m),
      lambda c: effect_words(design, measure, c.shift, c.low, c.high),
    )
    lines.append(
      f"| {o.number} | {h.claim()} | {lrs_words(design, h.gelu, h.baseline)} | "
      + " | ".join(cells)
      + f" | {confirm_report.verdict_words(o, command)} |"
    )
  return lines


def ruled_out_words(design: Design, measure: Measure, o: Any, word: str, bound: float) -> str:
  """What ``o``'s interval rules out on one side: its first arm ``word`` (lower, higher) than its
  second by more than ``bound`` (in the measure's unit and in percent of the second's median),
  or at all where the interval ends on the other side of 0."""
  h, base = o.hypothesis, abs(o.medians[1])
  if bound <= 0:
    return f"{h.gelu} {word} than {h.baseline} at all"
  amount = amount_words(design, measure, bound)
  if bound == 1 and measure.whole:  # one image, one token
    amount = amount.removesuffix("s")
  share = f" ({100 * bound / base:.2g}% of {h.baseline}'s median)" if base else ""
  return f"{h.gelu} {word} by more than {amount}{share}"


def ruled_out_lines(design: Design, result: Result, measure: Measure) -> list[str]:
  """For each *inconclusive* ranking claim on ``measure``, the shifts its exact interval rules
  out, each way: what an inconclusive verdict still says."""
  unit = design.unit if measure.whole else "nats"
  lines = [
    f"- {o.hypothesis.claim()}: its interval [{numbers.signed(o.paired.low)}, "
    f"{numbers.signed(o.paired.high)}] {unit} rules out "
    f"{ruled_out_words(design, measure, o, 'lower', -o.paired.low)}, and "
    f"{ruled_out_words(design, measure, o, 'higher', o.paired.high)}."
    for o in result.ranking
    if o.hypothesis.metric == measure.key and o.verdict == judge.INCONCLUSIVE and o.paired
  ]
  if not lines:
    return []
  return [
    "What each *inconclusive* claim still rules out (its exact interval, at least "
    f"{100 * stats.CONFIDENCE:g}%, uncorrected for the family):",
    "",
    *lines,
  ]


def forms_verdict_words(design: Design, result: Result, o: Any, measure: Measure) -> str:
  """A forms (or control) verdict as the study reports it: the control's gate applied, and a
  test the seeds left short of power marked."""
  reported = result.reported(o)
  check = result.check(o) if isinstance(result, calibration.Checked) else None
  if reported == NOT_ESTABLISHED:
    failed = [
      words
      for words, passed in (
        ("the control was not found different", result.control_passed()),
        ("the negative control was not found equivalent", result.negative_passed()),
      )
      if not passed
    ]
    words = f"equivalent, **{NOT_ESTABLISHED}** ({'; '.join(failed)})"
  elif reported == calibration.REPORTED_UNCALIBRATED:
    words = f"equivalent (same seeds), **{calibration.UNCALIBRATED}**"
  elif reported == judge.EQUIVALENT and check is not None and o.comparison.is_form:
    words = f"**equivalent** (same seeds), {check.status}"
  else:
    words = forms_words.verdict_words(o)
  c = o.comparison
  if c.is_form and o.seeds:
    words += f"; zero-shift p {o.p_zero:.2g}"
  passed = o.verdict == judge.EQUIVALENT
  if c.is_form and not passed and transformer.short_of_power(design, c.first, c.second, measure):
    words += "; could not have passed with the design's power (see Design)"
  return words


def forms_table(
  design: Design, result: Result, measure: Measure, family: str = transformer.FORMS
) -> list[str]:
  """The forms family (or a control's) on one measure: a row per comparison."""
  lines = [
    "| comparison | lrs | margin | paired shift [exact CI] | n | p (TOST) | p (beyond) | p | "
    "Holm p | verdict |",
    "|---|---|---|---|---|---|---|---|---|---|",
  ]
  for o in result.forms:
    c = o.comparison
    if c.metric.key != measure.key or c.family[0] != family:
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
  if not isinstance(result, calibration.Checked) or not result.checks:
    return []
  lines = []
  for o in result.forms:
    c = o.comparison
    check = result.check(o)
    if not c.is_form or c.metric.key != measure.key or check is None:
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
  """Whether the controls passed, per measure, and what follows for the forms' *equivalent*."""
  text = control_words(design, result)
  return f"{text} {negative_words(design, result)}" if design.negative else text


def control_words(design: Design, result: Result) -> str:
  """Whether the control passed, per measure, and what follows for the forms' *equivalent*."""
  found = [o for o in result.forms if o.comparison.control]
  parts = ", ".join(f"{o.comparison.metric.key}: {o.verdict}" for o in found)
  if result.control_passed():
    equivalents = [
      o for o in result.forms if o.comparison.is_form and o.verdict == judge.EQUIVALENT
    ]
    statuses = count(
      result.check(o).status
      for o in equivalents
      if isinstance(result, calibration.Checked) and result.check(o) is not None
    )
    calibrated = "; ".join(f"{n}: {status}" for status, n in statuses.items())
    return (
      f"The control ({design.control} − gelu) was found *different* on every metric ({parts}): "
      f"the design can tell {design.control_words} from gelu. That alone calibrates no "
      f"*equivalent* (`gelujax.study.calibration`): of the {len(equivalents)} *equivalent*, "
      + (calibrated or "none checked")
      + "."
    )
  equivalents = sum(
    result.reported(o) == NOT_ESTABLISHED for o in result.forms if o.comparison.is_form
  )
  return (
    f"The control ({design.control} − gelu) was not found *different* on every metric "
    f"({parts}): the design could not tell {design.control_words} from gelu there, so each of "
    f"the forms' {equivalents} *equivalent* verdicts is reported as *{NOT_ESTABLISHED}*."
  )


def negative_words(design: Design, result: Result) -> str:
  """Whether the negative control was found *equivalent*, per measure, and what follows."""
  found = [o for o in result.forms if o.comparison.negative]
  parts = ", ".join(f"{o.comparison.metric.key}: {o.verdict}" for o in found)
  what = (
    f"The negative control ({design.negative} − gelu: gelu on another set of seeds, paired in "
    "seed order)"
  )
  if result.negative_passed():
    return (
      f"{what} was found *equivalent* on every metric ({parts}): networks of one activation drawn "
      "apart land within the margin of each other at these seeds."
    )
  equivalents = sum(
    result.reported(o) == NOT_ESTABLISHED for o in result.forms if o.comparison.is_form
  )
  return (
    f"{what} was not found *equivalent* on every metric ({parts}): the design could not show "
    "gelu within the margin of itself on other seeds, so each of the forms' "
    f"{equivalents} *equivalent* verdicts is reported as *{NOT_ESTABLISHED}*."
  )


def tally(result: Result) -> dict[str, dict[str, int]]:
  """family -> verdict -> how many (forms verdicts as reported, after the gate)."""
  found = {transformer.RANKING: count(o.verdict for o in result.ranking)}
  for family in (transformer.FORMS, transformer.CONTROL, transformer.NEGATIVE):
    chosen = [o for o in result.forms if o.comparison.family[0] == family]
    if chosen or family != transformer.NEGATIVE:
      found[family] = count(calibration.reported_words(result, o) for o in chosen)
  return found


def count(verdicts: Iterable[str]) -> dict[str, int]:
  """verdict -> how many, in the order first met."""
  return dict(collections.Counter(verdicts))


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
    f"*{CONFIRMED}* or *{REFUTED}* at a Holm p below {design.alpha:g} (the signed-rank "
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
      *(lambda found: [*found, ""] if found else [])(ruled_out_lines(design, result, measure)),
      "Forms:",
      "",
      *forms_table(design, result, measure),
      "",
      *(lambda found: [*found, ""] if found else [])(check_lines(design, result, measure)),
      "Control:",
      "",
      *forms_table(design, result, measure, transformer.CONTROL),
    ]
    if design.negative:
      lines += [
        "",
        "Negative control:",
        "",
        *forms_table(design, result, measure, transformer.NEGATIVE),
      ]
  counts = tally(result)
  lines += [
    "",
    gate_line(design, result),
    "",
    "In all: "
    + "; ".join(f"{family}: {forms_words.count_words(n)}" for family, n in counts.items())
    + ".",
  ]
  return lines
