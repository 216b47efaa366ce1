"""The transformer study: the feed-forward activations of the two transformer tasks compared on
fresh paired seeds, its hypotheses fixed here before any of its runs was trained; the numbers
that only its pilot can give (each arm's lr, the margins, the seeds) taken from the pilot's
committed result by a rule fixed here too.

Two designs, one a task (:data:`VIT`, :data:`TAGGER`): relu, gelu, gelu_tanh,
geglu(approximate=True), geglu, swiglu and the control identity, each trained at its own lr on
the same fresh seeds, so that every comparison is paired by seed; each member compared on its
test error (in whole images or tokens) and test loss at its best-validation epoch. Three
families, Holm's correction within each family and metric:

- *ranking* (Shazeer, 2020): gelu below relu, geglu below gelu, geglu(approximate=True) below
  gelu_tanh, swiglu below relu; `gelujax.study.confirm.judge_family`'s paired signed-rank rule:
  *confirmed*, *refuted* or *inconclusive*;
- *forms*: gelu_tanh against gelu, geglu(approximate=True) against geglu, within a margin by
  paired TOST (`gelujax.study.forms.paired_outcome` and `judge`): *equivalent*, *different* or
  *inconclusive*;
- *control*: identity against gelu, judged as a forms comparison in a family of its own; it must
  come out *different* on every metric, or every *equivalent* of the task is reported as *not
  established*.

What only the pilot can say is a field left empty here and filled by :func:`from_pilot` from
the pilot's analysis (`gelujax.study.pilot.analyse` of its committed runs, :func:`filled`), by
the rule its docstring states: the registered designs hold the rule, the filled ones its
numbers, and the commit that fixed the rule precedes the pilot's numbers.

Runs: one grid per arm, ``<out>/runs/<folder>/`` (`gelujax.study.runs.run_name`'s folder), the
seeds at the arm's lr its members. Every network of the arms of :data:`WRONG_FORMS` is also run
with the other form of its activation in float32 and bfloat16 (`gelujax.study.wrong_form`),
kept in ``<out>/wrong_form/<folder>.json`` so that the result re-renders from the committed
files alone.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gelujax.paper import LOWER, Hypothesis
from gelujax.study import confirm, forms, grids, pilot, power, runs, stats
from gelujax.study.forms import CONTROL_FAMILY, NEGATIVE_FAMILY

RANKING, FORMS, CONTROL, NEGATIVE = "ranking", "forms", CONTROL_FAMILY, NEGATIVE_FAMILY
# What a design's seeds are sized for (`Design.seeds_for`): every forms TOST's power at the
# smallest margin that allows it, or the ranking's power to detect a relative shift.
FOR_FORMS, FOR_RANKING = "forms", "ranking"
# An *equivalent* where the control was not *different*, or the negative control not *equivalent*.
NOT_ESTABLISHED = "not established"
# The first fresh seed, and the most seeds an arm trains (the budget: `_CAP_REASON`).
SEED_START = 300
MAX_SEEDS = 20
TRAINED_DTYPE = "float32"  # what every arm trains in

ARMS = pilot.ARMS  # relu, gelu, gelu_tanh, geglu(approximate=True), geglu, swiglu, identity
RANKING_PAIRS = (
  ("gelu", "relu"),
  ("geglu", "gelu"),
  ("geglu(approximate=True)", "gelu_tanh"),
  ("swiglu", "relu"),
)
FORMS_PAIRS = (("gelu_tanh", "gelu"), ("geglu(approximate=True)", "geglu"))
# What each network of an arm is also run with: the other form of its activation (and, for the
# plain GELU, the sigmoid form).
WRONG_FORMS = {
  "gelu": ("gelu_tanh", "gelu_sigmoid"),
  "gelu_tanh": ("gelu", "gelu_sigmoid"),
  "geglu": ("geglu(approximate=True)",),
  "geglu(approximate=True)": ("geglu",),
}


@dataclasses.dataclass(frozen=True)
class Measure:
  """A per-network value the study compares, and the pilot metric its margin is sized on.

  Attributes:
    key: as a run's summary holds it (``"best.test_error"``: at the best-validation epoch).
    label: its words.
    pilot: the pilot's validation metric whose paired spread sizes this one's margin and the
      seeds, with the candidate margins (in its own units: a rate, nats).
    whole: a rate of the test split's examples, compared as the count it is.
  """

  key: str
  label: str
  pilot: pilot.Metric
  whole: bool = False


ERROR = Measure("best.test_error", "test error at the best-validation epoch", pilot.ERROR, True)
LOSS = Measure("best.test_loss", "test log loss (nats) at the best-validation epoch", pilot.LOSS)


@dataclasses.dataclass(frozen=True)
class Sizing:
  """What :func:`from_pilot` read from the pilot and what its rule found.

  Attributes:
    pilot: the pilot's name.
    folder: the pilot's result, relative to the checkout's root.
    spreads: the pilot's paired spreads of the study's comparisons (validation metrics, each
      arm at its selected lr; `gelujax.study.pilot.Spread`), the control's from its own pilot
      where the design names one.
    level: the one-sided level of each of a forms comparison's tests (:func:`tost_level`).
    floor: the fewest pairs with which every family can reach its strictest level
      (:func:`floor_pairs`).
    needed: measure key -> candidate margin -> the pairs the forms family needs there (the most
      over its comparisons, :func:`pairs_for_tost`).
    shifts: for seeds sized for the ranking, measure key -> the shift its tests are to detect.
    ranking_needed: measure key -> the pairs the ranking family needs to detect it (the most
      over its comparisons, :func:`pairs_for_ranking`).
    control_folder: the control's pilot's result, where the design names one.
    between: for a negative control, measure key -> gelu's pilot values, one a seed at its lr.
  """

  pilot: str
  folder: str
  spreads: tuple[pilot.Spread, ...]
  level: float
  floor: int
  needed: Mapping[str, Mapping[float, int]]
  shifts: Mapping[str, float] = dataclasses.field(default_factory=dict)
  ranking_needed: Mapping[str, int] = dataclasses.field(default_factory=dict)
  control_folder: str = ""
  between: Mapping[str, tuple[float, ...]] = dataclasses.field(default_factory=dict)

  def spread(self, first: str, second: str, measure: Measure) -> pilot.Spread | None:
    """The pilot's spread of ``first`` − ``second`` on ``measure``'s pilot metric."""
    return next(
      (
        s
        for s in self.spreads
        if (s.first, s.second, s.metric) == (first, second, measure.pilot.key)
      ),
      None,
    )


_RANKING_REASON = (
  "the orderings Shazeer (2020, 'GLU Variants Improve Transformer', T5's feed-forward at a "
  "matched parameter count) leads one to expect: the gated units below the plain feed-forward "
  "(GEGLU below GELU, SwiGLU below ReLU), GELU below ReLU, and geglu(approximate=True) below "
  "gelu_tanh, GEGLU below GELU in the tanh form (the gate Gemma computes). Directional, and "
  "tested both ways so that a verdict can refute: each way is one one-sided signed-rank test at "
  "half the level, which is the two-sided test and its side (`gelujax.study.confirm."
  "judge_family`, the confirmation's rule)"
)
_FORMS_REASON = (
  "the two pairs a port mixes up: gelu_tanh against gelu (`jax.nn.gelu`'s default against "
  "PyTorch's) and geglu(approximate=True) against geglu (their gated counterparts): whether they "
  "train to networks as good within a margin, not which is better; two one-sided signed-rank "
  "tests of the paired shift against the margin and the test beyond it, either decision at the "
  "level of one test (`gelujax.study.forms.judge`)"
)
_CONTROL_REASON = (
  "identity leaves the feed-forward linear, so a design that cannot tell it from gelu cannot "
  "call two GELU forms equivalent: identity − gelu, judged as a forms comparison in a family of "
  "its own, must come out *different* on every metric; where it does not, every *equivalent* of "
  "the task is reported as *not established* (`gelujax.study.forms`' gate, here over the whole "
  "task). The pilot's gap of identity − gelu is shown in margins beside it"
)
_MEASURES_REASON = (
  "each member's test error and test loss at its best-validation epoch, the metrics the task "
  "reports; the error as a count of the test split's examples (the rate times their number, "
  "which must be within 1e-6 of an integer: `gelujax.study.confirm.whole`), so that networks "
  "that err on as many examples tie exactly, the loss in nats. Each metric has its own families "
  "and margin"
)
_LR_RULE = (
  "each arm's lr is the one its pilot selected (`gelujax.study.pilot.select_lr`: the lowest "
  "median over the selection seeds of the members' best selection metric, on validation "
  "metrics alone), so that each arm trains at the lr best for it and no lr is selected on the "
  "seeds the study evaluates"
)
_MARGIN_RULE = (
  "per metric, the smallest of the pilot's candidate margins at which every forms comparison's "
  "TOST reaches the design's power within the seed cap (its pairs: `gelujax.study.transformer."
  "pairs_for_tost`, at the pilot's SD bound); where none does, the largest candidate (the "
  "loosest, and still short of that power), and the forms tests that would need more seeds "
  "than the cap are named as short of that power: a smaller margin needs more seeds, a larger "
  "one calls more apart equivalent"
)
_SEEDS_RULE = (
  "the most pairs the forms family needs at the chosen margins (over both metrics), at least "
  "the floor (the fewest pairs with which each family's exact test can reach its strictest "
  "level at all) and at most the cap: the seeds that give every forms TOST its power at the "
  "pilot's SD bound, and no more"
)
_CAP_REASON = (
  "at most 20 seeds: 7 arms of 20 members at the timing trials' 15 minutes for 10 members "
  "(`gelujax.tasks.EPOCHS_VIT`, `EPOCHS_TAGGER`) take about 3.5 hours a task on 2 CPU cores, "
  "longer beside other work"
)
_SEEDS_REASON = (
  "fresh seeds from 300, shared by every arm of a task: none of the pilot's 0–3 (whose "
  "validation metrics chose the lrs and the margins), none of any committed result's (the "
  "paper tasks' 0–9 and evaluation seeds from 100, 100–109 for 10; the confirmation's 200–229; "
  "the powered forms study's 1000–1059); both tasks take the same seeds, another task's "
  "networks"
)
_WRONG_FORM_REASON = (
  "exploratory, no verdicts: every network of the gelu, gelu_tanh, geglu and "
  "geglu(approximate=True) arms, restored after its last epoch, run on the test split with "
  "the other form (exact <-> tanh, and the sigmoid form for gelu and gelu_tanh) in float32 and "
  "in bfloat16 (`gelujax.study.wrong_form`): the change of its error and loss, of its logits "
  "and its top-1 agreement, per network and paired over the networks"
)
_TIE_RULE = (
  "a member's best epoch is the first with its lowest value of the task's selection metric, as "
  "the trainer takes it"
)


@dataclasses.dataclass(frozen=True)
class Design:
  """The study of one task: its runs, hypotheses and rules, and, once :func:`from_pilot` has
  filled it, the numbers the pilot gave.

  Attributes:
    name: the study's name (``reproduce.py --task``, its result's folder).
    date: when the design was fixed in code (UTC), before any of its runs was trained.
    task: the registered task trained.
    dataset: its data set.
    pilot: the pilot the numbers come from (its design, `gelujax.study.pilot`'s).
    epochs: epochs of every run (the task's and the pilot's).
    examples: the test split's size in what its error counts (images, tokens).
    unit: what an example is, in words.
    arms: the arms trained, the control among them: an activation's name, or a name of
      ``variants``.
    control: the positive control's arm, compared with gelu.
    ranking: the ranking family: (first, second) claims first below second.
    forms: the forms family: (first, second), first minus second within a margin.
    measures: what is compared, each in its own families.
    wrong_forms: arm -> the forms its networks are also run with.
    dtypes: the compute dtypes the wrong forms are run in.
    seed_start: the first fresh seed.
    max_seeds: the most seeds the budget allows.
    alpha: every family's level, after Holm's correction.
    power: the power the seeds are sized for.
    *_reason: why each is what it is; lr_rule, margin_rule, seeds_rule: :func:`from_pilot`'s
      rule, in words.
    tie_rule: which epoch is a member's best where validation ties (the trainer's rule).
    learning_rates: arm -> its lr (from the pilot; empty until filled).
    margins: measure key -> its margin, in the pilot metric's units (from the pilot).
    seeds: the fresh seeds every arm trains (from the pilot's spread).
    sizing: what the rule read and found (None until filled).
    beside: a committed result (its folder under the project) whose runs' test error the README
      sets beside the arms', with the paper's medians its summary quotes: the number the task is
      to beat, shown, never tested (other seeds, another model); "" for none.
    beside_words: that result's model, in a few words.
    variants: the arms that are more than an activation (`gelujax.study.grids.Variant`: a
      narrower feed-forward as a control), by name.
    negative: the negative control's arm ("" for none): gelu on another set of seeds (a
      variant with a seed offset), compared with gelu pair by pair in seed order, judged as a
      forms comparison in a family of its own; it must come out *equivalent*.
    control_pilot: the pilot that trained the control, where ``pilot`` did not (its lr and its
      gap to gelu come from there).
    control_gap: the pilot's condition for the control: its gap above gelu, in margins, within
      [low, high]; None: many times its margin (beyond `gelujax.study.calibration.
      CONTROL_MARGINS`), as for a linear feed-forward.
    control_words: what the control is, in words (what a design that tells it from gelu sees).
    seeds_for: what the seeds are sized for (:data:`FOR_FORMS`, :data:`FOR_RANKING`).
    relative_shift: for :data:`FOR_RANKING`, the shift the ranking tests are to detect, as a
      share of gelu's median in the pilot.
    figure: the metric of a run's records whose curves the README draws, each arm's median over
      its seeds with their range ("" for none).
    lead: its place among the studies that lead the results (lower first).
  """

  name: str
  date: str
  task: str
  dataset: str
  pilot: pilot.Pilot
  epochs: int
  examples: int
  unit: str
  arms: tuple[str, ...] = ARMS
  control: str = "identity"
  ranking: tuple[tuple[str, str], ...] = RANKING_PAIRS
  forms: tuple[tuple[str, str], ...] = FORMS_PAIRS
  measures: tuple[Measure, ...] = (ERROR, LOSS)
  wrong_forms: Mapping[str, tuple[str, ...]] = dataclasses.field(
    default_factory=lambda: dict(WRONG_FORMS)
  )
  dtypes: tuple[str, ...] = ("float32", "bfloat16")
  seed_start: int = SEED_START
  max_seeds: int = MAX_SEEDS
  alpha: float = stats.ALPHA
  power: float = stats.POWER
  ranking_reason: str = _RANKING_REASON
  forms_reason: str = _FORMS_REASON
  control_reason: str = _CONTROL_REASON
  measures_reason: str = _MEASURES_REASON
  lr_rule: str = _LR_RULE
  margin_rule: str = _MARGIN_RULE
  seeds_rule: str = _SEEDS_RULE
  cap_reason: str = _CAP_REASON
  seeds_reason: str = _SEEDS_REASON
  epochs_reason: str = ""
  wrong_form_reason: str = _WRONG_FORM_REASON
  tie_rule: str = ""
  learning_rates: Mapping[str, float] = dataclasses.field(default_factory=dict)
  margins: Mapping[str, float] = dataclasses.field(default_factory=dict)
  seeds: tuple[int, ...] = ()
  sizing: Sizing | None = None
  beside: str = ""
  beside_words: str = ""
  variants: Mapping[str, grids.Variant] = dataclasses.field(default_factory=dict)
  negative: str = ""
  negative_reason: str = ""
  control_pilot: pilot.Pilot | None = None
  control_gap: tuple[float, float] | None = None
  control_words: str = "a linear feed-forward"
  seeds_for: str = FOR_FORMS
  relative_shift: float = 0.0
  figure: str = ""
  lead: int = 1

  @property
  def is_filled(self) -> bool:
    """Whether :func:`from_pilot` has given it its numbers."""
    return self.sizing is not None

  def check_filled(self) -> None:
    """Raises ValueError for a design :func:`from_pilot` has not filled."""
    if not self.is_filled:
      raise ValueError(
        f"The design {self.name} has no lrs, margins or seeds yet: they come from its pilot "
        f"{self.pilot.name} (`gelujax.study.transformer.filled`)."
      )

  def spec(self) -> Any:
    """The task's spec every arm trains (its activation replaced per arm)."""
    from gelujax import tasks  # Here: tasks imports the models.

    return tasks.get(self.task).replace(dataset=self.dataset, epochs=self.epochs)

  def folder(self, arm: str) -> str:
    """``arm``'s run folder under ``runs/``: `gelujax.study.runs.run_name`'s."""
    return runs.run_name(arm)

  def offset(self, arm: str) -> int:
    """What ``arm``'s seeds add to the design's (a negative control's other set), else 0."""
    variant = self.variants.get(arm)
    return variant.seed_offset if variant is not None else 0

  def metric(self, measure: Measure) -> forms.Metric:
    """``measure`` as the forms tests compare it, at the design's margin: a rate in whole
    examples (the margin in examples, shown in points), a loss in nats."""
    self.check_filled()
    margin = self.margins[measure.key]
    if measure.whole:
      return forms.Metric(
        measure.key, measure.label, margin * self.examples, scale=100.0 / self.examples,
        examples=self.examples,
      )  # fmt: skip
    return forms.Metric(measure.key, measure.label, margin)

  def hypotheses(self, measure: Measure) -> tuple[Hypothesis, ...]:
    """The ranking family on ``measure``: each first arm below its second."""
    return tuple(
      Hypothesis(self.task, RANKING, measure.key, measure.label, first, second, LOWER)
      for first, second in self.ranking
    )

  def comparisons(self) -> list[forms.Comparison]:
    """The forms family and the control, measure by measure, as the forms tests take them (each
    arm at its own lr: the comparison's lr is NaN)."""
    pairs = [(*pair, False) for pair in self.forms] + [(self.control, "gelu", True)]
    found = [
      forms.Comparison(first, second, TRAINED_DTYPE, math.nan, self.metric(m), control=control)
      for m in self.measures
      for first, second, control in pairs
    ]
    negative = [
      forms.Comparison(
        self.negative, "gelu", TRAINED_DTYPE, math.nan, self.metric(m), negative=True
      )
      for m in self.measures
    ]
    return found + (negative if self.negative else [])


VIT = Design(
  name="vit_fashion_mnist_study",
  date="2026-11-27",
  task="vit_fashion_mnist",
  dataset="fashion_mnist",
  pilot=pilot.VIT,
  epochs=10,
  examples=10_000,
  unit="images",
  epochs_reason="the task's 10 (`gelujax.tasks.EPOCHS_VIT`) and the pilot's, so that the "
  "pilot's spread applies",
  tie_rule=_TIE_RULE + " (validation loss)",
)
TAGGER = Design(
  name="transformer_twitter_pos_study",
  date="2026-11-27",
  task="transformer_twitter_pos",
  dataset="twitter_pos",
  pilot=pilot.TAGGER,
  epochs=80,
  examples=7_152,
  unit="tokens",
  epochs_reason="the task's 80 (`gelujax.tasks.EPOCHS_TAGGER`) and the pilot's, so that the "
  "pilot's spread applies",
  tie_rule=_TIE_RULE + " (validation error)",
  beside="results/twitter_pos/twitter_pos_confirm",
  beside_words="the window MLP",
)

# ------------------------------------------------------------------------- the pilot's rule


def tost_level(design: Design) -> float:
  """The one-sided level each test of a forms comparison must reach at the forms family's
  strictest Holm step: alpha over the family's size, halved, since a forms comparison's p
  doubles the smaller of its TOST p and its beyond-the-margin p (`gelujax.study.stats.
  Equivalence.p`)."""
  return design.alpha / len(design.forms) / 2.0


def floor_pairs(design: Design) -> int:
  """The fewest pairs with which every family's exact test can reach its strictest level at all:
  a ranking hypothesis' two-sided signed-rank p (at least 2 / 2^n) at alpha over its family's
  size; a forms comparison's one-sided tests (at least 1 / 2^n each) at :func:`tost_level`; the
  control's beyond-the-margin decision (its p at least 4 / 2^n) at alpha."""
  one_sided = min(design.alpha / len(design.ranking) / 2.0, tost_level(design), design.alpha / 4.0)
  return power.floor_pairs(one_sided)


def pairs_for_tost(design: Design, sd: float, margin: float) -> int | None:
  """The pairs with which a forms comparison whose true shift is 0 is found *equivalent* within
  ±``margin`` with the design's power, its paired differences' SD being ``sd``: the pilot's
  normal approximation (`gelujax.study.power.pairs_for_equivalence`) at :func:`tost_level`,
  at the signed-rank test's efficiency against the t-test for normal differences (the SD times
  sqrt(π/3)). None where ``sd`` is not finite."""
  return power.pairs_for_equivalence(
    sd, margin, alpha=tost_level(design), power=design.power, efficiency=power.RANK_EFFICIENCY
  )


def pairs_for_ranking(design: Design, sd: float, shift: float) -> int | None:
  """The pairs with which a ranking hypothesis' two-sided signed-rank test at its family's
  strictest Holm level finds a true shift of ``shift`` with the design's power, its paired
  differences' SD being ``sd``: the pilot's normal approximation (`gelujax.study.power.
  pairs_to_detect`) at the signed-rank test's efficiency. None where ``sd`` is not finite."""
  return power.pairs_to_detect(
    sd, shift, alpha=design.alpha / len(design.ranking), power=design.power,
    efficiency=power.RANK_EFFICIENCY,
  )  # fmt: skip


def tost_power(design: Design, sd: float, margin: float, pairs: int) -> float:
  """The power of a forms comparison's TOST with ``pairs`` pairs where the true shift is 0, by
  the approximation :func:`pairs_for_tost` inverts (`gelujax.study.power.equivalence_power`)."""
  return power.equivalence_power(
    sd, margin, pairs, alpha=tost_level(design), efficiency=power.RANK_EFFICIENCY
  )


def from_pilot(
  design: Design, analysis: pilot.Analysis, folder: str, control_folder: str = ""
) -> Design:
  """``design`` with each arm's lr, each metric's margin and the seeds, from its pilot's
  ``analysis`` (`gelujax.study.pilot.analyse` of the pilot's runs, read from ``folder``, its
  result relative to the checkout's root), by the rule:

  - lr: each arm's lr the pilot selected (`gelujax.study.pilot.select_lr`).
  - need: for each forms comparison, metric and candidate margin of the pilot's metric, the
    pairs with which its TOST at the family's strictest level shows a true shift of 0 within
    the margin with the design's power, the SD at the pilot's upper bound
    (:func:`pairs_for_tost`); a metric's need at a margin is the most over the forms
    comparisons.
  - margin: per metric, the smallest candidate whose need is at most ``max_seeds``; where none
    is, the largest candidate.
  - seeds: the most need over the metrics at their margins, at least :func:`floor_pairs`, at
    most ``max_seeds``; ``seed_start`` on.

  Seeds sized for the ranking too (``seeds_for`` :data:`FOR_RANKING`): each metric's margin is
  the smallest candidate at which the positive control's pilot gap (control − gelu) lies within
  ``control_gap`` margins, else the largest, so that the control calibrates it; the shift the
  ranking is to detect is ``relative_shift`` times gelu's median in the pilot at its lr, its
  need the most pairs over the ranking's comparisons (:func:`pairs_for_ranking`, the SD at the
  pilot's bound); the seeds the most need of either family over the metrics, between the floor
  and the cap. The negative control's arm trains at its activation's lr.

  Raises:
    ValueError: the analysis lacks an arm (not trained, or every member diverged), or a forms
      comparison's spread (fewer than 2 pairs).
  """
  lr_arm = {a: design.variants[a].activation if a == design.negative else a for a in design.arms}
  lost = [a for a in design.arms if analysis.selected.get(lr_arm[a]) is None]
  if lost:
    raise ValueError(
      f"The pilot's result in {folder} gives no lr for {', '.join(lost)} (not trained, or every "
      f"member diverged): {design.name} takes each arm's lr from it."
    )
  wanted = {
    (*pair, m.pilot.key) for pair in (*design.ranking, *design.forms) for m in design.measures
  }
  wanted |= {(design.control, "gelu", m.pilot.key) for m in design.measures}
  spreads = tuple(s for s in analysis.spreads if (s.first, s.second, s.metric) in wanted)
  sizing = Sizing(
    design.pilot.name, folder, spreads, tost_level(design), floor_pairs(design), {},
    control_folder=control_folder, between={
      m.key: tuple(analysis.cells["gelu"][analysis.selected["gelu"]].finite(m.pilot.key))
      for m in design.measures if design.negative
    },
  )  # fmt: skip
  needed: dict[str, dict[float, int]] = {}
  margins: dict[str, float] = {}
  for m in design.measures:
    bounds = []
    for first, second in design.forms:
      found = sizing.spread(first, second, m)
      if found is None or not math.isfinite(found.sd_bound):
        raise ValueError(
          f"The pilot's result in {folder} has no paired SD of {first} − {second} on "
          f"{m.pilot.key}: {design.name} sizes its margins and seeds on it."
        )
      bounds.append(found.sd_bound)
    needed[m.key] = {
      margin: max(pairs_for_tost(design, sd, margin) for sd in bounds) for margin in m.pilot.margins
    }
  shifts, ranking_needed = {}, {}
  ranking = design.seeds_for == FOR_RANKING
  for m in design.measures:
    if ranking:  # The margins the positive control's pilot gap calibrates.
      control = sizing.spread(design.control, "gelu", m)
      if control is None or design.control_gap is None:
        raise ValueError(
          f"{design.name} takes its margin from its control's pilot gap: the pilot gives no "
          f"spread of {design.control} − gelu on {m.pilot.key}, or the design no control_gap."
        )
      low, high = design.control_gap
      fits = [margin for margin in m.pilot.margins if low <= control.mean / margin <= high]
    else:  # The margins whose forms TOSTs reach the design's power within the cap.
      fits = [margin for margin, n in needed[m.key].items() if n <= design.max_seeds]
    margins[m.key] = min(fits) if fits else max(m.pilot.margins)
  need = max(needed[m.key][margins[m.key]] for m in design.measures)
  if ranking:
    gelu = analysis.cells["gelu"][analysis.selected["gelu"]]
    for m in design.measures:
      shifts[m.key] = design.relative_shift * gelu.stats(m.pilot.key)["median"]
      ranking_needed[m.key] = max(
        pairs_for_ranking(design, found.sd_bound, shifts[m.key]) or stats.MAX_SEEDS
        for a, b in design.ranking
        if (found := sizing.spread(a, b, m)) is not None
      )
    need = max(need, *ranking_needed.values())
  count = min(design.max_seeds, max(sizing.floor, need))
  return dataclasses.replace(
    design,
    learning_rates={a: analysis.selected[lr_arm[a]] for a in design.arms},
    margins=margins,
    seeds=tuple(range(design.seed_start, design.seed_start + count)),
    sizing=dataclasses.replace(sizing, needed=needed, shifts=shifts, ranking_needed=ranking_needed),
  )


def pairs_for_control(design: Design, spread: pilot.Spread, sd: float, margin: float) -> int | None:
  """The pairs with which the control, were its pilot's mean gap the true one and its paired SD
  ``sd``, is found *different* (beyond ``margin``) with the design's power in its family of one
  (`gelujax.study.power.count_to_decide`, at the signed-rank test's efficiency); None where
  more than `gelujax.study.stats.MAX_SEEDS` would be needed or none decides."""
  level = design.alpha
  unit_error = sd * math.sqrt(1.0 / power.RANK_EFFICIENCY)
  return power.count_to_decide(
    spread.mean, unit_error, level=level, margin=margin, power=design.power,
    floor=lambda beyond: power.floor_pairs(level / 4.0 if beyond else level / 2.0),
  )  # fmt: skip


def short_of_power(design: Design, first: str, second: str, measure: Measure) -> bool:
  """Whether the forms comparison ``first`` − ``second`` on ``measure`` needs more pairs than
  the design's seeds at its margin (the cap bound the seeds): a test that could not have passed
  with the design's power, at the pilot's SD bound."""
  design.check_filled()
  found = design.sizing.spread(first, second, measure)
  need = pairs_for_tost(design, found.sd_bound, design.margins[measure.key])
  return need is None or need > len(design.seeds)


def pilot_folder(found: pilot.Pilot) -> str:
  """A pilot's result, relative to a checkout's root (as `reproduce.py` writes it)."""
  return f"results/{found.dataset}/{found.name}"


def pilot_analysis(design: Design, found: pilot.Pilot, root: Path, command: str) -> pilot.Analysis:
  """The analysis of the pilot ``found``'s result (`gelujax.study.pilot.analyse`), found under
  ``root`` or else in the checkout this code lies in (`gelujax.study.confirm.find_result`).

  Raises:
    ValueError: in one paragraph naming the folder and the command that makes it, where the
      pilot's result is absent or not finished.
  """
  relative = pilot_folder(found)
  folder = confirm.find_result(relative, root)
  make = f"`{command} --task={found.name}`"
  if folder is None:
    raise ValueError(
      f"The study {design.name} takes each arm's learning rate, its margins and its number of "
      f"seeds from its pilot's committed result by a fixed rule (`gelujax.study.transformer."
      f"from_pilot`), and {relative}/ is not there (looked for under {root} and under "
      f"{confirm.CHECKOUT}). Make it first with {make}, which trains the pilot and writes its "
      "result there; then run this again."
    )
  analysis = pilot.analyse(found, pilot.finished_runs(found, folder))
  if analysis.missing:
    raise ValueError(
      f"The study {design.name} takes each arm's learning rate, its margins and its number of "
      f"seeds from its pilot's committed result, and {folder}/ has not finished "
      f"{', '.join(analysis.missing)}. Finish it first with {make}, which resumes the pilot "
      "where it stopped; then run this again."
    )
  return analysis


def filled(design: Design, root: Path, command: str = "python experiments/reproduce.py") -> Design:
  """``design`` filled from its pilot's result (:func:`from_pilot`), and its control's pilot's
  where it names one (lrs and spreads added to the pilot's); ``command``: the one that trains a
  pilot, named where it is missing (:func:`pilot_analysis`)."""
  analysis = pilot_analysis(design, design.pilot, root, command)
  control_folder = ""
  if design.control_pilot is not None:
    other = pilot_analysis(design, design.control_pilot, root, command)
    analysis = dataclasses.replace(
      analysis,
      selected={**other.selected, **analysis.selected},
      spreads=analysis.spreads + other.spreads,
    )
    control_folder = pilot_folder(design.control_pilot)
  return from_pilot(design, analysis, pilot_folder(design.pilot), control_folder)


def make_grids(design: Design, out: Path) -> list[grids.Grid]:
  """One grid per arm (in :meth:`Design.folder`) at its own lr, every seed a member."""
  design.check_filled()
  return grids.arm_grids(
    design.spec(), design.arms, out, lambda arm: [design.learning_rates[arm]], design.variants,
    design.seeds,
  )  # fmt: skip
