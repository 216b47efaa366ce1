"""A result's statistics: the verdicts of its hypotheses and everything exploratory around them.

From the runs' values (:class:`gelujax.study.evidence.RunValues`) and each hypothesis' evidence
(:mod:`gelujax.study.evidence`), `analyse` finds:

- the verdicts of the task's primary and secondary families (:mod:`gelujax.study.verdicts`),
  each hypothesis tested as the task's :class:`gelujax.paper.Design` says: on the evaluation
  seeds at every pair of the two runs' candidate lrs (the rule of
  ``gelujax.paper.DESIGN_CHANGES``), or, where nothing is selected, on the grid's seeds and the
  evaluation seeds together; and, where the candidate rule changed anything, the verdicts of the
  earlier design (the selected lrs alone), kept beside them;
- each run's candidate lrs, with each lr's rank-sum p against the selected one;
- the fixed-lr sensitivity of each hypothesis whose lr is selected: the same comparison on the
  selection seeds at each lr both runs trained, against the same comparison at the selected
  lrs (on the evaluation seeds where they are trained);
- each run's lr selection, the selected lr against the runner-up;
- exploratory comparisons of every other activation with the baselines and with the
  references (by default the GELUs, ``gelujax.paper.REFERENCES``) trained beside it, on every
  metric, unpaired and, on the seeds both runs trained, seed by seed;
- what the curves show (:mod:`gelujax.study.curves`), and the claims whose paper values
  contradict their own direction.

Nothing exploratory is corrected or called significant: it carries its shift, interval and p.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from gelujax.paper import (
  BASELINES,
  HIGHER,
  LOWER,
  PRIMARY,
  REFERENCES,
  SECONDARY,
  Design,
  Hypothesis,
  Report,
)
from gelujax.paper import hypotheses as paper_hypotheses
from gelujax.study import runs, verdicts
from gelujax.study.evidence import (
  RunValues,
  candidate_evidence,
  find_run,
  hypothesis_dropout,
  untrained_runs,
)
from gelujax.study.runs import RunRow
from gelujax.study.verdicts import Comparison, PairedComparison, Verdict

# Noise levels the exploratory noise comparisons use (those of the paper's noise claims).
NOISE_LEVELS_COMPARED = (1.0, 3.0)


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
    baseline: the run it is compared with: a baseline's or a reference's.
    seeds: which seeds (``"evaluation seeds"``, ``"selection seeds"``).
    comparison: the unpaired comparison (rank-sum test, Hodges–Lehmann shift).
    paired: the same values seed by seed, on the seeds both runs have (None without any).
  """

  scope: str
  metric: Metric
  run: str
  baseline: str
  seeds: str
  comparison: Comparison
  paired: PairedComparison | None = None

  def to_json(self) -> dict[str, Any]:
    return {
      "scope": self.scope,
      "metric": self.metric.key,
      "run": self.run,
      "baseline": self.baseline,
      "seeds": self.seeds,
      "comparison": self.comparison.to_json(),
      "paired": self.paired and self.paired.to_json(),
    }


@dataclasses.dataclass(frozen=True)
class Selection:
  """A selection grid's selected lr against the runner-up (the lr of the next lowest median).

  Attributes:
    run: the run.
    metric: its selection metric.
    selected: the selected lr (None: every member diverged).
    runner_up: the lr of the next lowest median (None: no other lr to compare with).
    comparison: the selected lr's per-seed best selection metric against the runner-up's.
    lrs: the grid's number of lrs.
  """

  run: str
  metric: str
  selected: float | None
  runner_up: float | None
  comparison: Comparison | None
  lrs: int

  def to_json(self) -> dict[str, Any]:
    return {
      "run": self.run,
      "metric": self.metric,
      "selected": self.selected,
      "runner_up": self.runner_up,
      "comparison": self.comparison and self.comparison.to_json(),
      "lrs": self.lrs,
    }


@dataclasses.dataclass(frozen=True)
class Candidates:
  """A selection grid's candidate lrs (:func:`gelujax.study.runs.candidate_lrs`).

  Attributes:
    run: the run.
    selected: the selected lr (None: every member diverged; then ``lrs`` is empty).
    lrs: ``(lr, p or None, candidate)`` per lr, the selected one first.
  """

  run: str
  selected: float | None
  lrs: list[tuple[float, float | None, bool]]

  def to_json(self) -> dict[str, Any]:
    lrs = [{"learning_rate": lr, "p": p, "candidate": ok} for lr, p, ok in self.lrs]
    return {"run": self.run, "selected": self.selected, "lrs": lrs}


@dataclasses.dataclass
class Analysis:
  """Every statistical statement of one result.

  Attributes:
    task: the experiment.
    design: how its hypotheses meet their data.
    primary, secondary: the verdicts of each family, in the order of the task's hypotheses
      (its ``gelujax.paper.PAPER`` record).
    sensitivity: per hypothesis whose lr is selected, its fixed-lr sensitivity.
    selections: per selection grid, its `Selection`.
    exploratory: every other activation against each baseline and reference.
    curves: ``(run, lr or None, fact kind, fact)`` for every curve fact
      (:mod:`gelujax.study.curves`), selection runs then evaluation runs.
    contradictions: the hypotheses whose paper values contradict their claimed direction.
    earlier_primary, earlier_secondary: the verdicts of the earlier design (the selected lrs
      alone), where the candidate rule gives some hypothesis more than one pair; else empty.
    candidates: per selection grid, its `Candidates` (the rule of
      ``gelujax.paper.DESIGN_CHANGES``); empty where the design has no candidates.
    untrained: per hypothesis, the evaluation runs (``(run, lr, workdir name)``) its pending
      pairs wait for.
    evaluation_seeds: the evaluation seeds the design trains.
    command: the command that trains what is missing (the result's reproduce command).
    references: the activations every other one is compared with besides the baselines.
  """

  task: str
  design: Design
  primary: list[Verdict]
  secondary: list[Verdict]
  sensitivity: list[Sensitivity] = dataclasses.field(default_factory=list)
  selections: list[Selection] = dataclasses.field(default_factory=list)
  exploratory: list[Exploratory] = dataclasses.field(default_factory=list)
  curves: list[tuple[str, float | None, str, dict[str, Any]]] = dataclasses.field(
    default_factory=list
  )
  contradictions: list[Hypothesis] = dataclasses.field(default_factory=list)
  earlier_primary: list[Verdict] = dataclasses.field(default_factory=list)
  earlier_secondary: list[Verdict] = dataclasses.field(default_factory=list)
  candidates: list[Candidates] = dataclasses.field(default_factory=list)
  untrained: dict[Hypothesis, list[tuple[str, float, str]]] = dataclasses.field(
    default_factory=dict
  )
  evaluation_seeds: tuple[int, ...] = ()
  command: str = ""
  references: tuple[str, ...] = REFERENCES

  def changed(self) -> bool:
    """Whether the candidate rule changed the design of this result: some hypothesis is tested
    at more than one pair of lrs."""
    return any(len(v.outcomes) > 1 for v in (*self.primary, *self.secondary))


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


def selections(rows: Sequence[RunRow]) -> list[Selection]:
  """Each selection grid's selected lr against the runner-up (the next lowest median), on the
  per-seed best selection metric (a diverged member counting as +inf, as the selection does)."""
  found = []
  for row in rows:
    ranked = sorted(
      (g for g in row.grid if g.diverged < g.members),
      key=lambda g: runs.selection_median(g.select_values),
    )
    runner_up, comparison = None, None
    if len(ranked) > 1:
      selected, runner = (
        [math.inf if v is None else v for v in g.select_values] for g in ranked[:2]
      )
      runner_up, comparison = ranked[1].learning_rate, Comparison.of(selected, runner)
    chosen = row.selected and row.selected.learning_rate
    found.append(
      Selection(row.run, row.select_metric, chosen, runner_up, comparison, len(row.grid))
    )
  return found


def exploratory(
  values: Sequence[RunValues],
  metrics: Sequence[Metric],
  design: Design,
  references: Sequence[str] = REFERENCES,
) -> list[Exploratory]:
  """Every activation that is not a baseline against each baseline, then against each of
  ``references`` trained beside it (not itself; a pair of runs once), on each metric, per
  dropout rate: at the selected lrs (or, where nothing is selected, at each lr), on the
  evaluation seeds where both runs have them, else on the selection seeds; unpaired, and seed
  by seed on the seeds both runs trained."""
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
      others = [v for v in group if v.activation in BASELINES]
      others += [v for v in group if v.activation in references and v.activation not in BASELINES]
      for metric in metrics:
        compared: set[frozenset[str]] = set()
        for run in (v for v in group if v.activation not in BASELINES):
          for other in others:
            if other is run or frozenset((run.name, other.name)) in compared:
              continue
            compared.add(frozenset((run.name, other.name)))
            pair = _exploratory_values(run, other, lr, metric.key, design)
            if pair is not None:
              a, b, seeds = pair
              comparison = Comparison.of(list(a.values()), list(b.values()))
              found.append(
                Exploratory(scope, metric, run.name, other.name, seeds, comparison,
                            PairedComparison.of(a, b))
              )  # fmt: skip
  return found


def _exploratory_values(
  run: RunValues, baseline: RunValues, lr: float | None, key: str, design: Design
) -> tuple[dict[int, float], dict[int, float], str] | None:
  """Both runs' values (seed -> value) and which seeds they are; None where one has none."""
  evaluated: list[dict[int, float] | None] = []
  for v in (run, baseline):
    found = v.seeded_evaluated(lr, key)  # lr None (the selected lr) where the design selects
    found = None if isinstance(found, str) else found
    if not design.select_lr:
      grid = v.seeded_at(lr, key)
      found = None if found is None or grid is None else {**grid, **found}
    evaluated.append(found)
  if design.evaluation_seeds and all(evaluated):
    return (*evaluated, "evaluation seeds" if design.select_lr else "all seeds")
  a, b = run.seeded_at(lr, key), baseline.seeded_at(lr, key)
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


def candidate_rows(rows: Sequence[RunRow]) -> list[Candidates]:
  """Each selection grid's candidate lrs (:func:`gelujax.study.runs.candidate_lrs`), the
  selected lr first."""
  found = []
  for row in rows:
    if row.selected is None:
      found.append(Candidates(row.run, None, []))
      continue
    ordered = [row.selected, *(g for g in row.grid if g is not row.selected)]
    lrs = [
      (
        g.learning_rate,
        g.candidate_p,
        any(runs.same_lr(g.learning_rate, lr) for lr in row.candidates),
      )
      for g in ordered
    ]
    found.append(Candidates(row.run, row.selected.learning_rate, lrs))
  return found


def analyse(
  task: str,
  values: Sequence[RunValues],
  design: Design,
  *,
  selection_rows: Sequence[dict[str, Any]],
  metrics: Sequence[Metric],
  curves: Sequence[tuple[str, float | None, str, dict[str, Any]]] = (),
  epochs: tuple[int, int] | None = None,
  command: str = "",
  references: Sequence[str] = REFERENCES,
) -> Analysis:
  """The statistics of one result (see the module doc). ``epochs``: the runs' and the paper's
  (a caveat where fewer); ``command``: what trains the missing runs, for the pending words;
  ``references``: the activations every other one is compared with besides the baselines
  (exploratory)."""
  hypotheses = paper_hypotheses(task)
  facts = {"epochs": {"epochs": epochs[0], "paper": epochs[1]}} if epochs else {}
  earlier_design = dataclasses.replace(design, candidates=False)
  families, earlier = {}, {}
  for family in (PRIMARY, SECONDARY):
    members = [h for h in hypotheses if h.family == family]
    families[family] = verdicts.judge(
      members, lambda h: candidate_evidence(h, values, design, facts)
    )
    earlier[family] = verdicts.judge(
      members, lambda h: candidate_evidence(h, values, earlier_design, facts)
    )
  analysis = Analysis(task, design, families[PRIMARY], families[SECONDARY])
  if design.select_lr and design.candidates and analysis.changed():
    analysis.earlier_primary, analysis.earlier_secondary = earlier[PRIMARY], earlier[SECONDARY]
  if design.select_lr:
    for verdict in (*earlier[PRIMARY], *earlier[SECONDARY]):
      found = sensitivity(verdict.hypothesis, values, verdict)
      if found is not None:
        analysis.sensitivity.append(found)
  analysis.selections = selections(selection_rows) if design.select_lr else []
  if design.select_lr and design.candidates:
    analysis.candidates = candidate_rows(selection_rows)
  analysis.exploratory = exploratory(values, metrics, design, references)
  analysis.references = tuple(references)
  analysis.curves = list(curves)
  analysis.contradictions = contradictions(hypotheses)
  for verdict in (*analysis.primary, *analysis.secondary):
    missing = untrained_runs(verdict.hypothesis, verdict, values, design)
    if missing:
      analysis.untrained[verdict.hypothesis] = missing
  analysis.evaluation_seeds = tuple(design.evaluation_seeds)
  analysis.command = command
  return analysis


def table_metrics(rows: Sequence[RunRow], report: Report) -> list[Metric]:
  """The reported metric, then test error and test loss at the best-selection epoch."""
  available = {k for row in rows for g in row.grid for k in g.metrics}
  select = rows[0].select_metric
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
