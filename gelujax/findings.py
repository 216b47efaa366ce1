"""The findings of a result: its statistics, and the one wording of each.

Every sentence of a results README that ranks runs or calls a gap beyond (or within) the
seed spread is generated here from the statistics, one template per kind of finding and one
wording per statistical outcome (``sweep.OUTCOME_WORDS``); every rank-sum test of one README
is in one :class:`gelujax.sweep.Family`, corrected by Holm's method. The kinds, each a line
``- <Kind> [<where>]...``:

- ``Tests``: how many of the README's tests are beyond the seed spread after correction.
- ``Ranking``: the runs by median, best first, each tested against the one above; at each run's
  selected lr for every metric of the table, and at each lr every run shares for the main one.
- ``Selection``: each run's selected lr against the runner-up, on the selection metric.
- ``GELU vs baseline``: each GELU form (``gelu_tanh``, ``gelu``) against ReLU and ELU.
- ``Paper``: each order the paper states (``paper.CLAIMS``): reproduced (same order, beyond the
  seed spread), not reproduced (same or opposite order, not beyond), or contradicted (opposite
  order, beyond).
- ``Unstable``: members whose training loss jumps above ``sweep.JUMP_RATIO`` times its running
  minimum (``sweep.find_jumps``).
- ``Models`` (noise only): when the evaluated models stopped against their best epoch.

Typed prose around the findings may explain and interpret them; it never states a ranking or a
significance (tests/test_results.py re-derives every finding of the committed results).
"""

from __future__ import annotations

import collections
import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from gelujax import sweep
from gelujax.paper import (
  BASELINES,
  CLAIM_TEXT,
  CLAIMS,
  FIGURES,
  GELU_FORMS,
  Claim,
  Report,
)
from gelujax.sweep import at_learning_rate

# Noise levels the noise rankings and the paper's noise claims test.
NOISE_RANKED_LEVELS = (1.0, 3.0)


@dataclasses.dataclass(frozen=True)
class Metric:
  """A column of a table that runs are ranked by.

  Attributes:
    key: its key in the rows (``"best.test_error"``) or noise results (``"accuracy@1"``).
    label: its heading, with units.
    scale: multiplies the values shown (100 for percent).
    lower_is_better: False for accuracies.
  """

  key: str
  label: str
  scale: float = 1.0
  lower_is_better: bool = True


@dataclasses.dataclass
class Analysis:
  """Every statistical statement of one result; all its tests are in ``family``.

  Attributes:
    family: the rank-sum tests, Holm-corrected together.
    seeds: seeds per run, for the smallest possible p-value.
    rankings: at the reported lr(s), for every metric, then at each lr every run shares.
    selections: per run of the selection grids: ``{"run", "selected", "runner_up", "metric",
      "test", "medians", "lrs"}`` (``test`` None when there is nothing to compare).
    gelu: ``(scope, metric, test, gelu run, baseline run)`` for each GELU form and baseline.
    claims: per stated order: ``{"claim", "scope", "metric", "test", "better", "worse",
      "paper"}`` with ``paper`` the paper's two values, or None.
    jumps: ``(run, jump)`` for every training-loss jump.
    models: noise only: per run, where its evaluated models stood (``Models`` findings).
  """

  family: sweep.Family
  seeds: int
  rankings: list[sweep.Ranking] = dataclasses.field(default_factory=list)
  selections: list[dict[str, Any]] = dataclasses.field(default_factory=list)
  gelu: list[tuple[str, Metric, sweep.Test, str, str]] = dataclasses.field(default_factory=list)
  claims: list[dict[str, Any]] = dataclasses.field(default_factory=list)
  jumps: list[tuple[str, dict[str, Any]]] = dataclasses.field(default_factory=list)
  models: list[dict[str, Any]] = dataclasses.field(default_factory=list)


def group_by_dropout(rows: Sequence[dict[str, Any]]) -> dict[float, list[dict[str, Any]]]:
  groups: dict[float, list[dict[str, Any]]] = {}
  for row in rows:
    groups.setdefault(row["dropout"], []).append(row)
  return groups


def shared_learning_rates(rows: Sequence[dict[str, Any]]) -> list[float]:
  """The lrs in every row's grid, in the first row's order."""
  return [
    g["learning_rate"]
    for g in rows[0]["grid"]
    if all(at_learning_rate(row, g["learning_rate"]) for row in rows)
  ]


def _values_at(rows: Sequence[dict[str, Any]], learning_rate: float, key: str):
  values = {}
  for row in rows:
    stats = (at_learning_rate(row, learning_rate) or {}).get("metrics", {}).get(key)
    if stats is not None and stats["n"] > 0:
      values[row["run"]] = list(stats["values"])
  return values


def _add_gelu(
  analysis: Analysis,
  scope: str,
  metric: Metric,
  values: Mapping[str, Sequence[float]],
  runs: Mapping[str, str],
) -> None:
  """Each GELU form against each baseline on ``metric`` at ``scope``; ``runs`` maps an
  activation to its run's name, ``values`` a run's name to its per-seed values."""
  for form in GELU_FORMS:
    for baseline in BASELINES:
      a, b = runs.get(form), runs.get(baseline)
      if a in values and b in values:
        test = analysis.family.test(scope, metric.label, (a, values[a]), (b, values[b]))
        analysis.gelu.append((scope, metric, test, a, b))


def _add_claims(
  analysis: Analysis,
  scope: str,
  metric: Metric,
  values: Mapping[str, Sequence[float]],
  runs: Mapping[str, str],
  claims: Sequence[Claim],
  paper: Mapping[str, float] | None = None,
) -> None:
  """The paper's claims on ``metric`` at ``scope``, each with the paper's two numbers where
  ``paper`` (run name -> the paper's value) gives them."""
  for claim in claims:
    a, b = runs.get(claim.better), runs.get(claim.worse)
    if claim.metric != metric.key or a not in values or b not in values:
      continue
    test = analysis.family.test(scope, metric.label, (a, values[a]), (b, values[b]))
    numbers = (paper[a], paper[b]) if paper and a in paper and b in paper else None
    analysis.claims.append(
      {"claim": claim, "scope": scope, "metric": metric, "test": test, "better": a, "worse": b,
       "paper": numbers}
    )  # fmt: skip


def add_selections(analysis: Analysis, rows: Sequence[dict[str, Any]]) -> None:
  """Each run's selected lr against the runner-up (the next lowest median), on the per-seed
  best selection metric (a diverged member counting as +inf, as the selection counts it)."""
  for row in rows:
    ranked = sorted(
      (g for g in row["grid"] if g["diverged"] < g["members"]),
      key=lambda g: sweep.selection_median(g["select_values"]),
    )
    entry = {
      "run": row["run"],
      "metric": row["select_metric"],
      "test": None,
      "lrs": len(row["grid"]),
    }
    entry["selected"] = row["selected"] and row["selected"]["learning_rate"]
    if len(ranked) > 1:
      selected, runner = ranked[0], ranked[1]
      values = [
        [math.inf if v is None else v for v in g["select_values"]] for g in (selected, runner)
      ]
      entry["runner_up"] = runner["learning_rate"]
      entry["medians"] = [sweep.selection_median(v) for v in values]
      entry["test"] = analysis.family.test(
        f"{row['run']} lr selection",
        f"best {row['select_metric']}",
        (f"lr {selected['learning_rate']:g}", values[0]),
        (f"lr {runner['learning_rate']:g}", values[1]),
      )
    analysis.selections.append(entry)


def analyse_runs(
  task: str,
  rows: Sequence[dict[str, Any]],
  selection_rows: Sequence[dict[str, Any]],
  report: Report,
  seeds: int,
) -> Analysis:
  """Rankings, selections, GELU-baseline comparisons, the paper's claims and instabilities of a
  trained result, every test in one Holm-corrected family."""
  analysis = Analysis(sweep.Family(), seeds)
  groups = group_by_dropout(rows)
  metrics = table_metrics(rows, report)
  main = metrics[0]
  for rate, group in groups.items():
    prefix = f"dropout {rate:g}, " if len(groups) > 1 else ""
    runs = {row["activation"]: row["run"] for row in group}
    claims = CLAIMS.get(task, ())
    if report.learning_rate is None:
      scope = prefix + "selected lr"
      selected = {m.key: sweep.selected_values(group, m.key) for m in metrics}
    else:
      scope = prefix + f"lr {report.learning_rate:g} (the paper's)"
      selected = {m.key: _values_at(group, report.learning_rate, m.key) for m in metrics}
    for metric in metrics:
      values = selected[metric.key]
      analysis.rankings.append(
        sweep.rank(analysis.family, scope, metric.label, values, scale=metric.scale)
      )
      _add_gelu(analysis, scope, metric, values, runs)
      _add_claims(analysis, scope, metric, values, runs, claims, report.paper)
    for lr in shared_learning_rates(group):
      values = _values_at(group, lr, main.key)
      if values == selected[main.key]:
        continue  # The paper's lr, or the lr every run selected: ranked above already.
      lr_scope = prefix + f"lr {lr:g}"
      analysis.rankings.append(
        sweep.rank(analysis.family, lr_scope, main.label, values, scale=main.scale)
      )
      every_lr = [c for c in claims if c.every_lr]
      _add_claims(analysis, lr_scope, main, values, runs, every_lr)
  add_selections(analysis, selection_rows)
  for row in [*selection_rows, *(r for r in rows if r not in selection_rows)]:
    analysis.jumps += [(row["run"], jump) for jump in row.get("jumps", [])]
  analysis.family.correct()
  return analysis


def table_metrics(rows: Sequence[dict[str, Any]], report: Report) -> list[Metric]:
  """The reported metric, then test error and test loss at the best-validation epoch."""
  available = {k for row in rows for g in row["grid"] for k in g["metrics"]}
  select = rows[0]["select_metric"]
  metrics = [Metric(report.metric, report.label, report.scale)]
  for key, label, scale in (
    ("best.test_error", "test error (%)", 100.0),
    ("best.test_loss", "test loss", 1.0),
  ):
    if key in available and key != report.metric:
      metrics.append(Metric(key, f"{label} at best-{select} epoch", scale))
  return metrics


def noise_metrics() -> list[Metric]:
  return [
    Metric(f"{key}@{a:g}", f"test {name} a={a:g}", lower_is_better=key == "loss")
    for key, name in (("accuracy", "accuracy"), ("loss", "log loss"))
    for a in NOISE_RANKED_LEVELS
  ]


def analyse_noise(
  results: Mapping[str, Mapping[str, Any]],
  classifier_rows: Sequence[dict[str, Any]],
  seeds: int,
) -> Analysis:
  """Rankings, GELU-baseline comparisons and the paper's claims under noise, the classifiers'
  lr selections and instabilities, and where the evaluated models stood."""
  analysis = Analysis(sweep.Family(), seeds)
  activations = {row["run"]: row["activation"] for row in classifier_rows}
  runs = {activations.get(name, name): name for name in results}
  for metric in noise_metrics():
    key, a = metric.key.split("@")
    values = {
      name: sweep.noise_values(r, key, float(a)) for name, r in results.items() if r["seeds"]
    }
    analysis.rankings.append(
      sweep.rank(
        analysis.family, "selected lr", metric.label, values, lower_is_better=metric.lower_is_better
      )
    )
    _add_gelu(analysis, "selected lr", metric, values, runs)
    _add_claims(analysis, "selected lr", metric, values, runs, CLAIMS["mnist_noise"])
  add_selections(analysis, classifier_rows)
  for row in classifier_rows:
    analysis.jumps += [(row["run"], jump) for jump in row.get("jumps", [])]
    selected = row["selected"]
    if selected is None or "best.validation_loss" not in selected["metrics"]:
      continue
    best = np.asarray(selected["metrics"]["best.validation_loss"]["values"])
    final = np.asarray(selected["metrics"]["final.validation_loss"]["values"])
    analysis.models.append(
      {
        "run": row["run"],
        "learning_rate": selected["learning_rate"],
        "best_epoch": selected["best_epoch"],
        "ratio": float(np.median(final / best)) if len(best) == len(final) else math.nan,
      }
    )
  analysis.family.correct()
  return analysis


# ---------------------------------------------------------------------------- the findings

FINDINGS_METHOD = (
  "Every line below is generated from summary.json by one fixed rule per kind of finding "
  "(`gelujax.study`). Two runs are compared by the exact two-sided Wilcoxon–Mann–Whitney "
  "rank-sum test over their seeds (tied values get mid-ranks, and are stated); the p-values "
  "of every test in this README are adjusted together by Holm's step-down method. A gap is "
  "*beyond the seed spread* where its Holm-adjusted p < 0.05, *p < 0.05 before correction "
  "only* where only its unadjusted p is, and *within the seed spread* otherwise. A member is "
  f"*unstable* where its training loss exceeds {sweep.JUMP_RATIO:g}x its running minimum (the "
  "lowest value of its earlier evaluations); each such jump is reported at its peak."
)


def _median(values: Sequence[float]) -> float:
  return float(np.median(values))


def _number(value: float, scale: float = 1.0) -> str:
  return sweep.format_number(value, scale)


def tests_finding(analysis: Analysis) -> str:
  """How many of the README's tests pass the correction, and whether any could."""
  tests = analysis.family.tests
  counts = collections.Counter(t.outcome for t in tests)
  smallest = sweep.smallest_p(analysis.seeds)
  line = (
    f"- Tests: {counts[sweep.BEYOND]} of the {len(tests)} rank-sum tests of this README are "
    f"beyond the seed spread after Holm's correction; {counts[sweep.UNCORRECTED]} more have "
    f"p < 0.05 before correction only. With {analysis.seeds} seeds a side the smallest possible "
    f"p is {smallest:.2g}"
  )
  if len(tests) * smallest >= sweep.ALPHA:
    line += f", and {len(tests)} x {smallest:.2g} >= 0.05: no test can pass the correction"
  return line + "."


def ranking_finding(ranking: sweep.Ranking) -> str:
  order = ", ".join(f"{run} {_number(_median(v), ranking.scale)}" for run, v in ranking.order)
  head = f"- Ranking [{ranking.scope}], {ranking.metric}"
  if len(ranking.order) == 1:
    return f"{head}: {order}, the only run."
  neighbours = "; ".join(f"{t.a} vs {t.b} {t.verdict()}" for t in ranking.tests)
  return f"{head}, best first: {order}. Neighbours: {neighbours}."


def selection_findings(analysis: Analysis) -> list[str]:
  """The count of decisive selections, then one line per run."""
  tested = [s for s in analysis.selections if s["test"] is not None]
  counts = collections.Counter(s["test"].outcome for s in tested)
  within = [s["run"] for s in tested if s["test"].outcome == sweep.WITHIN]
  lines = []
  if tested:
    lines.append(
      f"- Selections: of {len(tested)} runs' lr selections against the runner-up, "
      f"{counts[sweep.BEYOND]} beyond the seed spread, {counts[sweep.UNCORRECTED]} with p < 0.05 "
      f"before correction only and {counts[sweep.WITHIN]} within the seed spread"
      + (f" ({', '.join(within)})." if within else ".")
    )
  for s in analysis.selections:
    head = f"- Selection [{s['run']}]"
    if s["selected"] is None:
      lines.append(f"{head}: none, every member diverged.")
    elif s["test"] is None:
      only = "the grid's only lr" if s["lrs"] == 1 else "the only lr with a member not diverged"
      lines.append(f"{head}: lr {s['selected']:g}, {only}.")
    else:
      m1, m2 = (_number(m) for m in s["medians"])
      lines.append(
        f"{head}: lr {s['selected']:g} over lr {s['runner_up']:g}, median best {s['metric']} "
        f"{m1} vs {m2}: {s['test'].verdict()}."
      )
  return lines


def _relation(a: float, b: float) -> str:
  """How the first value stands against the second."""
  if a == b:
    return "equal"
  return "lower" if a < b else "higher"


def gelu_finding(scope: str, metric: Metric, test: sweep.Test, gelu: str, base: str) -> str:
  a, b = (dict(((test.a, test.values_a), (test.b, test.values_b)))[r] for r in (gelu, base))
  ma, mb = _median(a), _median(b)
  return (
    f"- GELU vs baseline [{scope}], {metric.label}: {gelu} {_number(ma, metric.scale)} vs "
    f"{base} {_number(mb, metric.scale)}, {_relation(ma, mb)}: "
    f"{test.verdict()}."
  )


def claim_status(same_order: bool | None, outcome: str) -> str:
  """The verdict on a claim: reproduced only in the paper's order and beyond the seed spread."""
  if same_order is None:
    return "not reproduced, equal medians"
  if same_order:
    return "reproduced" if outcome == sweep.BEYOND else "not reproduced, same order"
  return (
    "contradicted, opposite order"
    if outcome == sweep.BEYOND
    else ("not reproduced, opposite order")
  )


def claim_finding(task: str, claim: dict[str, Any]) -> str:
  test, metric = claim["test"], claim["metric"]
  values = {test.a: test.values_a, test.b: test.values_b}
  better, worse = _median(values[claim["better"]]), _median(values[claim["worse"]])
  direction = "below" if metric.lower_is_better else "above"
  same = None if better == worse else (better < worse) == metric.lower_is_better
  paper = ""
  if claim["paper"]:
    paper = " (its values: " + " vs ".join(_number(v, metric.scale) for v in claim["paper"]) + ")"
  return (
    f"- Paper [{claim['scope']}], {metric.label}: {FIGURES.get(task, 'the paper')} has "
    f"{claim['better']} {direction} {claim['worse']}{paper}; here {claim['better']} "
    f"{_number(better, metric.scale)} vs {claim['worse']} {_number(worse, metric.scale)}: "
    f"{claim_status(same, test.outcome)}, {test.verdict()}."
  )


def jump_findings(analysis: Analysis) -> list[str]:
  if not analysis.jumps:
    return [
      f"- Unstable: none; no member's training loss exceeds {sweep.JUMP_RATIO:g}x its running "
      "minimum."
    ]
  by_member: dict[tuple[str, float, int], list[dict[str, Any]]] = {}
  for run, jump in analysis.jumps:
    by_member.setdefault((run, jump["learning_rate"], jump["seed"]), []).append(jump)
  return [
    f"- Unstable [{run}, lr {lr:g}, seed {seed}]: training loss "
    + "; ".join(
      f"{_number(j['value'])} at epoch {j['epoch']:g}, {j['ratio']:.3g}x its running minimum "
      f"{_number(j['running_min'])}"
      for j in jumps
    )
    + "."
    for (run, lr, seed), jumps in by_member.items()
  ]


def model_findings(analysis: Analysis, epochs: int) -> list[str]:
  return [
    f"- Models [{m['run']}, lr {m['learning_rate']:g}]: evaluated after epoch {epochs}; lowest "
    f"validation loss at epoch {m['best_epoch']:g} (median over seeds); at epoch {epochs} the "
    f"validation loss is {m['ratio']:.3g}x that minimum (median over seeds)."
    for m in analysis.models
  ]


def write_findings(task: str, analysis: Analysis, epochs: int) -> dict[str, list[str]]:
  """The findings of a result, by section: each a list of ``- <Kind> ...`` lines."""
  sections = {
    "Tests": [tests_finding(analysis)],
    "Rankings": [ranking_finding(r) for r in analysis.rankings],
    "Learning-rate selection": selection_findings(analysis),
    "GELU against ReLU and ELU": [gelu_finding(*g) for g in analysis.gelu],
    "The paper's claims": [
      f"{FIGURES.get(task, 'The paper')} states: “{CLAIM_TEXT[task]}”. Each order this makes:",
      "",
      *[claim_finding(task, c) for c in analysis.claims],
    ]
    if analysis.claims
    else [],
    "Instabilities": jump_findings(analysis),
    "Models": model_findings(analysis, epochs),
  }
  return {name: lines for name, lines in sections.items() if lines}


def overview_findings(findings: Mapping[str, Sequence[str]]) -> list[str]:
  """The findings the top-level README repeats: the tests, the selections' count, the paper's
  claims and the instabilities."""
  keep = ("- Tests:", "- Selections:", "- Paper [", "- Unstable")
  return [line for lines in findings.values() for line in lines if line.startswith(keep)]


# ------------------------------------------------------------------------------- the tables

RANKING_INTRO = (
  "Runs by median, best first (losses and errors: lowest; accuracies: highest), each against "
  "the run ranked just above it by the exact two-sided rank-sum test over seeds, with its "
  "Holm-adjusted p-value over every test in this file and the outcome's fixed words (see "
  "Findings)."
)


def selection_cells(analysis: Analysis) -> dict[str, str]:
  return {
    s["run"]: f"{s['selected']:g} over {s['runner_up']:g}: {s['test'].verdict()}"
    for s in analysis.selections
    if s["test"] is not None
  }


def format_comparisons(analysis: Analysis) -> str:
  """A Markdown table of every GELU-baseline test."""
  lines = [
    "| where | metric | GELU | baseline | GELU median | baseline median | result |",
    "|---|---|---|---|---|---|---|",
  ]
  for scope, metric, test, gelu, base in analysis.gelu:
    values = {test.a: test.values_a, test.b: test.values_b}
    lines.append(
      f"| {scope} | {metric.label} | {gelu} | {base} | "
      f"{_number(_median(values[gelu]), metric.scale)} | "
      f"{_number(_median(values[base]), metric.scale)} | {test.verdict()} |"
    )
  return "\n".join(lines) + "\n"


def format_jumps(analysis: Analysis) -> str:
  lines = [
    "| run | lr | seed | epoch | training loss | running minimum | ratio |",
    "|---|---|---|---|---|---|---|",
  ]
  for run, j in analysis.jumps:
    lines.append(
      f"| {run} | {j['learning_rate']:g} | {j['seed']} | {j['epoch']:g} | {_number(j['value'])} "
      f"| {_number(j['running_min'])} | {j['ratio']:.3g} |"
    )
  return "\n".join(lines) + "\n"


def ranking_tables(analysis: Analysis) -> list[str]:
  """The rankings, one table per scope."""
  by_scope: dict[str, list[sweep.Ranking]] = {}
  for ranking in analysis.rankings:
    by_scope.setdefault(ranking.scope, []).append(ranking)
  text = [f"## Rankings and seed-to-seed spread\n\n{RANKING_INTRO}\n"]
  for scope, rankings in by_scope.items():
    text += [f"### {scope[0].upper()}{scope[1:]}\n", sweep.format_rankings(rankings)]
  return text


def comparison_tables(analysis: Analysis) -> list[str]:
  text = []
  if analysis.gelu:
    text += ["## GELU against ReLU and ELU\n", format_comparisons(analysis)]
  if analysis.jumps:
    text += [
      "## Unstable members\n",
      f"Members whose training loss exceeds {sweep.JUMP_RATIO:g}x its running minimum, at the "
      "peak of each jump.\n",
      format_jumps(analysis),
    ]
  return text
