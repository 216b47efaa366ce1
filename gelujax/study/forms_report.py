"""The README, tables, figure and summary of the GELU forms study (:mod:`gelujax.study.forms`),
written from the runs' files alone: every word that states a verdict, a direction or a count is
derived here from the outcomes, none typed by hand. :func:`reproduce` is the study end to end:
its grids trained, their swaps evaluated (:mod:`gelujax.study.forms`), then the result written
here."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from gelujax.study import (
  calibration,
  forms,
  forms_corrections,
  forms_words,
  numbers,
  plots,
  registry,
  report,
  runs,
  stats,
  wrong_form,
)
from gelujax.study.forms import Design, Outcome
from gelujax.study.judge import DIFFERENT, EQUIVALENT, INCONCLUSIVE

FIGURE = "forms.png"


def verdict_table(design: Design, outcomes: Sequence[Outcome], metric: forms.Metric) -> list[str]:
  """One metric's verdicts: a row per pair, a column per dtype and lr."""
  columns = [(d, lr) for d in design.dtypes for lr in design.learning_rates]
  gaps = forms_words.control_gaps(outcomes)
  calibrated = calibration.calibrations(design, outcomes)
  found = {
    (forms.pair_words(o), o.comparison.dtype, o.comparison.learning_rate): o
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
      mark = " †" if forms_words.daggered(o, gaps) else ""
      mark += f" {calibration.UNCALIBRATED_MARK}" if calibration.uncalibrated(o, calibrated) else ""
      cells.append(f"{forms_words.verdict_words(o)}{mark}<br>{forms_words.shift_words(o)}")
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
      f"| {c.metric.key} | {c.dtype} | {c.learning_rate:g} | {forms.pair_words(o)} "
      f"| {len(o.seeds)} "
      f"| {forms_words.shift_words(o)}{level} | {o.p_zero:.3g} | {e.p_equivalent:.3g} "
      f"| {e.p_beyond:.3g} "
      f"| {e.p:.3g} | {o.p_holm:.3g} | {forms_words.verdict_words(o)} |"
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
      pairs = list(dict.fromkeys(forms.pair_words(o) for o in shown))
      for y, o in enumerate(shown):
        if not o.seeds:
          continue
        x, (low, high, _) = o.shift / metric.margin, o.interval
        lo, hi = low / metric.margin, high / metric.margin
        ax.errorbar(
          x, y, xerr=[[x - lo], [hi - x]], fmt=MARKERS[o.verdict], capsize=3,
          color=f"C{pairs.index(forms.pair_words(o)) % 10}",
          markerfacecolor="white" if o.verdict == INCONCLUSIVE else None,
        )  # fmt: skip
      ax.set_yticks(range(len(shown)))
      ax.set_yticklabels(
        [f"{forms.pair_words(o)}, lr {o.comparison.learning_rate:g}" for o in shown], fontsize=7
      )
      ax.invert_yaxis()
      ax.set_xscale("symlog", linthresh=1.0)
      ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
      ax.set_xlabel(
        f"paired shift in margins ({metric.amount(f'±{metric.shown(metric.margin):.3g}')}), "
        f"exact {100 * stats.CONFIDENCE:g}% interval",
        fontsize=8,
      )
      ax.set_title(f"{metric.label}, {dtype}", fontsize=9)
  what = "GELU forms" if registry.users(design) is None else f"`{design.name}`'s arms"
  fig.suptitle(
    f"{what} on {design.dataset}, {len(design.seeds)} paired seeds: grey, the equivalence "
    "margin; marker: equivalent ●, different ■, inconclusive ◇"
  )
  return plots.save_figure(fig, path)


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
  model = (
    f"the GELU paper's Fig. 2 MLP (`--task={design.task}`) on {design.dataset}, dropout "
    f"{design.dropout:g}, the paper's batch size and optimizer"
    if design.task == forms.DESIGN.task
    else f"`--task={design.task}` (its model, batch size and optimizer) on {design.dataset}, "
    f"dropout {design.dropout:g}"
  )
  lines = [
    f"Fixed in {registry.fixed_in(design)} before any of its runs was trained:",
    "",
    f"- Task: {model}, {design.epochs} epochs: {design.epochs_reason}.",
    f"- Arms: {', '.join(design.arms)} ({design.control_reason}).",
    f"- Every arm at every lr ({numbers.lrs(design.learning_rates)}), with the same {n} seeds "
    "(one seed: one initial draw and one batch order in every arm, so every comparison is "
    "paired by seed), "
    f"computing in {' and '.join(design.dtypes)} (parameters, optimizer state and losses are "
    "float32 either way).",
    f"- Compared: each pair of forms (later minus earlier) and {design.control} − "
    f"{design.forms[0]}, at "
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


SWAP_KEYS = (("error", "test error (points)", 100.0), ("loss", "test log loss (nats)", 1.0))


def read_swaps(design: Design, out: Path) -> list[wrong_form.WrongForm]:
  """Every grid's swaps, kept in ``out/wrong_form/<run>.json`` (`gelujax.study.wrong_form`),
  dtype major, in the design's order."""
  return [
    row
    for dtype in design.dtypes
    for arm in design.arms
    if (path := wrong_form.kept_path(out, design.run_name(arm, dtype))).exists()
    for row in wrong_form.read(path)
  ]


def swap_changes(row: wrong_form.WrongForm, key: str, lr: float | None = None) -> list[float]:
  """A swap's change of test ``key`` (error or loss) per network that did not diverge, at
  ``lr`` (None: every lr); a change not measured (NaN) left out."""
  changes = [
    getattr(n, f"{key}_change")
    for n in row.networks
    if not n.diverged and (lr is None or runs.same_lr(n.learning_rate, lr))
  ]
  return [c for c in changes if not math.isnan(c)]


def swap_table(
  design: Design, rows: Sequence[wrong_form.WrongForm], key: str, scale: float
) -> list[str]:
  """One metric's swap changes: a row per (trained, evaluated) pair, a column per lr."""
  lines = [
    "| trained with | evaluated with | "
    + " | ".join(f"lr {lr:g}: change [interval]; largest |change|" for lr in design.learning_rates)
    + " |",
    "|---|---|" + "---|" * len(design.learning_rates),
  ]
  for row in rows:
    cells = []
    for lr in design.learning_rates:
      if not (changes := swap_changes(row, key, lr)):
        cells.append(numbers.DASH)
        continue
      low, high, _ = stats.paired_interval(changes)
      largest = max(abs(c) for c in changes) * scale
      shift = numbers.interval(stats.walsh_median(changes), low, high, scale=scale)
      cells.append(f"{shift}; {largest:.3g}")
    own = f"{row.trained}, {row.from_dtype or row.dtype}"
    lines.append(f"| {own} | {row.run_with}, {row.dtype} | " + " | ".join(cells) + " |")
  return lines


def swap_findings(design: Design, rows: Sequence[wrong_form.WrongForm]) -> list[str]:
  """What each direction of swap changed, per metric: one line per (trained with, evaluated
  with) pair of forms, each network in its own dtype, then one per arm and change of dtype, so
  that none pools a swap with its opposite: the median change over its networks (every lr and
  dtype), how many went up and down, the range, and whether the largest change lies beyond the
  study's margin for that metric."""
  groups: dict[str, list[wrong_form.WrongForm]] = {}
  for row in sorted(rows, key=lambda r: r.from_dtype is not None):  # stable: the design's order
    if row.from_dtype is None:
      label = f"{row.trained} → {row.run_with}, each network in its own dtype"
    else:
      label = f"{row.trained}, {row.from_dtype} → {row.dtype}"
    groups.setdefault(label, []).append(row)
  margins = {m.key: m for m in design.metrics}
  lines = []
  for label, chosen in groups.items():
    parts, networks = [], 0
    for key, words, scale in SWAP_KEYS:
      changes = np.asarray([c for row in chosen for c in swap_changes(row, key)])
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
    dtypes = len({r.dtype for r in chosen})
    scope = "every lr, seed and dtype" if dtypes > 1 else "every lr and seed"
    if parts:
      lines.append(f"Swap {label} ({networks} networks: {scope}): " + "; ".join(parts) + ".")
  return lines


def title(design: Design) -> str:
  """gelujax's own studies' question; a user's study (`gelujax.study.registry.users`) by its own
  name and arms."""
  head, forms_ = "Which GELU? The forms", f"{', '.join(design.forms)}; "
  control = f"{design.control} as the control; "
  if registry.users(design) is not None:
    head, forms_ = f"`{design.name}`: {', '.join(design.forms)}", ""
    control = control * (design.control in design.arms)
  return (
    f"{head} trained{' and swapped' * design.swaps} on {design.dataset} "
    f"({forms_}{control}{len(design.seeds)} paired "
    f"seeds, lrs {numbers.lrs(design.learning_rates)}, "
    f"{' and '.join(design.dtypes)}, {design.epochs} epochs)"
  )


def lead(design: Design) -> str:
  """The README's question: gelujax's own (the GELU forms), or a user's study's own arms."""
  study = registry.users(design)
  if study is None:
    return (
      "Do the GELU forms train differently, and can a network trained with one be run with "
      "another? `gelu` is the exact erf form (PyTorch's and TensorFlow's default), `gelu_tanh` "
      "the tanh approximation (`jax.nn.gelu`'s and Flax's default, the GELU paper's), "
      "`gelu_sigmoid` x·σ(1.702x)."
    )
  swapped = ", and can a network trained with one be run with another" * design.swaps
  control = (
    f" {design.control} is the positive control, compared with {design.forms[0]}: a design "
    "that cannot tell them apart cannot call the others equivalent."
  )
  return (
    f"A pre-registered study of your own (`{study.where}`): do {', '.join(design.forms)} "
    f"train to networks that differ beyond the margins below{swapped}?"
    + control
    * (design.control in design.arms)
  )


def write_result(design: Design, *, out: Path, root: Path, project: bool = True) -> Path:
  """Writes ``out``'s README.md, table.md, figure and summary.json; returns ``out``; and the
  project's overview where ``out`` is under its results/ (:func:`reproduce`)."""
  finished = forms.finished_runs(design, out)  # Each grid read once, for every table.
  outcomes, missing = forms.analyse(design, finished)
  kept = read_swaps(design, out)
  falling = forms.still_falling(design, finished)
  judged, swapped = (
    forms_words.findings(design, outcomes, missing, falling),
    swap_findings(design, kept),
  )
  close = calibration.closeness_lines(design, outcomes, finished) if not missing else []
  found = judged + close + swapped
  corrected = forms_corrections.correction_lines(design, outcomes, finished) if not missing else []
  if outcomes:
    draw_figure(design, outcomes, out / FIGURE)
  table = ["# Every comparison", "", *full_table(outcomes), "", "# Each arm", ""]
  for metric in design.metrics:
    table += [f"## {metric.label}", "", *arm_table(design, finished, metric), ""]
  verdicts = [
    f"Each cell: the verdict, then the paired shift [exact {100 * stats.CONFIDENCE:g}% "
    "interval]. † marks an *equivalent* where the control was not found different either; "
    f"{calibration.UNCALIBRATED_MARK} one where {calibration.uncalibrated_words()} "
    "(`gelujax.study.calibration`).",
    "",
  ]
  for metric in design.metrics:
    verdicts += report.section(metric.label, verdict_table(design, outcomes, metric), 3)
  if outcomes:
    verdicts += [f"![paired shifts]({FIGURE})", ""]
  swaps = []
  for key, label, scale in SWAP_KEYS if design.swaps else ():
    swaps += report.section(f"Change in {label}", swap_table(design, kept, key, scale), 3)
  body = [
    *report.section("Findings", [*[f"- {line}" for line in found], "", forms_words.limits(design)]),
    *report.section("Corrections", corrected),
    *report.section("Design", design_lines(design)),
    *report.section("Verdicts", verdicts[:-1]),
    *report.section("Swapped at inference", swaps[:-1]),
  ]
  return report.publish(
    design.name,
    out=out,
    root=root,
    project=project,
    title=title(design),
    intro=lead(design),
    body=body,
    footer="All numbers: `table.md`.",
    table=table,
    training=report.training_lines(
      design.name, out, root, project, unit="grid", when_none=None, resume=False
    ),
    summary={
      "missing": list(missing),
      # The rows of results/README.md and the line of the top-level README's summary.
      "headline": forms_words.headline_rows(design, outcomes, falling),
      "headline_summary": (
        f"{title(design)}: {judged[0]}"
        if missing
        else forms_words.headline_summary(design, outcomes, falling)
      ),
      "outcomes": [dataclasses.asdict(o) for o in outcomes],
    },
  )


reproduce = report.reproducer(
  forms.make_grids,
  write_result,
  forms.TASK,
  after=lambda design, grid, out, data_dir: (
    design.swaps and forms.evaluate_swaps(design, grid, out=out, data_dir=data_dir)
  ),
)
"""Trains the design's grids, evaluates each finished grid's swaps, and writes the result
(`gelujax.study.report.reproducer`)."""
