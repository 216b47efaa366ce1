"""The transformer study's runs read and judged: each arm's values, the families' verdicts
(`gelujax.study.transformer.Design`'s ranking, forms and controls) and the wrong form's kept rows;
nothing is judged while an arm is not finished."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from pathlib import Path

from gelujax.study import best, confirm, forms, grids, runs, wrong_form
from gelujax.study.judge import DIFFERENT, EQUIVALENT
from gelujax.study.transformer import NOT_ESTABLISHED, Design

# ----------------------------------------------------------------------------- the verdicts


@dataclasses.dataclass(frozen=True)
class Result:
  """The study's verdicts from its finished runs.

  Attributes:
    ranking: the ranking family's outcomes, measure by measure (`gelujax.study.confirm.Outcome`;
      its hypothesis' ``metric`` says which).
    forms: the forms family's and the control's outcomes, measure by measure
      (`gelujax.study.forms.Outcome`, judged within (family, dtype, metric)).
    missing: the arms not finished: while any is, nothing is judged.
    at_last: arm -> the seeds of the members whose best epoch is the last (finished arms).
  """

  ranking: tuple[confirm.Outcome, ...]
  forms: tuple[forms.Outcome, ...]
  missing: tuple[str, ...]
  at_last: Mapping[str, list[int]]

  def control_passed(self) -> bool:
    """Whether the control was found *different* from gelu on every measure."""
    found = [o for o in self.forms if o.comparison.control]
    return bool(found) and all(o.verdict == DIFFERENT for o in found)

  def negative_passed(self) -> bool:
    """Whether the negative control, where the design has one, was found *equivalent* to gelu
    on every measure."""
    return all(o.verdict == EQUIVALENT for o in self.forms if o.comparison.negative)

  def reported(self, o: forms.Outcome) -> str:
    """A forms comparison's verdict as the study reports it: *not established* for an
    *equivalent* where the control was not found *different* on every measure, or the negative
    control not *equivalent*."""
    passed = self.control_passed() and self.negative_passed()
    if o.verdict == EQUIVALENT and o.comparison.is_form and not passed:
      return NOT_ESTABLISHED
    return o.verdict


def finished_runs(design: Design, out: Path) -> dict[str, runs.Run]:
  """The study's finished runs, each read once: arm -> its files."""
  return runs.finished(out, {arm: design.folder(arm) for arm in design.arms})


def arm_values(design: Design, arm: str, run: runs.Run) -> dict[str, dict[int, float]]:
  """A finished run's values at the arm's lr: measure key -> seed -> value as its summary holds
  it (NaN for a diverged member), a rate that must count whole examples (`confirm.whole`); an
  arm on another set of seeds (:meth:`Design.offset`) keyed by the seed it is paired with.

  Raises:
    ValueError: the run's seeds are not the design's.
  """
  members = runs.lr_members(run, design.learning_rates[arm])
  offset = design.offset(arm)
  seeds = [s + offset for s in design.seeds]
  if sorted(m["seed"] for m in members) != sorted(seeds):
    raise ValueError(
      f"{run.workdir} holds seeds {[m['seed'] for m in members]} at lr "
      f"{design.learning_rates[arm]:g}, not the design's {seeds}: it is not a run "
      f"of {design.name}."
    )
  lr = design.learning_rates[arm]
  found = {
    m.key: {s - offset: v for s, v in runs.lr_values(run, m.key, lr).items()}
    for m in design.measures
  }
  for m in design.measures:
    for value in found[m.key].values():
      if m.whole and math.isfinite(value):
        confirm.whole(value, design.examples)  # refuses a rate that counts no whole examples
  return found


def as_compared(metric: forms.Metric, values: Mapping[int, float]) -> dict[int, float]:
  """seed -> value as ``metric`` compares it (a rate as a count of whole examples)."""
  return dict(zip(values, map(float, metric.compared(list(values.values()))), strict=True))


def judge(design: Design, values: Mapping[str, Mapping[str, Mapping[int, float]]]) -> Result:
  """Every family judged on each arm's values (``values``: arm -> measure key -> seed -> value,
  :func:`arm_values`), once every arm is finished; before, nothing (:attr:`Result.missing`)."""
  missing = tuple(a for a in design.arms if a not in values)
  if missing:
    return Result((), (), missing, {})
  ranking = []
  for measure in design.measures:
    metric = design.metric(measure)
    compared = {arm: as_compared(metric, v[measure.key]) for arm, v in values.items()}
    ranking += confirm.judge_family(design.hypotheses(measure), compared, design.alpha)
  outcomes = [
    forms.paired_outcome(c, values[c.first][c.metric.key], values[c.second][c.metric.key])
    for c in design.comparisons()
  ]
  return Result(tuple(ranking), tuple(forms.judge(outcomes, design.alpha)), (), {})


def analyse(design: Design, finished: Mapping[str, runs.Run]) -> Result:
  """The study judged on its finished runs (``finished``: :func:`finished_runs`), with each
  finished arm's members whose best epoch is the last."""
  design.check_filled()
  values = {arm: arm_values(design, arm, run) for arm, run in finished.items()}
  at_last = {
    arm: best.at_last_epoch(run, design.learning_rates[arm]) for arm, run in finished.items()
  }
  return dataclasses.replace(judge(design, values), at_last=at_last)


# --------------------------------------------------------------------------- the wrong form


def wrong_form_path(design: Design, out: Path, arm: str) -> Path:
  return wrong_form.kept_path(out, design.folder(arm))


def evaluate_wrong_forms(
  design: Design, grid: grids.Grid, *, out: Path, data_dir: str | None
) -> list[wrong_form.WrongForm] | None:
  """A finished grid's wrong-form rows: its networks run with each of its arm's
  :attr:`Design.wrong_forms` in each of the design's dtypes, kept in ``out/wrong_form/``
  (`gelujax.study.wrong_form.keep`); None for an arm without wrong forms, or a grid neither
  kept nor restorable."""
  arm = next(a for a in design.arms if design.folder(a) == grid.name)
  if arm not in design.wrong_forms:
    return None
  path = wrong_form_path(design, out, arm)
  targets = [(other, dtype) for other in design.wrong_forms[arm] for dtype in design.dtypes]
  return wrong_form.keep(grid.workdir, targets, path, data_dir)


def read_all_wrong_forms(design: Design, out: Path) -> dict[str, list[wrong_form.WrongForm]]:
  """arm -> its kept wrong-form rows, for the arms that have them."""
  return {
    arm: wrong_form.read(path)
    for arm in design.wrong_forms
    if (path := wrong_form_path(design, out, arm)).exists()
  }
