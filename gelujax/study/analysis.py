"""A result's statistics: the verdicts of its hypotheses and everything exploratory around them.

The runs of a result reach this module as :class:`RunValues`: per run, the per-seed values of
every metric at every learning rate of its selection grid (the selection seeds), and at the lrs
of its evaluation run (the evaluation seeds), or why that run is not there yet. From them:

- the verdicts of the task's primary and secondary families (:mod:`gelujax.study.verdicts`),
  each hypothesis tested as the task's :class:`gelujax.paper.Design` says: on the evaluation
  seeds at the lr selected on the selection seeds, or, where nothing is selected, on the grid's
  seeds and the evaluation seeds together;
- the fixed-lr sensitivity of each hypothesis whose lr is selected: the same comparison on the
  selection seeds at each lr both runs trained, against the same comparison at the selected
  lrs (on the evaluation seeds where they are trained);
- each run's lr selection, the selected lr against the runner-up;
- exploratory comparisons of every other activation with the baselines, on every metric;
- what the curves show (:mod:`gelujax.study.curves`), and the claims whose paper values
  contradict their own direction.

Nothing exploratory is corrected or called significant: it carries its shift, interval and p.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from gelujax.paper import (
  BASELINES,
  HIGHER,
  HYPOTHESES,
  LOWER,
  PRIMARY,
  SECONDARY,
  Design,
  Hypothesis,
  Report,
)
from gelujax.study import runs, verdicts
from gelujax.study.verdicts import Comparison, Evidence, Verdict

# Noise levels the exploratory noise comparisons use (those of the paper's noise claims).
NOISE_LEVELS_COMPARED = (1.0, 3.0)
PENDING_EVALUATION = "pending: evaluation seeds not trained"


@dataclasses.dataclass(frozen=True)
class Metric:
  """A metric that runs are compared on.

  Attributes:
    key: its key in :class:`RunValues` (``"best.test_error"``, ``"accuracy@1"``).
    label: its words, with units.
    scale: multiplies the values shown (100 for percent).
  """

  key: str
  label: str
  scale: float = 1.0


@dataclasses.dataclass(frozen=True)
class RunValues:
  """One run's per-seed values.

  Attributes:
    name: the selection grid's run name (``"relu_dropout0.5"``).
    activation, dropout: the run's.
    selected_lr: the lr its selection grid selected (None: every member diverged).
    selection: lr -> metric key -> the selection seeds' values (non-diverged members).
    evaluation: lr -> metric key -> the evaluation seeds' values; or why there are none yet
      (``"pending: ..."``). ``{}`` where the design trains no evaluation seeds.
    selection_seeds, evaluation_seeds: the seeds of each.
    learning_rates: the lrs the fixed-lr sensitivity compares at (a run without values at one
      of them shows it as not evaluated).
  """

  name: str
  activation: str
  dropout: float
  selected_lr: float | None
  selection: Mapping[float, Mapping[str, Sequence[float]]]
  evaluation: Mapping[float, Mapping[str, Sequence[float]]] | str
  selection_seeds: Sequence[int]
  evaluation_seeds: Sequence[int] = ()
  learning_rates: Sequence[float] = ()

  def at(self, learning_rate: float | None, key: str) -> list[float] | None:
    """The selection seeds' values at ``learning_rate`` (None: the selected lr); None where
    they are not there."""
    lr = self.selected_lr if learning_rate is None else learning_rate
    for found, values in self.selection.items():
      if lr is not None and runs.same_lr(found, lr) and key in values:
        return list(values[key])
    return None

  def evaluated(self, learning_rate: float | None, key: str) -> list[float] | None:
    """The evaluation seeds' values at ``learning_rate`` (None: the evaluation run's one lr)."""
    if isinstance(self.evaluation, str):
      return None
    for found, values in self.evaluation.items():
      if (learning_rate is None or runs.same_lr(found, learning_rate)) and key in values:
        return list(values[key])
    return None


@dataclasses.dataclass(frozen=True)
class Sensitivity:
  """A hypothesis' comparison on the selection seeds at each lr both runs trained.

  Attributes:
    hypothesis: the hypothesis.
    reference: the comparison at the selected lrs it is set against, and where that comes from
      (``"evaluation seeds"`` or ``"selection seeds"``); None where neither exists.
    selected_lrs: GELU's and the baseline's selected lr.
    at_lr: lr -> the comparison there (None where a run has no values at that lr).
  """

  hypothesis: Hypothesis
  reference: tuple[Comparison, str] | None
  selected_lrs: tuple[float | None, float | None]
  at_lr: dict[float, Comparison | None]

  def agrees(self, learning_rate: float) -> bool | None:
    """Whether the shift at ``learning_rate`` has the sign of the reference's (None where
    either is missing or zero)."""
    comparison = self.at_lr.get(learning_rate)
    if comparison is None or self.reference is None:
      return None
    here, there = verdicts.sign(comparison.shift), verdicts.sign(self.reference[0].shift)
    return None if not here or not there else here == there


@dataclasses.dataclass(frozen=True)
class Exploratory:
  """One exploratory comparison: ``run`` against ``baseline`` on ``metric``.

  Attributes:
    scope: where (``"dropout 0.5, selected lr"``).
    seeds: which seeds (``"evaluation seeds"``, ``"selection seeds"``).
  """

  scope: str
  metric: Metric
  run: str
  baseline: str
  seeds: str
  comparison: Comparison


@dataclasses.dataclass
class Analysis:
  """Every statistical statement of one result.

  Attributes:
    task: the experiment.
    design: how its hypotheses meet their data.
    primary, secondary: the verdicts of each family, in the order of ``paper.HYPOTHESES``.
    sensitivity: per hypothesis whose lr is selected, its fixed-lr sensitivity.
    selections: per selection grid: ``{"run", "metric", "selected", "runner_up",
      "comparison", "lrs"}`` (``comparison`` None when there is nothing to compare).
    exploratory: every other activation against each baseline.
    curves: ``(run, lr or None, fact kind, fact)`` for every curve fact
      (:mod:`gelujax.study.curves`), selection runs then evaluation runs.
    contradictions: the hypotheses whose paper values contradict their claimed direction.
  """

  task: str
  design: Design
  primary: list[Verdict]
  secondary: list[Verdict]
  sensitivity: list[Sensitivity] = dataclasses.field(default_factory=list)
  selections: list[dict[str, Any]] = dataclasses.field(default_factory=list)
  exploratory: list[Exploratory] = dataclasses.field(default_factory=list)
  curves: list[tuple[str, float | None, str, dict[str, Any]]] = dataclasses.field(
    default_factory=list
  )
  contradictions: list[Hypothesis] = dataclasses.field(default_factory=list)


def describe_seeds(seeds: Sequence[int]) -> str:
  """``[0, 1, 2, 7]`` -> ``"0–2, 7"``: runs of consecutive seeds as ranges."""
  parts: list[list[int]] = []
  for seed in sorted(set(seeds)):
    if parts and seed == parts[-1][-1] + 1:
      parts[-1].append(seed)
    else:
      parts.append([seed])
  return ", ".join(f"{p[0]}–{p[-1]}" if len(p) > 2 else ", ".join(map(str, p)) for p in parts)


def find_run(values: Sequence[RunValues], activation: str, dropout: float) -> RunValues | None:
  return next(
    (v for v in values if v.activation == activation and math.isclose(v.dropout, dropout)), None
  )


def hypothesis_dropout(h: Hypothesis, values: Sequence[RunValues]) -> float:
  """The hypothesis' dropout rate: its own, or the runs' (the task's)."""
  return h.dropout if h.dropout is not None else (values[0].dropout if values else 0.0)


def evidence(h: Hypothesis, values: Sequence[RunValues], design: Design) -> Evidence | str:
  """What ``h`` is tested on under ``design``, or why it cannot be tested yet."""
  dropout = hypothesis_dropout(h, values)
  found = [find_run(values, activation, dropout) for activation in (h.gelu, h.baseline)]
  missing = [a for a, v in zip((h.gelu, h.baseline), found, strict=True) if v is None]
  if missing:
    return f"not run: no {' or '.join(missing)} run with dropout {dropout:g}"
  gelu, baseline = found
  sides = []
  for run in (gelu, baseline):
    if isinstance(run.evaluation, str):
      return run.evaluation
    if design.select_lr:
      tested = run.evaluated(None, h.metric)
      seeds = f"evaluation seeds {describe_seeds(run.evaluation_seeds)} at the selected lr"
    else:
      grid = run.at(h.learning_rate, h.metric)
      extra = run.evaluated(h.learning_rate, h.metric) if design.evaluation_seeds else []
      tested = None if grid is None or extra is None else grid + extra
      seeds = f"seeds {describe_seeds([*run.selection_seeds, *run.evaluation_seeds])}"
    if tested is None:
      return PENDING_EVALUATION
    if not tested:
      return f"no values: every member of {run.name} diverged"
    sides.append(tested)
  return Evidence(tuple(sides[0]), tuple(sides[1]), seeds)


def sensitivity(h: Hypothesis, values: Sequence[RunValues], verdict: Verdict) -> Sensitivity | None:
  """``h``'s comparison on the selection seeds at each lr both runs trained (None where its lr
  is not selected, or a run is missing)."""
  if h.learning_rate is not None:
    return None
  dropout = hypothesis_dropout(h, values)
  gelu, baseline = (find_run(values, a, dropout) for a in (h.gelu, h.baseline))
  if gelu is None or baseline is None:
    return None

  def compare(lr_gelu: float | None, lr_baseline: float | None) -> Comparison | None:
    a, b = gelu.at(lr_gelu, h.metric), baseline.at(lr_baseline, h.metric)
    return Comparison.of(a, b) if a and b else None

  reference = None
  if verdict.comparison is not None:
    reference = (verdict.comparison, "evaluation seeds")
  elif (selected := compare(None, None)) is not None:
    reference = (selected, "selection seeds")
  shared = [
    lr for lr in gelu.learning_rates if any(runs.same_lr(lr, x) for x in baseline.learning_rates)
  ]
  return Sensitivity(
    h,
    reference,
    (gelu.selected_lr, baseline.selected_lr),
    {lr: compare(lr, lr) for lr in shared},
  )


def selections(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
  """Each selection grid's selected lr against the runner-up (the next lowest median), on the
  per-seed best selection metric (a diverged member counting as +inf, as the selection does)."""
  found = []
  for row in rows:
    ranked = sorted(
      (g for g in row["grid"] if g["diverged"] < g["members"]),
      key=lambda g: runs.selection_median(g["select_values"]),
    )
    entry = {
      "run": row["run"],
      "metric": row["select_metric"],
      "selected": row["selected"] and row["selected"]["learning_rate"],
      "runner_up": None,
      "comparison": None,
      "lrs": len(row["grid"]),
    }
    if len(ranked) > 1:
      selected, runner = (
        [math.inf if v is None else v for v in g["select_values"]] for g in ranked[:2]
      )
      entry["runner_up"] = ranked[1]["learning_rate"]
      entry["comparison"] = Comparison.of(selected, runner)
    found.append(entry)
  return found


def exploratory(
  values: Sequence[RunValues], metrics: Sequence[Metric], design: Design
) -> list[Exploratory]:
  """Every activation that is not a baseline against each baseline on each metric, per dropout
  rate: at the selected lrs (or, where nothing is selected, at each lr), on the evaluation seeds
  where both runs have them, else on the selection seeds."""
  found = []
  dropouts = list(dict.fromkeys(v.dropout for v in values))
  lrs: list[float | None] = [None]
  if not design.select_lr and values:
    lrs = list(values[0].selection)
  for dropout in dropouts:
    group = [v for v in values if v.dropout == dropout]
    for lr in lrs:
      scope = (f"dropout {dropout:g}, " if len(dropouts) > 1 else "") + (
        "selected lr" if lr is None else f"lr {lr:g}"
      )
      for metric in metrics:
        for run in (v for v in group if v.activation not in BASELINES):
          for baseline in (v for v in group if v.activation in BASELINES):
            pair = _exploratory_values(run, baseline, lr, metric.key, design)
            if pair is not None:
              a, b, seeds = pair
              found.append(
                Exploratory(scope, metric, run.name, baseline.name, seeds, Comparison.of(a, b))
              )
  return found


def _exploratory_values(
  run: RunValues, baseline: RunValues, lr: float | None, key: str, design: Design
) -> tuple[list[float], list[float], str] | None:
  if design.select_lr:
    evaluated = [run.evaluated(None, key), baseline.evaluated(None, key)]
  else:
    evaluated = [
      None
      if v.evaluated(lr, key) is None or v.at(lr, key) is None
      else v.at(lr, key) + v.evaluated(lr, key)
      for v in (run, baseline)
    ]
  if design.evaluation_seeds and all(evaluated):
    return (*evaluated, "evaluation seeds" if design.select_lr else "all seeds")
  a, b = run.at(lr, key), baseline.at(lr, key)
  return (a, b, "selection seeds") if a and b else None


def contradictions(hypotheses: Sequence[Hypothesis]) -> list[Hypothesis]:
  """The hypotheses whose two paper values are ordered against their claimed direction (the
  paper's text claims one order, its figure's values show the other)."""
  found = []
  for h in hypotheses:
    gelu, baseline = h.paper
    if gelu is None or baseline is None or h.direction not in (LOWER, HIGHER):
      continue
    if (gelu > baseline) if h.direction == LOWER else (gelu < baseline):
      found.append(h)
  return found


def analyse(
  task: str,
  values: Sequence[RunValues],
  design: Design,
  *,
  selection_rows: Sequence[dict[str, Any]],
  metrics: Sequence[Metric],
  curves: Sequence[tuple[str, float | None, str, dict[str, Any]]] = (),
) -> Analysis:
  """The statistics of one result (see the module doc)."""
  hypotheses = HYPOTHESES.get(task, ())
  families = {}
  for family in (PRIMARY, SECONDARY):
    members = [h for h in hypotheses if h.family == family]
    families[family] = verdicts.judge(members, lambda h: evidence(h, values, design))
  analysis = Analysis(task, design, families[PRIMARY], families[SECONDARY])
  if design.select_lr:
    for verdict in (*analysis.primary, *analysis.secondary):
      found = sensitivity(verdict.hypothesis, values, verdict)
      if found is not None:
        analysis.sensitivity.append(found)
  analysis.selections = selections(selection_rows) if design.select_lr else []
  analysis.exploratory = exploratory(values, metrics, design)
  analysis.curves = list(curves)
  analysis.contradictions = contradictions(hypotheses)
  return analysis


def table_metrics(rows: Sequence[dict[str, Any]], report: Report) -> list[Metric]:
  """The reported metric, then test error and test loss at the best-selection epoch."""
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
  """Test accuracy and log loss at the noise levels of the paper's noise claims."""
  return [
    Metric(f"{key}@{a:g}", f"test {name} a={a:g}")
    for key, name in (("accuracy", "accuracy"), ("loss", "log loss"))
    for a in NOISE_LEVELS_COMPARED
  ]
