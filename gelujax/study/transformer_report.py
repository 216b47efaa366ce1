"""The README, table and summary of the transformer study (:mod:`gelujax.study.transformer`),
written from its runs' files, its kept wrong-form rows and its pilot's numbers alone: every
verdict, direction, count, margin and seed count is derived here or by the design's rule, none
typed by hand; while an arm is not finished, no verdict is given. :func:`reproduce` is the study
end to end: its grids trained, their wrong forms evaluated, then the result written here."""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from gelujax import workdir as workdirs
from gelujax.study import (
  calibration,
  corrections,
  forms_words,
  numbers,
  overview,
  plots,
  readme,
  registry,
  report,
  runs,
  transformer,
  transformer_design,
  transformer_runs,
  transformer_verdicts,
  wrong_form,
)
from gelujax.study.transformer import Design
from gelujax.study.transformer_runs import Result
from gelujax.study.transformer_verdicts import count, effect_words, margin_words
from gelujax.study.verdicts import INCONCLUSIVE

BFLOAT16_SPACING = 2.0**-7  # bfloat16's spacing between 1 and 2 (8 significant bits)


def lead(design: Design) -> str:
  """The README's question: gelujax's own (which activation, and the GELU forms), or a user's
  study's own arms (`gelujax.study.registry.users`)."""
  study = registry.users(design)
  if study is None:
    return (
      "Which feed-forward activation does a small transformer train best with, and do the two "
      "GELU forms (and their gated counterparts) train to networks as good? A pre-registered "
      f"study on `{design.task}`: its hypotheses fixed in code before its runs, each "
      "arm's lr, the margins and the seeds taken from its pilot by a stated rule."
    )
  return (
    f"A pre-registered study of your own (`{study.where}`) of the feed-forward activations "
    f"{', '.join(design.arms)} in `{design.task}`: do the pairs it ranks differ, and do the "
    "pairs it holds within margins train to networks as good? Its hypotheses fixed in code "
    "before its runs, each arm's lr, the margins and the seeds taken from its pilot "
    f"`{design.pilot.name}` by a stated rule."
  )


def title(design: Design) -> str:
  seeds = f"{len(design.seeds)} fresh paired seeds" if design.seeds else "fresh paired seeds"
  return (
    f"Feed-forward activations in a transformer: {design.task} on {design.dataset}, "
    f"{len(design.arms)} arms ("
    + (
      f"{design.control} and {design.negative} the controls"
      if design.negative
      else f"{design.control} the control"
    )
    + f") on {seeds}, each at its pilot's "
    f"lr, {design.epochs} epochs"
  )


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
    values = transformer_runs.arm_values(design, arm, finished[arm])
    cells = []
    for m in design.measures:
      metric = design.metric(m)
      x = [
        v for v in transformer_runs.as_compared(metric, values[m.key]).values() if math.isfinite(v)
      ]
      cells.append(median_range(x, lambda v, m=m: transformer_verdicts.value_words(design, m, v)))
    first = values[design.measures[0].key]
    diverged = sum(not math.isfinite(v) for v in first.values())
    last = result.at_last.get(arm, [])
    seeds = f" (seeds {numbers.seeds(last)})" if last else ""
    lines.append(
      f"| {arm} | {lr} | {len(first)} | {diverged} | {' | '.join(cells)} | {len(last)}{seeds} |"
    )
  return lines


FIGURE = "curves.png"  # each arm's `Design.figure` metric against epoch


def curves_from(
  series: dict[str, dict[str, runs.Curve | None]], start: float
) -> dict[str, dict[str, runs.Curve]]:
  """Each curve of ``series`` from x = ``start`` on (a curve that is None left out)."""
  return {
    label: {
      split: runs.Curve(*(v[c.x >= start] for v in (c.x, c.median, c.low, c.high)), c.members)
      for split, c in curves.items()
      if c is not None
    }
    for label, curves in series.items()
  }


def draw_curves(design: Design, finished: dict[str, runs.Run], out: Path) -> list[str]:
  """Each finished arm's ``design.figure`` metric against epoch, the median over its seeds with
  their range (`gelujax.study.runs.median_curve`, diverged members left out), drawn into
  ``out``/:data:`FIGURE`; the README's lines showing it, none where nothing is drawn."""
  if not design.figure:
    return []
  series = {
    f"{arm} (lr {design.learning_rates[arm]:g})": {
      "validation alone": runs.median_curve(
        finished[arm], design.figure, design.learning_rates[arm]
      )
    }
    for arm in design.arms
    if arm in finished
  }
  if not series:
    return []
  # Beside the whole curves, their second half on its own scale: the arms' gaps there (hundredths
  # of a nat) are too small to see against the first epochs' fall.
  half = design.epochs / 2.0
  figure = plots.plot_curves(
    {
      f"{design.figure} of each arm at its lr": series,
      f"from epoch {half:g} on": curves_from(series, half),
    },
    ylabel=design.figure.replace("_", " "),
    title=f"{design.name}: median and range over seeds {numbers.seeds(design.seeds)}",
  )
  plots.save_figure(figure, out / FIGURE)
  return ["", f"![Each arm's {design.figure.replace('_', ' ')} against epoch]({FIGURE})"]


def seed_table(design: Design, finished: dict[str, runs.Run]) -> list[str]:
  """Every seed's compared value per arm and measure (the values the tests compare)."""
  lines = []
  for m in design.measures:
    metric = design.metric(m)
    arms = [a for a in design.arms if a in finished]
    values = {
      a: transformer_runs.as_compared(
        metric, transformer_runs.arm_values(design, a, finished[a])[m.key]
      )
      for a in arms
    }
    unit = design.unit + " wrong" if m.whole else "nats"
    table = report.seed_table(design.seeds, values, 0 if m.whole else 5)
    lines += report.section(f"{m.label} ({unit})", table)
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
      x = [runs.member_value(m, transformer.ERROR.key) for m in run.members if not m["diverged"]]
      rows.append((run.activation, len(run.members), [v for v in x if math.isfinite(v)]))
  return rows


def paper_medians(design: Design, root: Path) -> dict[str, float]:
  """activation -> the paper's median test error, as ``design.beside``'s summary quotes them."""
  found: dict[str, float] = {}
  summary = workdirs.read_json(root / design.beside / workdirs.SUMMARY_FILE)
  for outcome in summary.get("outcomes", []):
    h = outcome["hypothesis"]
    for name, value in zip((h["gelu"], h["baseline"]), h["paper"], strict=True):
      if value is not None and h["metric"] == transformer.ERROR.key:
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
      values = transformer_runs.arm_values(design, arm, finished[arm])[transformer.ERROR.key]
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


def interval_words(s: wrong_form.StatisticSummary, scale: float, unit: str = "") -> str:
  """A statistic's paired centre and exact interval, times ``scale``, ``unit`` after the
  centre."""
  if not s.n:
    return numbers.DASH
  return numbers.interval(s.centre, s.low, s.high, scale=scale, unit=unit)


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


# ----------------------------------------------------------------------------- the result


def headline_rows(design: Design, result: Result) -> list[dict[str, Any]]:
  """The study's rows of ``results/README.md``: one per family and measure (none while an arm
  is pending), each with its caveats: the control's gate, the forms tests short of power and
  what the study does not show."""
  if result.missing:
    return []
  limits = "what it does not show: " + " ".join(
    line.removeprefix("- ") for line in transformer_design.caveat_lines(design)
  )
  rows = []
  for m in design.measures:
    ranking = [o for o in result.ranking if o.hypothesis.metric == m.key]
    rows.append(
      {
        "kind": overview.FAMILY,
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
        "verdict": forms_words.count_words(count(o.verdict for o in ranking)),
        "caveats": limits,
      }
    )
    families = (transformer.FORMS, transformer.CONTROL) + (
      (transformer.NEGATIVE,) if design.negative else ()
    )
    for family in families:
      chosen = [
        o
        for o in result.forms
        if o.comparison.metric.key == m.key and o.comparison.family[0] == family
      ]
      forms_family = family == transformer.FORMS
      gate = "; ".join(
        words
        for words, passed in (
          ("the control was not found different", result.control_passed()),
          ("the negative control was not found equivalent", result.negative_passed()),
        )
        if forms_family and not passed
      )
      short = transformer_design.short_words(design, m) if forms_family else ""
      rows.append(
        {
          "kind": overview.FAMILY,
          "where": f"{design.name}, {family}: {m.key}",
          "claim": "; ".join(f"{o.comparison.first} − {o.comparison.second}" for o in chosen)
          + f" {'beyond' if family == transformer.CONTROL else 'within'} "
          f"{margin_words(design, m)}: {m.label}",
          "paper": "–",
          "ours": "<br>".join(
            f"{o.comparison.first} − {o.comparison.second}: "
            f"{effect_words(design, m, o.shift, *o.interval[:2])} "
            f"({calibration.reported_words(result, o)})"
            for o in chosen
          ),
          "verdict": forms_words.count_words(
            count(calibration.reported_words(result, o) for o in chosen)
          ),
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
  if registry.users(design) is not None:
    name = f"a transformer study of your own on {design.task} (`{design.name}`)"
  if result.missing:
    return f"{name}: pending ({', '.join(result.missing)} not trained)."
  counts = transformer_verdicts.tally(result)
  labels = {m.key: f" on {m.label}" if len(design.measures) > 1 else "" for m in design.measures}
  decided = [
    f"{o.hypothesis.claim()} {o.verdict}{labels[o.hypothesis.metric]}"
    for o in result.ranking
    if o.verdict != INCONCLUSIVE
  ]
  members = len(design.arms) * len(design.seeds)
  improving = sum(len(seeds) for seeds in result.at_last.values())
  text = (
    f"{name}: "
    + "; ".join(
      f"{family} {forms_words.count_words(n)}"
      + (f" ({', '.join(decided)})" if decided and family == transformer.RANKING else "")
      for family, n in counts.items()
    )
    + f"; the control {'passed' if result.control_passed() else 'failed'}"
    + (
      f", the negative control {'passed' if result.negative_passed() else 'failed'}"
      if design.negative
      else ""
    )
    + "."
  )
  arm, others = next(iter(design.wrong_forms.items()))
  first = next(
    (r for r in wrong.get(arm, []) if r.run_with == others[0] and r.dtype == "float32"), None
  )
  if first is not None:
    # The change in what the study compares: its error where it compares one, else its loss.
    by_error = any(m.whole for m in design.measures)
    change = first.statistic("error_change" if by_error else "loss_change")
    words = (
      f"error change {interval_words(change, 100.0)} points"
      if by_error
      else f"loss change {interval_words(change, 1.0, 'nats')}"
    )
    text += (
      f" Its {first.trained} networks run with {first.run_with} in float32 (exploratory): test "
      f"{words}, top-1 agreement median {100 * first.statistic('agreement').median:.2f}%."
    )
  return text + (
    f" It shows one small transformer on {design.task}, {design.epochs} epochs on CPUs, each arm "
    f"at one lr ({improving} of its {members} networks still at their best at the last epoch); "
    "not Shazeer's pre-training scale."
  )


def write_result(design: Design, *, out: Path, root: Path, project: bool = True) -> Path:
  """Writes ``out``'s README.md, table.md and summary.json from the runs and kept wrong-form
  rows there; returns ``out``; and the project's overview where ``out`` is under its results/."""
  design.check_filled()
  finished = transformer_runs.finished_runs(design, out)
  result = calibration.checked(design, transformer_runs.analyse(design, finished), finished)
  wrong = transformer_runs.read_all_wrong_forms(design, out)
  command = f"{readme.command_name(project)} --task={design.name}"
  corrected = corrections.lines(design.name, design.date)
  beside = beside_lines(design, finished, out, root) if design.beside else []
  body = [
    *report.section("Verdicts", transformer_verdicts.verdict_lines(design, result, command)),
    *report.section(
      "Each arm", [*arm_lines(design, finished, result), *draw_curves(design, finished, out)]
    ),
    *report.section(f"Beside {design.beside_words} (descriptive)", beside),
    *report.section(
      "The wrong form (exploratory)",
      [
        "Each trained network run with another form than it was trained with, on the test "
        "split: the change (other form minus its own) per network, its paired Hodges–Lehmann "
        "centre over the networks with the exact interval (`gelujax.study.wrong_form`).",
        "",
        *wrong_form_lines(design, wrong),
        "",
        bfloat16_words(),
      ],
    ),
    *report.section("What this does not show", transformer_design.caveat_lines(design)),
    *report.section("Corrections", corrected),
    *report.section("Design", transformer_design.design_lines(design, out, root)),
  ]
  return report.publish(
    design.name,
    out=out,
    root=root,
    project=project,
    title=title(design),
    intro=lead(design),
    body=body,
    footer="Every seed's values: `table.md`.",
    table=["# Every seed", "", *seed_table(design, finished)],
    summary={
      "missing": list(result.missing),
      "headline": headline_rows(design, result),
      overview.LEADS: design.lead,
      "headline_summary": headline_summary(design, result, wrong),
      "design": transformer_design.design_json(design),
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


reproduce = report.reproducer(
  transformer.make_grids,
  write_result,
  transformer.VIT.name,
  after=lambda design, grid, out, data_dir: transformer_runs.evaluate_wrong_forms(
    design, grid, out=out, data_dir=data_dir
  ),
)
"""Trains the (filled) design's arms, evaluates each finished grid's wrong forms, and writes
the result (`gelujax.study.report.reproducer`)."""
