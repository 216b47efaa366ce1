"""The one *refuted*, re-tested: §3.3's primary family on fresh paired seeds, fixed here before
any of its runs was trained.

The project's only *refuted* verdict, Twitter POS primary hypothesis 2 of
``results/twitter_pos/twitter_pos_spelling`` (gelu_tanh below elu in test error at the
best-validation epoch), was reached at Holm p 0.049 on 10 unpaired seeds a side, and it turns on
a tie: one evaluation seed's best validation error ties at two epochs, and taking the later one
makes it inconclusive. :data:`TWITTER` fixes a confirmation: the same runs (the spelling
substitute's model, data and options, the lr the earlier study selected, its epochs) on 30 fresh
seeds shared by the three arms, so that every hypothesis is tested paired by seed; the tie rule
stated before the runs; test error compared in whole tokens; the seed count from the earlier
runs' paired spread (:func:`pilot`); its time from their timings (:func:`estimate`).

The earlier design's verdict stays as it was: the result's README quotes it from the earlier
result's ``summary.json`` beside the new one (:func:`earlier_record`), each named as its
design's. Runs: one grid per arm, ``<out>/runs/<arm>/``, the design's lr x seeds as members.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gelujax import paper
from gelujax import workdir as workdirs
from gelujax.paper import Hypothesis
from gelujax.study import best, grids, power, runs, stats, verdicts
from gelujax.study import judge as judge_rule
from gelujax.study.verdicts import INCONCLUSIVE, PENDING
from gelujax.workdir import CONFIG_FILE, SUMMARY_FILE

TASK = "twitter_pos_confirm"
# The checkout this module lies in: where the earlier result is looked for when the folder a
# study is written from has none (a user's folder).
CHECKOUT = Path(__file__).resolve().parents[2]
# The tie rules: which of a member's evaluations is its best where several share the lowest
# validation error. EARLIEST is the trainer's (`gelujax.workdir.summarize` takes the first of
# the tied records) and the design's; the others are exploratory (:func:`tie_sensitivity`).
EARLIEST, LATEST, VALIDATION_LOSS = best.EARLIEST, best.LATEST, "validation_loss"
ERROR = "validation_error"  # the metric whose ties the rules break (the task's select metric)
TIE_RULES = {
  EARLIEST: "the earliest of the tied epochs (the design's rule, the trainer's)",
  LATEST: "the latest of the tied epochs",
  VALIDATION_LOSS: "the epoch of the lowest validation loss instead of the lowest validation "
  "error (the selection metric the forms study uses)",
}


@dataclasses.dataclass(frozen=True)
class Confirmation:
  """A re-test of a paper task's family of hypotheses on fresh paired seeds at one fixed lr.

  Attributes:
    name: the study's name (``reproduce.py --task``, its result's folder).
    date: when the design was fixed in code (UTC), before any of its runs was trained.
    task: the registered task trained, whose hypotheses (``gelujax.paper.PAPER``) are re-tested.
    dataset: its data set.
    spec_fields: the task's fields the earlier result's runs changed (its model, options and
      preprocessing), set the same here.
    arms: the activations trained: the paper's GELU, then the baselines.
    learning_rate: the one lr every arm trains at; nothing is selected.
    seeds: the shared seeds: one network per arm and seed, none a seed of the earlier result.
    epochs: epochs of every run.
    family: the family of the task's hypotheses re-tested (Holm's correction runs over it).
    retested: the number within the family of the hypothesis the study is for (its seed count
      is that hypothesis' pilot's answer).
    examples: the test split's size: a test error is compared as a count of these.
    unit: what an example is, in words.
    earlier: the earlier result's folder, relative to the checkout's root.
    earlier_seeds: every seed the earlier result trained (selection and evaluation).
    alpha: the family's level, after Holm's correction: a verdict needs a Holm p below it.
    lr_reason, seeds_reason, epochs_reason: why each is what it is.
    tie_rule: which epoch is a member's best where validation ties (the trainer's rule, stated).
  """

  name: str
  date: str
  task: str
  dataset: str
  spec_fields: Mapping[str, Any]
  arms: tuple[str, ...]
  learning_rate: float
  seeds: tuple[int, ...]
  epochs: int
  family: str
  retested: int
  examples: int
  unit: str
  earlier: str
  earlier_seeds: tuple[int, ...]
  alpha: float = stats.ALPHA
  metric: str = "best.test_error"
  lr_reason: str = ""
  seeds_reason: str = ""
  epochs_reason: str = ""
  tie_rule: str = ""

  def hypotheses(self) -> tuple[Hypothesis, ...]:
    """The family re-tested, as the task's record fixes it (not restated here)."""
    return tuple(h for h in paper.hypotheses(self.task) if h.family == self.family)

  def spec(self) -> Any:
    """The task's spec every arm trains (its activation replaced per arm)."""
    from gelujax import tasks  # Here: tasks imports the models.

    return tasks.get(self.task).replace(
      **{k: tuple(v) if isinstance(v, list) else v for k, v in self.spec_fields.items()},
      epochs=self.epochs,
    )

  def earlier_run(self, arm: str) -> str:
    """The earlier result's run that holds ``arm``'s evaluation seeds at the selected lr."""
    return runs.evaluation_name(arm)


TWITTER = Confirmation(
  name=TASK,
  date="2026-11-27",
  task="twitter_pos",
  dataset="twitter_pos",
  spec_fields={
    "model": "spelling_mlp_twitter_pos",
    "model_options": {"word_dropout": 0.25},
    "preprocessing": ("spell_words",),
  },
  arms=("gelu_tanh", "relu", "elu"),
  learning_rate=1e-3,
  seeds=tuple(range(200, 230)),
  epochs=30,
  family=paper.PRIMARY,
  retested=2,
  examples=7_152,
  unit="tokens",
  earlier="results/twitter_pos/twitter_pos_spelling",
  earlier_seeds=(*range(5), *range(100, 110)),
  lr_reason="the lr the earlier result selected for each of the three runs on its selection "
  "seeds (1e-3 over 1e-4 by a median best validation error of about 0.15 against 0.21, "
  "rank-sum p = 0.0079 each, no other lr a candidate), so no lr is selected here and no "
  "selection stands between the arms. 1e-3 is the top of the paper's grid {1e-3, 1e-4, 1e-5}: "
  "a larger lr is not the paper's protocol and is not tried",
  seeds_reason="30 fresh seeds, 200-229 (the earlier result trained 0-4 and 100-109; every "
  "Twitter POS result of this project trained no others), the pilot's answer rounded up to "
  "tens (`gelujax.study.confirm.pilot`, from the earlier result's evaluation runs: the pairs "
  "that decide primary 2's paired shift with 80% power at the family's strictest Holm level, "
  "with the SD of its 10 paired differences at its one-sided 80% upper confidence bound)",
  epochs_reason="the paper's and the earlier result's 30, so that the earlier runs' spread "
  "applies; the earlier evaluation runs took 32 s a member (3 runs of 10 members, 30 epochs, on "
  "2 AMD EPYC cores, their members vmapped, before the CPU rule looped them), so the 90 "
  "members take about 48 minutes (`gelujax.study.confirm.estimate`), longer beside other work",
  tie_rule="a member's best epoch is the first with its lowest validation error (the task's "
  "selection metric): where epochs tie, the earliest, as the trainer takes it and as the "
  "earlier result took it",
)  # fmt: skip


def whole(value: float, examples: int) -> float:
  """A rate of ``examples`` as the count it is (a float holding an integer).

  Raises:
    ValueError: ``value`` times ``examples`` is not within 1e-6 of an integer (the split's size
      is not the one the rate was computed over).
  """
  count = value * examples
  if abs(count - round(count)) > 1e-6:
    raise ValueError(
      f"a test error of {value!r} is not a whole number of {examples} examples "
      f"({count!r}): the split's size is not the one the error was computed over."
    )
  return float(round(count))


def arm_values(run: runs.Run, design: Confirmation, rule: str = EARLIEST) -> dict[int, float]:
  """A finished run's test errors at the design's lr in whole examples: seed -> count (NaN for a
  diverged member). The design's rule reads each member's best as the run's summary derives it
  from its records (`gelujax.workdir.summarize`, the trainer's rule); another rule reads the
  records (`gelujax.study.best.best_record`: the lowest validation error, the latest of those
  that tie; or the lowest validation loss, the earliest of those that tie)."""
  key = design.metric.split(".", 1)[1]

  def by_rule(m: dict[str, Any]) -> float:
    metric, tie = (VALIDATION_LOSS, EARLIEST) if rule == VALIDATION_LOSS else (ERROR, rule)
    record = best.best_record(runs.member_records(run, m, ERROR), metric, tie)
    return math.nan if record is None else float(record[key])

  found = runs.lr_values(
    run, design.metric, design.learning_rate, None if rule == EARLIEST else by_rule
  )
  return {s: v if math.isnan(v) else whole(v, design.examples) for s, v in found.items()}


@dataclasses.dataclass(frozen=True)
class Outcome:
  """A hypothesis tested paired by seed, with its verdict.

  Attributes:
    hypothesis: the claim, as the paper task's record fixes it.
    number: its number within the family (1-based, as the earlier README numbers it).
    paired: the paired comparison of GELU's and the baseline's counts on the seeds both have
      finite (`gelujax.study.verdicts.PairedComparison`: differences, the paired Hodges–Lehmann
      shift and its exact interval, the exact two-sided signed-rank p, zeros); None while a run
      is not finished.
    medians: each arm's median count over the paired seeds.
    p: the signed-rank p (1 where every difference is 0, or while pending).
    holm: ``p`` after Holm's correction over the family.
    verdict: confirmed, refuted, inconclusive or pending.
    side: the side of 0 the signed-rank statistic falls on (-1: GELU lower).
    pairs_needed: for an inconclusive one, the pairs that would decide the observed shift with
      80% power at the family's strictest level (None: no number would).
    missing: the arms whose runs are not finished.
  """

  hypothesis: Hypothesis
  number: int
  paired: verdicts.PairedComparison | None
  medians: tuple[float, float]
  p: float
  holm: float = 1.0
  verdict: str = PENDING
  side: int = 0
  pairs_needed: int | None = None
  missing: tuple[str, ...] = ()

  def to_json(self) -> dict[str, Any]:
    return {
      "hypothesis": dataclasses.asdict(self.hypothesis),
      "claim": self.hypothesis.describe(),
      "number": self.number,
      "paired": self.paired.to_json() if self.paired else None,
      "medians": list(self.medians),
      "p": self.p,
      "holm": self.holm,
      "verdict": self.verdict,
      "side": self.side,
      "pairs_needed": self.pairs_needed,
      "missing": list(self.missing),
    }


def judge(design: Confirmation, values: Mapping[str, Mapping[int, float]]) -> list[Outcome]:
  """The family's verdicts from each finished arm's counts (``values``: arm -> seed -> count), by
  :func:`judge_family` at the design's level."""
  return judge_family(design.hypotheses(), values, design.alpha)


def judge_family(
  family: Sequence[Hypothesis],
  values: Mapping[str, Mapping[int, float]],
  alpha: float = stats.ALPHA,
) -> list[Outcome]:
  """The verdicts of a family of directional hypotheses from each finished arm's values
  (``values``: arm -> seed -> value, NaN for a diverged member), paired by seed.

  The rule: each hypothesis compares GELU's values with the baseline's seed by seed (a seed
  with a diverged member drops its pair) by the exact two-sided Wilcoxon signed-rank test
  (zeros dropped, mid-ranks for ties: `gelujax.study.stats.signed_rank_test`); the family's p
  are adjusted by Holm's method, a hypothesis whose runs are not finished counting as p = 1.
  Where the Holm p is below ``alpha`` the verdict is *confirmed* if the test's
  statistic lies on the claim's side of 0 and *refuted* if on the other; otherwise
  *inconclusive*, with the pairs that would decide the observed shift; *pending* while a run is
  missing.
  """
  found = []
  for number, h in enumerate(family, 1):
    missing = tuple(a for a in (h.gelu, h.baseline) if a not in values)
    if missing:
      found.append(Outcome(h, number, None, (math.nan, math.nan), 1.0, missing=missing))
      continue
    gelu, baseline = (
      {s: v for s, v in values[arm].items() if math.isfinite(v)} for arm in (h.gelu, h.baseline)
    )
    paired = verdicts.PairedComparison.of(gelu, baseline)
    if paired is None:
      found.append(Outcome(h, number, None, (math.nan, math.nan), 1.0, missing=()))
      continue
    medians = tuple(float(np.median([side[s] for s in paired.seeds])) for side in (gelu, baseline))
    p = 1.0 if paired.zeros == len(paired.seeds) else paired.p
    found.append(Outcome(h, number, paired, medians, p))
  sides = [stats.signed_rank_direction(o.paired.differences) if o.paired else 0 for o in found]
  family = [
    # No pairs but every run finished: p = 1, inconclusive rather than pending.
    judge_rule.Test(o.p, o.hypothesis.direction, side=side, pending=bool(o.missing))
    for o, side in zip(found, sides, strict=True)
  ]
  level = alpha / max(1, len(found))
  judged = []
  for o, side, decision in zip(found, sides, judge_rule.decide(family, alpha), strict=True):
    verdict = decision.verdict
    needed = None
    if o.paired is not None and verdict == INCONCLUSIVE:
      needed = power.pairs_for_shift(o.paired.differences, level=level)
    judged.append(
      dataclasses.replace(o, holm=decision.holm, verdict=verdict, side=side, pairs_needed=needed)
    )
  return judged


def finished_runs(design: Confirmation, out: Path) -> dict[str, runs.Run]:
  """The study's finished runs, each read once: arm -> its files."""
  return runs.finished(out, {arm: arm for arm in design.arms})


def analyse(
  design: Confirmation, finished: Mapping[str, runs.Run], rule: str = EARLIEST
) -> list[Outcome]:
  """The family judged on the finished runs (``finished``: :func:`finished_runs`), each
  member's best by ``rule`` (the design's, or an exploratory one)."""
  return judge(design, {arm: arm_values(run, design, rule) for arm, run in finished.items()})


def tied_members(run: runs.Run, design: Confirmation) -> list[dict[str, Any]]:
  """The members of ``run`` at the design's lr whose lowest validation error is reached at
  several epochs: seed, the tied epochs, and the count at each (the earliest's is the design's
  value)."""
  key = design.metric.split(".", 1)[1]
  return [
    {
      "seed": seed,
      "epochs": [r["epoch"] for r in tied],
      "counts": [whole(r[key], design.examples) for r in tied],
    }
    for seed, tied in best.tied_members(run, design.learning_rate, ERROR).items()
  ]


def tie_sensitivity(
  design: Confirmation, finished: Mapping[str, runs.Run], *, paired: bool = True
) -> dict[str, Any]:
  """The family under each tie rule (:data:`TIE_RULES`; exploratory beside the design's): per
  rule, each hypothesis' p, Holm p and verdict word. ``paired``: the design's paired test;
  False: the earlier design's unpaired exact rank-sum test, as it judged the earlier runs."""
  found: dict[str, Any] = {}
  for rule in TIE_RULES:
    values = {arm: arm_values(run, design, rule) for arm, run in finished.items()}
    if paired:
      outcomes = judge(design, values)
      found[rule] = [
        {"number": o.number, "p": o.p, "holm": o.holm, "verdict": o.verdict,
         "medians": list(o.medians)}
        for o in outcomes
      ]  # fmt: skip
      continue
    rows, ps = [], []
    for number, h in enumerate(design.hypotheses(), 1):
      a = [v for v in values[h.gelu].values() if math.isfinite(v)]
      b = [v for v in values[h.baseline].values() if math.isfinite(v)]
      ps.append(stats.rank_test(a, b))
      rows.append({"number": number, "a": a, "b": b, "direction": h.direction})
    family = [
      judge_rule.Test(p, row["direction"], side=stats.direction(row["a"], row["b"]))
      for row, p in zip(rows, ps, strict=True)
    ]
    decisions = judge_rule.decide(family, design.alpha)
    for row, p, decision in zip(rows, ps, decisions, strict=True):
      holm, verdict = decision.holm, decision.verdict
      found.setdefault(rule, []).append(
        {"number": row["number"], "p": p, "holm": holm, "verdict": verdict,
         "medians": [float(np.median(row["a"])), float(np.median(row["b"]))]}
      )  # fmt: skip
  return found


def pilot(design: Confirmation, earlier: Mapping[str, runs.Run]) -> dict[str, Any]:
  """What the earlier result's evaluation runs (``earlier``: arm -> run, the seeds 100-109 at
  the selected lr) say of the design's pairs, per hypothesis of the family, in whole examples:
  the paired differences (GELU minus the baseline), their SD and its one-sided
  `gelujax.study.power.PILOT_BOUND` upper bound, the paired Hodges–Lehmann shift; the shift the
  design's pairs detect with 80% power at the family's strictest Holm level (``detectable``,
  with the SD as observed; ``detectable_bound``, at its bound); the pairs that would decide the
  observed shift (``pairs``, ``pairs_bound``: `gelujax.study.power.pairs_at_bound`). ``seeds``:
  the re-tested hypothesis' ``pairs_bound``, rounded up to tens."""
  family = design.hypotheses()
  level = design.alpha / len(family)
  n = len(design.seeds)
  found: dict[str, Any] = {"level": level, "pairs": n, "hypotheses": []}
  for number, h in enumerate(family, 1):
    a, b = (arm_values(earlier[arm], design) for arm in (h.gelu, h.baseline))
    seeds = [s for s in a if s in b and math.isfinite(a[s]) and math.isfinite(b[s])]
    d = np.asarray([a[s] - b[s] for s in seeds])
    sd = float(np.std(d, ddof=1))
    bound = sd * power.sd_upper_factor(len(d), power.PILOT_BOUND)
    pairs, pairs_bound = power.pairs_at_bound(d, level=level, margin=None)
    found["hypotheses"].append(
      {
        "number": number,
        "seeds": seeds,
        "differences": d.tolist(),
        "sd": sd,
        "sd_bound": bound,
        "shift": stats.walsh_median(d),
        "detectable": power.detectable_shift(sd, n, level=level),
        "detectable_bound": power.detectable_shift(bound, n, level=level),
        "pairs": pairs,
        "pairs_bound": pairs_bound,
      }
    )
  retested = found["hypotheses"][design.retested - 1]
  found["seeds"] = power.in_tens(retested["pairs_bound"])
  return found


def estimate(design: Confirmation, earlier: Path) -> dict[str, Any]:
  """The study's training time from the earlier result's (``earlier``: its folder) timed
  evaluation runs of the design's arms: their seconds over their member-epochs, times the
  design's members and epochs (``per_member``: the seconds of a member of the design's epochs)."""
  timings = grids.read_timings(earlier)
  seconds, members, member_epochs = 0.0, 0, 0
  for arm in design.arms:
    name = design.earlier_run(arm)
    config = workdirs.read_json(earlier / "runs" / name / CONFIG_FILE)
    seconds += timings[name]["seconds"]
    members += len(config["members"])
    member_epochs += len(config["members"]) * int(config["spec"]["epochs"])
  per_member = seconds / member_epochs * design.epochs
  total = len(design.arms) * len(design.seeds)
  machines = {m for a in design.arms for m in timings[design.earlier_run(a)]["machines"]}
  return {
    "runs": [design.earlier_run(a) for a in design.arms],
    "seconds": seconds,
    "members": members,
    "per_member": per_member,
    "total_members": total,
    "minutes": per_member * total / 60.0,
    "machines": sorted(machines),
  }


def find_earlier(design: Confirmation, root: Path) -> Path | None:
  """The earlier result's folder (:func:`find_result`)."""
  return find_result(design.earlier, root)


def find_result(relative: str, root: Path) -> Path | None:
  """A committed result's folder (``relative``: its path from a checkout's root, e.g.
  ``results/twitter_pos/twitter_pos_spelling``): under ``root``, else under the checkout this
  code lies in (`CHECKOUT`); None where neither has its summary.json."""
  for base in (root, CHECKOUT):
    folder = base / relative
    if (folder / SUMMARY_FILE).exists():
      return folder
  return None


def earlier_record(design: Confirmation, folder: Path) -> dict[str, Any]:
  """What the result keeps of the earlier one (``folder``): its family's verdicts as its
  summary.json states them (claim, verdict, p, Holm p, medians, shift and interval, the paired
  comparison it showed beside them, and its findings' lines for them, verbatim); and, from its
  evaluation runs' files, the pilot (:func:`pilot`), the time estimate (:func:`estimate`), its
  tied members and its verdicts under each tie rule (:func:`tie_sensitivity`, unpaired as it
  tested them)."""
  summary = workdirs.read_json(folder / SUMMARY_FILE)
  quoted = []
  for number, v in enumerate(summary["verdicts"][design.family], 1):
    outcomes = v.get("outcomes") or []
    c = v.get("comparison") or {}
    paired = (outcomes[0].get("paired") if len(outcomes) == 1 else None) or {}
    quoted.append(
      {
        "number": number,
        "claim": v["claim"],
        "verdict": v["verdict"],
        "seeds": v["seeds"],
        "p": v["p"],
        "holm": v["holm"],
        "median_a": c.get("median_a"),
        "median_b": c.get("median_b"),
        "shift": c.get("shift"),
        "low": c.get("low"),
        "high": c.get("high"),
        "paired_shift": paired.get("shift"),
        "paired_low": paired.get("low"),
        "paired_high": paired.get("high"),
        "paired_p": paired.get("p"),
      }
    )
  label = f"{design.family} "
  lines = [
    line
    for kind in ("Verdicts", "Paired comparisons (exploratory)")
    for line in summary["findings"].get(kind, [])
    if f", {label}" in line.split("]", 1)[0]
  ]
  finished = {arm: runs.load_run(folder / "runs" / design.earlier_run(arm)) for arm in design.arms}
  settings = summary["settings"]
  return {
    "folder": str(design.earlier),
    "selection_seeds": settings["seeds"],
    "evaluation_seeds": settings["evaluation_seeds"],
    "learning_rates": settings["learning_rates"],
    "verdicts": quoted,
    "lines": lines,
    "pilot": pilot(design, finished),
    "estimate": estimate(design, folder),
    "ties": {arm: tied_members(run, design) for arm, run in finished.items()},
    "at_last_epoch": {
      arm: len(best.at_last_epoch(run, design.learning_rate)) for arm, run in finished.items()
    },
    "members": {
      arm: len(runs.lr_members(run, design.learning_rate)) for arm, run in finished.items()
    },
    "tie_rules": tie_sensitivity(design, finished, paired=False),
  }


def make_grids(design: Confirmation, out: Path) -> list[grids.Grid]:
  """One grid per arm, the design's lr x seeds its members."""
  spec = design.spec()
  return [
    grids.Grid(arm, spec.replace(activation=arm), out / "runs" / arm, (design.learning_rate,))
    for arm in design.arms
  ]
