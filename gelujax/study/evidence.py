"""What each hypothesis is tested on: the runs' per-seed values, gathered as the design says.

The runs of a result reach the study as :class:`RunValues`: per run, the per-seed values of
every metric at every learning rate of its selection grid (the selection seeds), and at the lrs
of its evaluation run (the evaluation seeds), or why that run is not there yet. From them,
`gather` makes a hypothesis' :class:`gelujax.study.verdicts.Evidence` as the task's
:class:`gelujax.paper.Design` says: on the evaluation seeds at a pair of the two runs'
candidate lrs (the rule of ``gelujax.paper.DESIGN_CHANGES``; `candidate_pairs`), or, where
nothing is selected, on the grid's seeds and the evaluation seeds together; or it says why the
hypothesis cannot be tested yet. Each piece of evidence carries the words its verdict must
(`caveats`): the tested metric still falling at the last epoch, a run that does not learn,
fewer epochs than the paper's.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from gelujax.paper import Design, Hypothesis
from gelujax.study import curves, numbers, runs
from gelujax.study.verdicts import Candidate, Evidence, Verdict

PENDING_EVALUATION = "pending: evaluation seeds not trained"
# Per-seed values: a list in seed order, or seed -> value (which pairs can be matched on).
Values = Sequence[float] | Mapping[int, float]


def seeded(values: Values, seeds: Sequence[int]) -> dict[int, float]:
  """``values`` as seed -> value: a mapping as it is, a list with ``seeds`` in order (as many
  as there are values)."""
  if isinstance(values, Mapping):
    return {int(k): float(v) for k, v in values.items()}
  if len(values) != len(seeds):
    raise ValueError(
      f"{len(values)} values for {len(seeds)} seeds {list(seeds)}: give the values of a run "
      "with diverged members as seed -> value."
    )
  return {int(k): float(v) for k, v in zip(seeds, values, strict=True)}


@dataclasses.dataclass(frozen=True)
class RunValues:
  """One run's per-seed values.

  Attributes:
    name: the selection grid's run name (``"relu_dropout0.5"``).
    activation, dropout: the run's.
    selected_lr: the lr its selection grid selected (None: every member diverged).
    selection: lr -> metric key -> the selection seeds' values (non-diverged members).
    evaluation: lr -> metric key -> the evaluation seeds' values, or why that lr has none yet
      (``"pending: ..."``); or why the run has none at all. ``{}`` where the design trains no
      evaluation seeds.
    selection_seeds, evaluation_seeds: the seeds of each.
    learning_rates: the lrs the fixed-lr sensitivity compares at (a run without values at one
      of them shows it as not evaluated).
    candidates: the candidate lrs (``gelujax.paper.DESIGN_CHANGES``), the selected first;
      empty: the selected lr alone.
    facts: lr -> what the curves of the values tested there show: ``"falling"`` (metric key ->
      :func:`gelujax.study.curves.still_falling`) and ``"not_learning"``
      (:func:`gelujax.study.curves.not_learning`, or None).
  """

  name: str
  activation: str
  dropout: float
  selected_lr: float | None
  selection: Mapping[float, Mapping[str, Values]]
  evaluation: Mapping[float, Mapping[str, Values] | str] | str
  selection_seeds: Sequence[int]
  evaluation_seeds: Sequence[int] = ()
  learning_rates: Sequence[float] = ()
  candidates: Sequence[float] = ()
  facts: Mapping[float, Mapping[str, Any]] = dataclasses.field(default_factory=dict)

  def at(self, learning_rate: float | None, key: str) -> list[float] | None:
    """The selection seeds' values at ``learning_rate`` (None: the selected lr); None where
    they are not there."""
    found = self.seeded_at(learning_rate, key)
    return None if found is None else list(found.values())

  def seeded_at(self, learning_rate: float | None, key: str) -> dict[int, float] | None:
    """:meth:`at` as seed -> value."""
    lr = self.selected_lr if learning_rate is None else learning_rate
    for found, values in self.selection.items():
      if lr is not None and runs.same_lr(found, lr) and key in values:
        return seeded(values[key], self.selection_seeds)
    return None

  def evaluated(self, learning_rate: float | None, key: str) -> list[float] | None:
    """The evaluation seeds' values at ``learning_rate`` (None: the selected lr, or the
    evaluation run's one lr); None where there are none."""
    found = self.seeded_evaluated(learning_rate, key)
    return None if isinstance(found, str) or found is None else list(found.values())

  def seeded_evaluated(
    self, learning_rate: float | None, key: str
  ) -> dict[int, float] | str | None:
    """:meth:`evaluated` as seed -> value, or why the lr has none yet (``"pending: ..."``)."""
    if isinstance(self.evaluation, str):
      return self.evaluation
    lr = self.selected_lr if learning_rate is None else learning_rate
    if learning_rate is None and len(self.evaluation) == 1:
      lr = next(iter(self.evaluation))
    for found, values in self.evaluation.items():
      if lr is not None and runs.same_lr(found, lr):
        if isinstance(values, str):
          return values
        return seeded(values[key], self.evaluation_seeds) if key in values else None
    return None

  def candidate_lrs(self, design: Design) -> list[float | None]:
    """The lrs a hypothesis is tested at: every candidate where the design evaluates them, else
    the selected lr alone (None where nothing was selected)."""
    if design.candidates and self.candidates:
      return list(self.candidates)
    return [self.selected_lr]

  def facts_at(self, learning_rate: float | None) -> Mapping[str, Any]:
    for found, facts in self.facts.items():
      if learning_rate is not None and runs.same_lr(found, learning_rate):
        return facts
    return {}


def find_run(values: Sequence[RunValues], activation: str, dropout: float) -> RunValues | None:
  return next(
    (v for v in values if v.activation == activation and math.isclose(v.dropout, dropout)), None
  )


def hypothesis_dropout(h: Hypothesis, values: Sequence[RunValues]) -> float:
  """The hypothesis' dropout rate: its own, or the runs' (the task's)."""
  return h.dropout if h.dropout is not None else (values[0].dropout if values else 0.0)


def hypothesis_runs(
  h: Hypothesis, values: Sequence[RunValues]
) -> tuple[RunValues, RunValues] | str:
  """GELU's run and the baseline's of ``h``, or why one is missing (``"not run: ..."``)."""
  dropout = hypothesis_dropout(h, values)
  found = [find_run(values, activation, dropout) for activation in (h.gelu, h.baseline)]
  missing = [a for a, v in zip((h.gelu, h.baseline), found, strict=True) if v is None]
  if missing:
    return f"not run: no {' or '.join(missing)} run with dropout {dropout:g}"
  return found[0], found[1]


def candidate_pairs(
  h: Hypothesis, values: Sequence[RunValues], design: Design
) -> list[tuple[float | None, float | None]]:
  """The pairs of lrs (GELU's, the baseline's) ``h`` is tested at: every candidate of GELU's
  run with every candidate of the baseline's, the selected lrs first (one pair, the selected
  lrs, where the design has no candidates); ``h``'s own lr where nothing is selected."""
  found = hypothesis_runs(h, values)
  if isinstance(found, str):
    return []
  if not design.select_lr:
    return [(h.learning_rate, h.learning_rate)]
  gelu, baseline = found
  return [(a, b) for a in gelu.candidate_lrs(design) for b in baseline.candidate_lrs(design)]


def gather(
  h: Hypothesis,
  values: Sequence[RunValues],
  design: Design,
  learning_rates: tuple[float | None, float | None] | None = None,
  caveat_facts: Mapping[str, Any] | None = None,
) -> Evidence | str:
  """What ``h`` is tested on under ``design`` at ``learning_rates`` (GELU's, the baseline's;
  None: the selected lrs), or why it cannot be tested yet."""
  found = hypothesis_runs(h, values)
  if isinstance(found, str):
    return found
  pairs = [(None, None)] if learning_rates is None else [learning_rates]
  lr_pair = pairs[0]
  selected = all(
    lr is None or (run.selected_lr is not None and runs.same_lr(lr, run.selected_lr))
    for run, lr in zip(found, lr_pair, strict=True)
  )
  if design.select_lr and not selected:
    untrained = [
      f"{lr:g} of {run.name}"
      for run, lr in zip(found, lr_pair, strict=True)
      if not isinstance(run.evaluation, str)
      and run.seeded_evaluated(lr, h.metric) == PENDING_EVALUATION
    ]
    if untrained:
      lrs = f"lr{'s' if len(untrained) > 1 else ''} {', '.join(untrained)}"
      return f"{PENDING_EVALUATION} at candidate {lrs}"
  sides: list[dict[int, float]] = []
  used: list[float | None] = []
  seeds = ""
  for run, lr in zip(found, lr_pair, strict=True):
    if isinstance(run.evaluation, str):
      return run.evaluation
    if design.select_lr:
      lr = run.selected_lr if lr is None else lr
      tested = run.seeded_evaluated(lr, h.metric)
      if isinstance(tested, str):
        return tested
      where = "at the selected lr" if selected else f"at lrs {lr_pair[0]:g} vs {lr_pair[1]:g}"
      seeds = f"evaluation seeds {numbers.seeds(run.evaluation_seeds)} {where}"
    else:
      lr = h.learning_rate if lr is None else lr
      grid = run.seeded_at(lr, h.metric)
      extra = run.seeded_evaluated(lr, h.metric) if design.evaluation_seeds else {}
      if isinstance(extra, str):
        return extra
      tested = None if grid is None or extra is None else {**grid, **extra}
      seeds = f"seeds {numbers.seeds([*run.selection_seeds, *run.evaluation_seeds])}"
    if tested is None:
      return PENDING_EVALUATION
    if not tested:
      return f"no values: every member of {run.name} diverged"
    sides.append(tested)
    used.append(lr)
  gelu, baseline = sides
  return Evidence(
    tuple(gelu.values()),
    tuple(baseline.values()),
    seeds,
    (used[0], used[1]),
    tuple(gelu),
    tuple(baseline),
    caveats(h, found, (used[0], used[1]), caveat_facts or {}),
  )


def caveats(
  h: Hypothesis,
  found: tuple[RunValues, RunValues],
  learning_rates: tuple[float | None, float | None],
  facts: Mapping[str, Any],
) -> tuple[tuple[str, Any], ...]:
  """The words a verdict on ``h`` at ``learning_rates`` must carry, as ``(kind, fact)``:

  - ``"falling"``: ``h`` tests a value after the last epoch (``final.<key>``) and, in either
    run, the median over seeds of that metric's fall over the last fifth of training is at
    least ``curves.FALLING_SHARE`` of its value there: ``{"metric", "start", "epoch", "gelu",
    "baseline"}`` (each run's median share, or None);
  - ``"not_learning"``: a run whose tested values do not learn (``curves.not_learning``):
    ``{"run", "learning_rate", **fact}``;
  - ``"epochs"``: the runs trained fewer epochs than the paper's (``facts``: ``{"epochs",
    "paper"}``).
  """
  found_caveats: list[tuple[str, Any]] = []
  if h.metric.startswith("final."):
    key = h.metric.split(".", 1)[1]
    falls = [
      run.facts_at(lr).get("falling", {}).get(key)
      for run, lr in zip(found, learning_rates, strict=True)
    ]
    shares = [None if f is None else f["median"] for f in falls]
    if any(share is not None and share >= curves.FALLING_SHARE for share in shares):
      where = next(f for f in falls if f is not None)
      found_caveats.append(
        ("falling", {"metric": key, "start": where["start"], "epoch": where["epoch"],
                     "gelu": shares[0], "baseline": shares[1]})
      )  # fmt: skip
  for run, lr in zip(found, learning_rates, strict=True):
    fact = run.facts_at(lr).get("not_learning")
    if fact:
      found_caveats.append(("not_learning", {"run": run.name, "learning_rate": lr, **fact}))
  epochs = facts.get("epochs")
  if epochs and epochs["epochs"] < epochs["paper"]:
    found_caveats.append(("epochs", dict(epochs)))
  return tuple(found_caveats)


def candidate_evidence(
  h: Hypothesis,
  values: Sequence[RunValues],
  design: Design,
  caveat_facts: Mapping[str, Any] | None = None,
) -> list[Candidate] | str:
  """``h``'s evidence at each of its :func:`candidate_pairs`, or why it has none."""
  found = hypothesis_runs(h, values)
  if isinstance(found, str):
    return found
  return [
    Candidate(pair, gather(h, values, design, pair, caveat_facts))
    for pair in candidate_pairs(h, values, design)
  ]


def untrained_runs(
  h: Hypothesis, verdict: Verdict, values: Sequence[RunValues], design: Design
) -> list[tuple[str, float, str]]:
  """The evaluation runs ``(run, lr, workdir name)`` that ``verdict``'s pending pairs wait for:
  a candidate lr whose evaluation seeds are not trained."""
  found = hypothesis_runs(h, values)
  if isinstance(found, str) or not design.select_lr:
    return []
  missing = []
  for side, run in enumerate(found):  # GELU's run's first, then the baseline's.
    for outcome in verdict.pending():
      lr = outcome.learning_rates[side]
      if lr is None or isinstance(run.evaluation, str):
        continue
      if run.seeded_evaluated(lr, h.metric) == PENDING_EVALUATION:
        selected = run.selected_lr is not None and runs.same_lr(lr, run.selected_lr)
        name = runs.evaluation_name(run.name, None if selected else lr)
        if (run.name, lr, name) not in missing:
          missing.append((run.name, lr, name))
  return missing
