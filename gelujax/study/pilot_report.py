"""The README, table and summary of a pilot (:mod:`gelujax.study.pilot`), written from its runs'
validation metrics alone: every number is derived here from :func:`gelujax.study.pilot.analyse`,
none typed by hand, and no sentence states a verdict or a ranking."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gelujax.study import corrections, numbers, pilot, plots, readme, registry, report, runs
from gelujax.study.pilot import Analysis, Metric, Pilot, Spread

FIGURE = "curves.png"  # each arm's validation loss at its selected lr, against epoch


def metric_of(design: Pilot, key: str) -> Metric:
  """The design's metric of ``key``; a plain one (shown as it is) for a key it does not list."""
  found = {m.key: m for m in (*design.metrics, pilot.ERROR, pilot.LOSS)}
  return found[key]


def title(design: Pilot) -> str:
  return (
    f"Pilot of a feed-forward activation study on {design.task}: {len(design.arms)} "
    f"{'arms' if design.variants else 'feed-forward activations'} at "
    f"lr{'s' * (len(design.learning_rates) > 1)} {numbers.lrs(design.learning_rates)} on "
    "selection seeds "
    f"{numbers.seeds(design.seeds)}, {design.epochs} epochs, validation metrics only"
  )


def headline_summary(design: Pilot, analysis: Analysis) -> str:
  """The pilot's line in the top-level README: what it ran, that it judges nothing."""
  pending = ""
  if analysis.missing:
    pending = f"; pending ({', '.join(analysis.missing)} not trained)"
  whose = "gelujax's" if registry.users(design) is None else "your own"
  return (
    f"{whose} pilot of a feed-forward activation study on {design.task} (`{design.name}`): "
    f"validation metrics on selection seeds {numbers.seeds(design.seeds)}, no verdicts{pending}."
  )


def cell_lines(design: Pilot, analysis: Analysis) -> list[str]:
  """Each arm at each lr: medians and ranges over its seeds, at each member's best epoch."""
  select = metric_of(design, design.select_metric)
  error, loss = metric_of(design, "validation_error"), metric_of(design, "validation_loss")
  lines = [
    f"| arm | lr | members | diverged | median best {design.select_metric} | validation error "
    "(%): median [min–max] | validation loss (nats): median [min–max] | best epochs |",
    "|---|---|---|---|---|---|---|---|",
  ]
  for arm in design.arms:
    if arm not in analysis.cells:
      lines.append(f"| {arm} | pending | – | – | – | – | – | – |")
      continue
    for lr, c in analysis.cells[arm].items():
      cells = []
      for metric in (error, loss):
        s = c.stats(metric.key)
        cells.append(
          f"{metric.words(s['median'])} [{metric.words(s['low'])}–{metric.words(s['high'])}]"
        )
      epochs = ", ".join("–" if b.epoch is None else f"{b.epoch:g}" for b in c.bests)
      median = c.selection_median(design.select_metric)
      lines.append(
        f"| {arm} | {lr:g} | {len(c.bests)} | {c.diverged} | {select.words(median)} | "
        f"{cells[0]} | {cells[1]} | {epochs} |"
      )
  return lines


def selected_lines(design: Pilot, analysis: Analysis) -> list[str]:
  """Each arm's selected lr, beside each lr's median the selection compares."""
  select = metric_of(design, design.select_metric)
  lines = [
    "| arm | selected lr | "
    + " | ".join(f"median best {design.select_metric} at {lr:g}" for lr in design.learning_rates)
    + " |",
    "|---|---|" + "---|" * len(design.learning_rates),
  ]
  for arm in design.arms:
    if arm not in analysis.cells:
      lines.append(f"| {arm} | pending |" + " – |" * len(design.learning_rates))
      continue
    lr = analysis.selected[arm]
    medians = [
      select.words(analysis.cells[arm][x].selection_median(design.select_metric))
      for x in design.learning_rates
    ]
    chosen = "every member diverged" if lr is None else f"{lr:g}"
    lines.append(f"| {arm} | {chosen} | " + " | ".join(medians) + " |")
  return lines


def curve_panels(
  design: Pilot, finished: Mapping[str, runs.Run], analysis: Analysis
) -> dict[str, dict[str, dict[str, runs.Curve | None]]]:
  """The figure's one panel: each finished arm's validation loss against epoch at its selected
  lr, the median over its selection seeds with their range (`gelujax.study.runs.median_curve`,
  diverged members left out); an arm whose every member diverged is not drawn."""
  series: dict[str, dict[str, Any]] = {}
  for arm in design.arms:
    lr = analysis.selected.get(arm)
    if arm in finished and lr is not None:
      curve = runs.median_curve(finished[arm], "validation_loss", lr)
      series[f"{arm} (lr {lr:g})"] = {"validation alone": curve}
  return {"validation loss at each arm's selected lr": series}


def draw_curves(
  design: Pilot, finished: Mapping[str, runs.Run], analysis: Analysis, out: Path
) -> Path | None:
  """:func:`curve_panels` drawn into ``out``/:data:`FIGURE`; None where no arm has a curve."""
  panels = curve_panels(design, finished, analysis)
  if not any(panels.values()):
    return None
  figure = plots.plot_curves(
    panels,
    ylabel="validation log loss (nats)",
    title=f"{design.name}: each arm at its selected lr, median and range over seeds "
    f"{numbers.seeds(design.seeds)}",
  )
  return plots.save_figure(figure, out / FIGURE)


def spread_lines(design: Pilot, metric: Metric, spreads: Sequence[Spread]) -> list[str]:
  """A metric's paired spreads: per comparison, the differences' mean, SD and its bound, and
  the pairs each candidate margin needs (to detect a shift of it / to show equivalence within
  it)."""
  margins = " | ".join(f"δ {numbers.number(m, metric.scale, 3)}" for m in metric.margins)
  lines = [
    f"| comparison | lrs | pairs | mean | SD | SD, {100 * design.bound:g}% upper bound | "
    f"{margins} |",
    "|---|---|---|---|---|---|" + "---|" * len(metric.margins),
  ]
  for s in spreads:
    pairs = " | ".join(
      f"{numbers.count(s.detect[m])} / {numbers.count(s.equivalence[m])}" for m in metric.margins
    )
    lines.append(
      f"| {s.first} − {s.second} | {s.learning_rates[0]:g}, {s.learning_rates[1]:g} | "
      f"{len(s.seeds)} | {numbers.signed(s.mean, scale=metric.scale)} | "
      f"{numbers.number(s.sd, metric.scale, 3)} | {numbers.number(s.sd_bound, metric.scale, 3)} | "
      f"{pairs} |"
    )
  return lines


def spreads_section(design: Pilot, analysis: Analysis) -> list[str]:
  lines = [
    "Each comparison's differences, first arm minus second, seed by seed, each arm at its "
    "selected lr (a seed whose member diverged in either arm drops its pair). Under each "
    f"candidate margin δ: the pairs a two-sided paired test at {design.alpha:g} needs to detect a "
    f"true shift of that size with {100 * design.power:g}% power / the pairs two one-sided "
    f"paired tests at {design.alpha:g} need to show a true shift of 0 within ±δ with "
    f"{100 * design.power:g}% power; both by the normal approximation with the SD at its upper "
    "bound (Method).",
  ]
  for metric in design.metrics:
    found = [s for s in analysis.spreads if s.metric == metric.key]
    lines += ["", f"### {metric.label.capitalize()} ({metric.unit})", ""]
    if not found:
      lines.append("None yet: each comparison needs both its arms trained.")
      continue
    lines += spread_lines(design, metric, found)
  return lines


def method_lines(design: Pilot) -> list[str]:
  return [
    f"- A member's best (by {design.select_metric}, the task's selection metric): "
    f"{design.tie_rule}; its validation error and validation loss there. "
    "No test metric is read: the pilot's code sees each record's epoch and validation metrics "
    "alone (`gelujax.study.pilot.validation_records`).",
    f"- Each arm's lr: {design.lr_tie_rule}.",
    "- Paired differences: seeds are matched across arms (one seed, one initial draw, one batch "
    "order, one dropout stream whatever the activation), so each comparison is first minus "
    "second seed by seed, each arm at its selected lr; their mean and sample SD (ddof 1).",
    f"- The SD's bound: its one-sided {100 * design.bound:g}% upper confidence bound for normal "
    "differences, SD · sqrt(k / q), k the pairs less one and q the chi-square quantile of k "
    f"degrees of freedom at {1 - design.bound:g} (exact: `gelujax.study.power.chi2_quantile`, "
    "within 1e-10 of SciPy's).",
    f"- Pairs to detect a margin δ: ((z(1 − α/2) + z(power)) · SD bound / δ)², α {design.alpha:g}, "
    f"power {design.power:g}, rounded up, at least 2: the normal approximation (a paired z-test) "
    "to a two-sided paired test; a signed-rank test needs about π/3 times as many for normal "
    "differences.",
    "- Pairs for equivalence within ±δ: ((z(1 − α) + z(1 − (1 − power)/2)) · SD bound / δ)², "
    "the same approximation to two one-sided paired tests at α where the true shift is 0.",
    f"- Candidate margins: {design.margins_reason}.",
  ]


def caveat_lines(design: Pilot) -> list[str]:
  return [
    "- No verdicts: nothing here tests a hypothesis, and a difference between arms here is no "
    "finding; the means are shown only beside the SDs that size the study.",
    f"- {len(design.seeds)} seeds: an SD of {len(design.seeds)} pairs is uncertain (hence its "
    "upper bound), and with as few as these the bound itself rests on the differences being "
    "close to normal; the pairs are a size to plan with, not a power the study is guaranteed.",
    "- Validation metrics only: the study compares what its own design fixes (test metrics on "
    "fresh seeds); a spread measured on the validation split stands in for it.",
    "- The α is one test's, uncorrected: a family of comparisons corrected by Holm's method "
    "tests its first at α divided by their number, and needs more pairs.",
  ]


def design_lines(design: Pilot) -> list[str]:
  """The design, as :mod:`gelujax.study.pilot` fixes it."""
  spec = design.spec()
  renamed = "; ".join(
    f"{arm} in `runs/{design.folder(arm)}/`" for arm in design.arms if design.folder(arm) != arm
  )
  if renamed:
    renamed = f", the folder's name as `gelujax.study.runs.run_name` makes it: {renamed}"
  variants = "; ".join(
    f"{arm}: {v.activation} with {v.words} (model options {dict(v.model_options)})"
    for arm, v in design.variants.items()
  )
  variants = f"; {variants}" if variants else ""
  per_epoch = spec.evals_per_epoch
  evaluations = "one evaluation" if per_epoch == 1 else f"{per_epoch} evaluations"
  controls = [c for c in design.comparisons if c[0] == design.control or c[0] in design.variants]
  gaps = " and ".join(f"{a} − {b}" for a, b in controls)
  said = "is the control's gap" if len(controls) == 1 else "are the candidate controls' gaps"
  return [
    f"Fixed in {registry.fixed_in(design)} before any of its runs was trained:",
    "",
    f"- Task: `{design.task}` on {design.dataset} (model `{spec.model}`, batch size "
    f"{spec.batch_size}, dropout {spec.dropout:g}, {spec.optimizer}), {design.epochs} epochs, "
    f"{evaluations} of the validation split per epoch: {design.epochs_reason}.",
    f"- Arms: {', '.join(design.arms)}, each one run of {len(design.learning_rates)} "
    f"lr{'s' * (len(design.learning_rates) > 1)} x "
    f"{len(design.seeds)} seeds (`runs/<arm>/`{renamed}){variants}: {design.arms_reason}.",
    f"- Control: {design.control_reason}.",
    f"- Learning rates {numbers.lrs(design.learning_rates)}: {design.lr_reason}.",
    f"- Seeds: {design.seeds_reason}.",
    "- Comparisons (the study's): "
    + ", ".join(f"{a} − {b}" for a, b in design.comparisons)
    + f"; {gaps} {said}.",
  ]


def seed_table(design: Pilot, analysis: Analysis) -> list[str]:
  """Every member's best epoch, validation error (%) and validation loss."""
  lines = [
    "| arm | lr | seed | best epoch | validation error (%) | validation loss (nats) |",
    "|---|---|---|---|---|---|",
  ]
  error, loss = metric_of(design, "validation_error"), metric_of(design, "validation_loss")
  for arm, by_lr in analysis.cells.items():
    for lr, c in by_lr.items():
      for b in c.bests:
        if b.diverged:
          lines.append(f"| {arm} | {lr:g} | {b.seed} | diverged | – | – |")
          continue
        epoch = "–" if b.epoch is None else f"{b.epoch:g}"
        lines.append(
          f"| {arm} | {lr:g} | {b.seed} | {epoch} | {error.words(b.values[error.key])} | "
          f"{loss.words(b.values[loss.key])} |"
        )
  return lines


KEPT = "the numbers below are those its runs gave"  # what a pilot's corrections leave as it was


def write_result(design: Pilot, *, out: Path, root: Path, project: bool = True) -> Path:
  """Writes ``out``'s README.md, table.md and summary.json; returns ``out``; and the project's
  overview where ``out`` is under its results/."""
  finished = pilot.finished_runs(design, out)
  analysis = pilot.analyse(design, finished)
  figure = draw_curves(design, finished, analysis, out)
  pending = []
  if analysis.missing:
    command = f"{readme.command_name(project)} --task={design.name}"
    pending = [f"Pending: {', '.join(analysis.missing)} not trained (`{command}` trains them).", ""]
  selected = selected_lines(design, analysis)
  if figure:
    selected += ["", f"![Each arm's validation loss at its selected lr against epoch]({FIGURE})"]
  body = [
    *pending,
    *report.section("Each arm and learning rate", cell_lines(design, analysis)),
    *report.section("Selected learning rates", selected),
    *report.section(
      "Paired spread at the selected learning rates", spreads_section(design, analysis)
    ),
    *report.section("Method", method_lines(design)),
    *report.section("What the pilot does not show", caveat_lines(design)),
    *report.section("Corrections", corrections.lines(design.name, design.date, kept=KEPT)),
    *report.section("Design", design_lines(design)),
  ]
  return report.publish(
    design.name,
    out=out,
    root=root,
    project=project,
    title=title(design),
    intro="A pilot: before a pre-registered study compares "
    f"feed-forward activations in `{design.task}` on fresh seeds, this pilot trains each arm on "
    "selection seeds at each lr and reads validation metrics alone, to select each arm's lr and "
    "to measure the paired spread between arms that the study's margins, power and seed count "
    "are stated from. It states no verdict.",
    body=body,
    footer="Every member's values: `table.md`.",
    table=["# Every member", "", *seed_table(design, analysis)],
    summary={
      "missing": list(analysis.missing),
      "headline": [],
      "headline_summary": headline_summary(design, analysis),
      "outcomes": [],
      "pilot": analysis.to_json(design),
    },
  )


reproduce = report.reproducer(pilot.make_grids, write_result, pilot.VIT.name, kind="pilot")
"""Trains the pilot's runs and writes the result (`gelujax.study.report.reproducer`)."""
