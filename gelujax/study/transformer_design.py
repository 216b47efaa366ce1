"""The transformer study's Design section: the rules fixed with it, the numbers its pilot gave them
(lrs, margins, seeds, each forms test's power), the pilot's condition for its control, what the
study does not show, and the design as summary.json keeps it."""

from __future__ import annotations

import math
import os
import statistics
from pathlib import Path
from typing import Any

from gelujax.study import (
  calibration,
  numbers,
  power,
  registry,
  runs,
  stats,
  transformer,
)
from gelujax.study.transformer import Design, Measure
from gelujax.study.transformer_verdicts import margin_words

BFLOAT16_SPACING = 2.0**-7  # bfloat16's spacing between 1 and 2 (8 significant bits)


def pilot_condition_words(design: Design, margins: float) -> str:
  """Whether the pilot's condition for taking ``design.control`` as the control holds at a
  pilot gap of ``margins``: its gap above gelu within ``design.control_gap`` margins, or, where
  that is None, "many times its margin", read as beyond `gelujax.study.calibration.
  CONTROL_MARGINS` margins."""
  if design.control_gap is None:
    low, high = calibration.CONTROL_MARGINS, math.inf
    words = f"a gap many times its margin: more than {low:g} margins"
    holds = margins > low
  else:
    low, high = design.control_gap
    words = f"a gap of {low:g} to {high:g} margins"
    holds = low <= margins <= high
  return (
    f"the pilot's condition for taking it as the control ({words}, {design.control} above "
    "gelu) " + ("holds" if holds else "does not hold")
  )


def control_power_words(design: Design, control: Any, measure: Measure) -> str:
  """The pairs with which the control's pilot gap is found *different* with the design's power,
  at the pilot's SD and at its bound, beside the design's seeds (`transformer.pairs_for_control`):
  a control the seeds leave short is said to be."""
  n = len(design.seeds)
  margin = design.margins[measure.key]
  found = [
    transformer.pairs_for_control(design, control, sd, margin)
    for sd in (control.sd, control.sd_bound)
  ]
  words = [f"{k}" if k is not None else f"more than {stats.MAX_SEEDS}" for k in found]
  short = found[1] is None or found[1] > n
  return (
    f" Were its pilot gap the true one, it is found *different* (beyond the margin) with "
    f"{100 * design.power:g}% power by {words[0]} pairs at the pilot's SD, {words[1]} at the SD's "
    f"bound (`gelujax.study.transformer.pairs_for_control`); the design has {n}"
    + (": at the bound, short of that power." if short else ".")
  )


def negative_power_line(design: Design, measure: Measure) -> str | None:
  """The pairs with which the negative control (gelu against gelu on other seeds, true shift 0)
  is found *equivalent* within the margin with the design's power, its pairs' SD √2 times gelu's
  SD across the pilot's seeds (at that SD and at its bound; two networks drawn apart), beside the
  design's seeds: a negative control the seeds leave short is said to be."""
  values = design.sizing.between.get(measure.key, ())
  if not design.negative or len(values) < 2:
    return None
  m, n = measure.pilot, len(design.seeds)
  sd = statistics.stdev(values)
  factor = power.sd_upper_factor(len(values), design.pilot.bound)
  level = design.alpha / 2.0  # A family of one; its p doubles the smaller one-sided p.
  found = [
    power.pairs_for_equivalence(
      math.sqrt(2.0) * x, design.margins[measure.key], alpha=level, power=design.power,
      efficiency=power.RANK_EFFICIENCY,
    )
    for x in (sd, sd * factor)
  ]  # fmt: skip
  words = [f"{k}" if k is not None else "–" for k in found]
  short = found[1] is None or found[1] > n
  return (
    f"  - negative control {design.negative} − gelu: its pairs share no seed, so their SD is "
    f"about √2 times gelu's SD across seeds; gelu's pilot {m.label} has an SD of "
    f"{numbers.number(sd, m.scale, 3)} {m.unit} over its {len(values)} selection seeds "
    f"({numbers.number(sd * factor, m.scale, 3)} at its {100 * design.pilot.bound:g}% upper "
    f"bound). Its true shift being 0, it is found *equivalent* within the margin with "
    f"{100 * design.power:g}% power by {words[0]} pairs at that SD, {words[1]} at its bound "
    f"(`gelujax.study.power.pairs_for_equivalence`, each one-sided test at {level:g}, the "
    f"signed-rank test's efficiency); the design has {n}"
    + (": at the bound, short of that power." if short else ".")
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
    if m.key in s.shifts:
      need = s.ranking_needed[m.key]
      lines.append(
        f"  - the ranking's target, which the seeds are sized for: a shift of "
        f"{s.shifts[m.key]:.3g} {m.pilot.unit} ({100 * design.relative_shift:g}% of gelu's median "
        f"pilot {m.pilot.label}) needs {need} pairs at the family's strictest level ({level:.3g}, "
        f"two-sided) with {100 * design.power:g}% power, the SD at the pilot's bound "
        "(`gelujax.study.transformer.pairs_for_ranking`, the most over its comparisons); "
        f"{n} seeds" + (": the cap leaves it short of that power." if need > n else ".")
      )
    control = s.spread(design.control, "gelu", m)
    if control is not None:
      lines.append(
        f"  - control {design.control} − gelu: the pilot's mean difference "
        f"{numbers.signed(control.mean, scale=m.pilot.scale)} {m.pilot.unit}, "
        f"{numbers.signed(control.mean / design.margins[m.key])} margins: "
        + pilot_condition_words(design, control.mean / design.margins[m.key])
        + "."
        + (control_power_words(design, control, m) if design.control_gap is not None else "")
      )
    negative = negative_power_line(design, m)
    if negative is not None:
      lines.append(negative)
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
    f"Fixed in {registry.fixed_in(design)} "
    "before any of its runs was trained; its lrs, margins and seeds taken from the pilot's "
    f"result {source} (`{s.pilot}`) by the rule fixed with it "
    "(`gelujax.study.transformer.from_pilot`):",
    "",
    f"- Task: `{design.task}` on {design.dataset} (model `{spec.model}`, batch size "
    f"{spec.batch_size}, dropout {spec.dropout:g}, {spec.optimizer}), {design.epochs} epochs: "
    f"{design.epochs_reason}. The best epoch: {design.tie_rule}.",
    f"- Arms: {', '.join(design.arms)}, one run each (`runs/<arm>/`"
    + (f"; {renamed}" if renamed else "")
    + "), every arm"
    + (" but the negative control" if design.negative else "")
    + " on the same seeds: one seed gives one initial draw, one batch order and one "
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
    f"- Control ({design.control} − gelu, one a metric): {design.control_reason}"
    + (
      f"; its lr and pilot gap from its own pilot's result `{s.control_folder}` "
      f"(`{design.control_pilot.name}`)."
      if design.control_pilot is not None
      else "."
    ),
    *(
      [
        f"- Negative control ({design.negative} − gelu, one a metric; {design.negative} trains "
        f"seeds {numbers.seeds(design.variants[design.negative].seeds(design.seeds))}, each "
        f"paired with gelu's seed {design.offset(design.negative)} below it): "
        f"{design.negative_reason}."
      ]
      if design.negative
      else []
    ),
    *[
      f"- {name}: {variant.words}."
      for name, variant in design.variants.items()
      if variant.words and name in design.arms
    ],
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


def edge_words(design: Design) -> str:
  """The arms whose lr is the largest (or the smallest) the pilot tried, whose best lr may lie
  beyond the grid: ``" Every arm took the largest lr the pilot tried (0.002): ..."``."""
  grid = design.pilot.learning_rates
  if len(grid) < 2 or not design.learning_rates:
    return ""
  parts = []
  for edge, word, where in ((max(grid), "largest", "above"), (min(grid), "smallest", "below")):
    arms = [a for a in design.arms if runs.same_lr(design.learning_rates.get(a, math.nan), edge)]
    if arms:
      who = "Every arm" if len(arms) == len(design.arms) else ", ".join(arms)
      parts.append(
        f"{who} took the {word} lr the pilot tried ({edge:g}): "
        f"{'its' if len(arms) == 1 else 'their'} best may lie {where} it, which no run here saw"
      )
  return "".join(f" {part}." for part in parts)


def caveat_lines(design: Design) -> list[str]:
  found = design.pilot
  return [
    f"- One small transformer on one CPU-sized task: `{design.task}`, {design.epochs} epochs, "
    "one data set. Shazeer's comparisons were made in T5's pre-training at a far larger scale; "
    "a verdict here is about this task.",
    f"- Each arm's lr was chosen from the pilot's {len(found.learning_rates)} "
    f"({', '.join(f'{lr:g}' for lr in found.learning_rates)}) on its {len(found.seeds)} selection "
    "seeds: an arm's best lr may lie elsewhere, and an ordering here holds at these lrs."
    + edge_words(design),
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
    + "; *inconclusive* is not *no difference*: "
    + (
      f"the seeds were sized for the ranking family's shift of {100 * design.relative_shift:g}% "
      "within a cap, and the shifts its tests detect at the seeds are stated under Design."
      if design.seeds_for == transformer.FOR_RANKING
      else "the seeds were sized for the forms family, and the shifts the ranking tests detect "
      "are stated under Design."
    ),
    "- The wrong form is measured on the networks after their last epoch"
    + (
      ""
      if all(m.key.startswith("final.") for m in design.measures)
      else ", not at their best-validation epoch"
    )
    + ", and bfloat16 as XLA computes it on this CPU, which may differ from an accelerator's.",
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
