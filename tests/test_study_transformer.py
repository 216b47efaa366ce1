"""The transformer study (gelujax.study.transformer, transformer_report): the designs as fixed,
their fresh seeds against every committed result's, the rule that takes each arm's lr, the
margins and the seeds from a pilot (on a synthetic pilot written in the trainer's formats,
against SciPy), the verdicts on hand-made paired values (SciPy's exact signed-rank tests, Holm by
hand), the control's gate, the wrong-form rows kept and read back (a tiny untrained network, as
tests/test_wrong_form.py runs one), the refusals where the pilot is missing, and the README with
arms pending and whole."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import os
import re
from pathlib import Path

import numpy as np
import pytest
import scipy.stats

from gelujax import paper, tasks
from gelujax.study import (
  confirm,
  confirm_report,
  grids,
  overview,
  pilot,
  registry,
  runs,
  transformer,
  transformer_design,
  transformer_report,
  transformer_runs,
  wrong_form,
)
from gelujax.study.transformer import ERROR, LOSS
from tests import fake_workdirs
from tests.test_results import holm as holm_by_hand  # the i-th smallest p times (m - i + 1)

ROOT = Path(__file__).resolve().parents[1]
ARMS = ("relu", "gelu", "gelu_tanh", "geglu(approximate=True)", "geglu", "swiglu", "identity")
TANH_GATE = "geglu(approximate=True)"


@pytest.mark.parametrize("name", ["vit_fashion_mnist_study", "transformer_twitter_pos_study"])
def test_the_designs_are_fixed_as_the_issue_states(name):
  """Each task's design: the seven arms, the ranking, forms and control families, test error in
  whole examples and test loss, the task's and the pilot's epochs; its lrs, margins and seeds
  empty (they come from the pilot, never typed), every rule and reason stated."""
  d = registry.get(name)
  task = {"vit_fashion_mnist_study": "vit_fashion_mnist"}.get(name, "transformer_twitter_pos")
  p = d.pilot
  assert (d.task, d.dataset, d.date) == (task, p.dataset, "2026-11-27") and p.task == task
  assert d.epochs == p.epochs == tasks.get(task).epochs
  assert (d.examples, d.unit) == {"vit_fashion_mnist": (10_000, "images")}.get(
    task, (7_152, "tokens")
  )
  assert d.arms == ARMS and d.control == "identity"
  assert d.ranking == (("gelu", "relu"), ("geglu", "gelu"), (TANH_GATE, "gelu_tanh"),
                       ("swiglu", "relu"))  # fmt: skip
  assert d.forms == (("gelu_tanh", "gelu"), (TANH_GATE, "geglu"))
  assert set(d.ranking) | set(d.forms) | {(d.control, "gelu")} == set(p.comparisons)
  assert [(m.key, m.whole, m.pilot) for m in d.measures] == [
    ("best.test_error", True, pilot.ERROR),
    ("best.test_loss", False, pilot.LOSS),
  ]
  assert d.wrong_forms == {
    "gelu": ("gelu_tanh", "gelu_sigmoid"), "gelu_tanh": ("gelu", "gelu_sigmoid"),
    "geglu": (TANH_GATE,), TANH_GATE: ("geglu",),
  }  # fmt: skip
  assert d.dtypes == ("float32", "bfloat16") and (d.alpha, d.power) == (0.05, 0.8)
  assert (d.seed_start, d.max_seeds) == (300, 20)
  assert not d.is_filled and not d.seeds and not d.learning_rates and not d.margins
  with pytest.raises(ValueError, match="no lrs, margins or seeds yet"):
    transformer.make_grids(d, Path("/out"))
  for field in dataclasses.fields(d):
    if field.name.endswith(("_reason", "_rule")) and field.name != "negative_reason":
      assert getattr(d, field.name), field.name
  assert not d.negative and not d.negative_reason  # no negative control: no reason for one
  assert "Shazeer (2020" in d.ranking_reason and "not established" in d.control_reason
  assert registry.variable(d) == {"vit_fashion_mnist_study": "VIT"}.get(name, "TAGGER")
  assert transformer.pilot_folder(d.pilot) == f"results/{p.dataset}/{p.name}"


def test_the_fresh_seeds_are_no_seeds_of_any_other_study():
  """Every seed the designs may take (300 to 300 + the cap) is none of the pilot's, none that a
  committed result trained and none of the project's other designs' (the paper tasks' evaluation
  seeds, the confirmation's, the forms studies'). The cap is the stated budget: 7 arms of 20
  members at 15 minutes for 10 members."""
  taken = set(range(transformer.SEED_START, transformer.SEED_START + transformer.MAX_SEEDS))
  others = {}
  own = set(registry.names(registry.TRANSFORMER))  # the study's own runs
  for config in (ROOT / "results").rglob("config.json"):
    if own.isdisjoint(config.relative_to(ROOT).parts):
      others[str(config)] = {m["seed"] for m in json.loads(config.read_text())["members"]}
  for task in (*paper.PAPER, "vit_fashion_mnist", "transformer_twitter_pos"):
    others[task] = set(paper.design(task, 10).evaluation_seeds)
  for other in (registry.get(n) for n in registry.names() if n not in own):
    others[other.name] = set(other.seeds)
  assert others and not {k: v & taken for k, v in others.items() if v & taken}
  minutes = len(ARMS) * transformer.MAX_SEEDS / 10 * 15
  assert minutes / 60 == 3.5 and "about 3.5 hours" in transformer.VIT.cap_reason


def test_the_levels_and_the_floor_by_hand():
  """A forms test's one-sided level is 0.05 / 2 / 2 (Holm's strictest step over 2, halved as
  the forms p doubles the smaller p); the floor is the fewest pairs whose exact tests reach every
  family's strictest level: 8, because a ranking hypothesis' two-sided p is at least 2 / 2^n and
  its strictest level 0.05 / 4 (7 pairs: 2/128 = 0.0156, too large)."""
  d = transformer.VIT
  assert transformer.tost_level(d) == 0.0125
  assert transformer.floor_pairs(d) == 8
  for n, reaches in ((7, False), (8, True)):
    p = scipy.stats.wilcoxon(np.arange(1.0, n + 1), method="exact").pvalue
    assert p == pytest.approx(2 / 2**n) and (p <= 0.05 / 4) == reaches
  # With 7 pairs the forms' and the control's decisions already could: 1/128 and 4/128.
  assert 1 / 2**7 <= 0.0125 and 4 / 2**7 <= 0.05


def test_the_pairs_for_tost_are_the_normal_approximation():
  """((z(1 − 0.0125) + z(0.9))^2 · π/3 · (sd / margin)^2, rounded up (SciPy's quantiles); the
  power at those pairs is at least 80%, one pair fewer below it."""
  d = transformer.VIT
  z = scipy.stats.norm.ppf(1 - 0.0125) + scipy.stats.norm.ppf(0.9)
  for sd, margin in ((0.003155, 0.003), (0.0095, 0.01), (0.002, 0.001), (0.0126, 0.01)):
    want = math.ceil(z**2 * math.pi / 3 * (sd / margin) ** 2)
    assert transformer.pairs_for_tost(d, sd, margin) == want
    reach = margin * math.sqrt(want) / (sd * math.sqrt(math.pi / 3))
    power = 1 - 2 * scipy.stats.norm.cdf(scipy.stats.norm.ppf(1 - 0.0125) - reach)
    assert transformer.tost_power(d, sd, margin, want) == pytest.approx(power, abs=1e-9)
    assert transformer.tost_power(d, sd, margin, want) >= 0.8
    assert transformer.tost_power(d, sd, margin, want - 1) < 0.8
  assert transformer.pairs_for_tost(d, math.nan, 0.01) is None


# ------------------------------------------------------------------------ a synthetic pilot

# Each member's best validation error at its arm's better lr (1e-3; relu's is 3e-4): a seed's
# base and the arm's offset. gelu_tanh − gelu: +1, -1, +0.5, -0.5 (x 1e-3); geglu(approximate=
# True) − geglu: +2, -2, +1, -1 (x 1e-3), `SPREAD` times that. The loss is 0.3 plus three times
# the error's offset plus the seed's base. The worse lr is 0.01 worse in both.
BASE = {0: 0.100, 1: 0.104, 2: 0.098, 3: 0.102}
OFFSETS = {
  "relu": [0.003] * 4,
  "gelu": [0.0] * 4,
  "gelu_tanh": [0.001, -0.001, 0.0005, -0.0005],
  "geglu": [-0.002] * 4,
  TANH_GATE: [0.0, -0.004, -0.001, -0.003],  # geglu's + (+2, -2, +1, -1) x 1e-3
  "swiglu": [-0.001] * 4,
  "identity": [0.05] * 4,
}


def pilot_best(arm, lr, seed, spread=1.0):
  """(validation error, validation loss) of a pilot member at its best epoch."""
  offset = OFFSETS[arm][seed]
  if arm == TANH_GATE:
    offset = OFFSETS["geglu"][seed] + spread * (offset - OFFSETS["geglu"][seed])
  better = 3e-4 if arm == "relu" else 1e-3
  worse = 0.0 if lr == better else 0.01
  error = BASE[seed] + offset + worse
  return error, 0.3 + 3 * offset + BASE[seed] - 0.1 + worse


def write_pilot(root, design=transformer.VIT, spread=1.0, arms=ARMS):
  """The pilot's result under ``root`` as reproduce.py writes it (runs of 2 epochs, the best the
  second; test metrics nowhere near the validation's), with its summary.json."""
  p = design.pilot
  folder = root / transformer.pilot_folder(design.pilot)
  for arm in arms:
    members = []
    for lr in p.learning_rates:
      for seed in p.seeds:
        error, loss = pilot_best(arm, lr, seed, spread)
        members.append(
          fake_workdirs.member(
            seed, lr, validation_error=[0.5, error], validation_loss=[2.0, loss],
            test_error=[0.9, 0.9], test_loss=[5.0, 5.0], train_loss=[1.0, 0.9],
          )
        )  # fmt: skip
    fake_workdirs.write_workdir(
      folder / "runs" / p.folder(arm), members, activation=arm, task=p.task, dataset=p.dataset,
      select_metric=p.select_metric,
    )  # fmt: skip
  (folder / "summary.json").write_text(json.dumps({"study": p.name}))
  (folder / "README.md").write_text("# the pilot\n")
  return folder


def expected_rule(spread=1.0):
  """The rule computed here from the values the pilot's runs hold: per metric, the forms
  comparisons' paired SDs (ddof 1) at SciPy's one-sided 80% chi-square bound, the pairs
  ((z(0.9875) + z(0.9))^2 · π/3 · (bound / margin)^2, rounded up, at least 2) at each candidate
  margin, the smallest
  margin that fits 20, and the seeds."""
  z = scipy.stats.norm.ppf(1 - 0.0125) + scipy.stats.norm.ppf(0.9)
  factor = math.sqrt(3 / scipy.stats.chi2.ppf(0.2, 3))
  needed, margins = {}, {}
  for column, measure in ((0, ERROR), (1, LOSS)):
    bounds = []
    for first, second in (("gelu_tanh", "gelu"), (TANH_GATE, "geglu")):
      d = [
        pilot_best(first, 1e-3, s, spread)[column] - pilot_best(second, 1e-3, s, spread)[column]
        for s in range(4)
      ]
      bounds.append(np.std(d, ddof=1) * factor)
    needed[measure.key] = {
      m: max(max(2, math.ceil(z**2 * math.pi / 3 * (b / m) ** 2)) for b in bounds)
      for m in measure.pilot.margins
    }
    fits = [m for m, n in needed[measure.key].items() if n <= 20]
    margins[measure.key] = min(fits) if fits else max(measure.pilot.margins)
  count = min(20, max(8, *(needed[k][m] for k, m in margins.items())))
  return needed, margins, count


def test_the_rule_applied_to_a_synthetic_pilot(tmp_path, monkeypatch):
  """Each arm's lr the pilot's selection (relu's 3e-4, the others' 1e-3); the pairs at each
  candidate margin, the margins and the seed count as computed here with SciPy; by hand: the
  gated pair's error SD 1.826e-3 (bound 3.155e-3) asks 130, 33, 15 pairs at 0.1, 0.2, 0.3
  points, so 0.3 points; its loss SD three times that asks 47 and 12 at 0.005 and 0.01 nats, so
  0.01; 15 seeds, 300-314."""
  monkeypatch.setattr(confirm, "CHECKOUT", tmp_path / "nowhere")
  write_pilot(tmp_path)
  d = transformer.filled(transformer.VIT, tmp_path)
  assert d.learning_rates == {a: 3e-4 if a == "relu" else 1e-3 for a in ARMS}
  needed, margins, count = expected_rule()
  assert {k: dict(v) for k, v in d.sizing.needed.items()} == needed
  assert d.margins == margins == {"best.test_error": 0.003, "best.test_loss": 0.01}
  assert needed["best.test_error"][0.001] == 130 and needed["best.test_error"][0.002] == 33
  assert needed["best.test_error"][0.003] == 15 and needed["best.test_loss"][0.005] == 47
  assert needed["best.test_loss"][0.01] == 12
  assert d.seeds == tuple(range(300, 300 + count)) == tuple(range(300, 315))
  assert d.sizing.folder == "results/fashion_mnist/vit_fashion_mnist_pilot"
  assert (d.sizing.floor, d.sizing.level) == (8, 0.0125)
  assert not any(transformer.short_of_power(d, a, b, m) for a, b in d.forms for m in d.measures)
  # The grids: one per arm at its own lr.
  found = transformer.make_grids(d, Path("/out"))
  assert [(g.name, g.spec.activation, g.learning_rates) for g in found] == [
    (pilot.VIT.folder(a), a, (d.learning_rates[a],)) for a in ARMS
  ]
  assert all(g.spec.epochs == 10 and g.spec.dataset == "fashion_mnist" for g in found)


def test_where_no_margin_fits_the_cap_the_largest_is_taken_and_the_short_test_named(tmp_path):
  """The gated pair's spread four times as large: no error margin fits 20 seeds (1 point asks
  21), so the error margin is 1 point, the seeds the cap, and that test could not have passed
  with 80% power (its power at 20 pairs below it); gelu_tanh − gelu's could."""
  write_pilot(tmp_path, spread=4.0)
  d = transformer.filled(transformer.VIT, tmp_path)
  needed, margins, count = expected_rule(spread=4.0)
  assert {k: dict(v) for k, v in d.sizing.needed.items()} == needed
  assert needed["best.test_error"][0.01] == 21 and d.margins == margins
  # The margin taken is the loosest candidate, as the rule's words say (not the tightest).
  assert d.margins["best.test_error"] == max(transformer.ERROR.pilot.margins)
  assert "the largest candidate (the loosest" in d.margin_rule and "tightest" not in d.margin_rule
  assert d.margins["best.test_error"] == 0.01 and count == 20 and len(d.seeds) == 20
  assert transformer.short_of_power(d, TANH_GATE, "geglu", ERROR)
  assert not transformer.short_of_power(d, "gelu_tanh", "gelu", ERROR)
  bound = d.sizing.spread(TANH_GATE, "geglu", ERROR).sd_bound
  assert transformer.tost_power(d, bound, 0.01, 20) < 0.8


def hand_spread(first, second, metric, sd_bound):
  """A pilot spread with only what the rule reads: its SD bound (the SD a 4-pair one's)."""
  sd = sd_bound / math.sqrt(3 / scipy.stats.chi2.ppf(0.2, 3))
  return pilot.Spread(first, second, metric, (1e-3, 1e-3), (0, 1, 2, 3), (), 0.0, sd, sd_bound,
                      {}, {})  # fmt: skip


@pytest.mark.parametrize(
  ("bound", "margins", "seeds"),
  [(1e-5, {"best.test_error": 0.001, "best.test_loss": 0.005}, 8),  # 2 pairs: the floor
   (1.0, {"best.test_error": 0.01, "best.test_loss": 0.05}, 20)],  # thousands: the cap
  ids=["floor", "cap"],
)  # fmt: skip
def test_the_floor_and_the_cap_bound_the_seeds(bound, margins, seeds):
  """Spreads so small that 2 pairs would do: the smallest margins and the floor's 8 seeds; so
  large that no margin fits: the largest margins and the cap's 20, every forms test short."""
  spreads = tuple(
    hand_spread(a, b, m, bound)
    for a, b in transformer.FORMS_PAIRS
    for m in ("validation_error", "validation_loss")
  )
  analysis = pilot.Analysis({}, dict.fromkeys(ARMS, 1e-3), spreads, ())
  d = transformer.from_pilot(transformer.VIT, analysis, "results/x")
  assert d.margins == margins and d.seeds == tuple(range(300, 300 + seeds))
  short = [transformer.short_of_power(d, a, b, m) for a, b in d.forms for m in d.measures]
  assert short == [seeds == 20] * 4
  with pytest.raises(ValueError, match="no paired SD of gelu_tanh − gelu on validation_error"):
    transformer.from_pilot(transformer.VIT, dataclasses.replace(analysis, spreads=()), "x")
  with pytest.raises(ValueError, match="gives no lr for swiglu"):
    transformer.from_pilot(
      transformer.VIT,
      dataclasses.replace(analysis, selected={**analysis.selected, "swiglu": None}),
      "x",
    )


def test_the_controls_pilot_gap_is_signed_in_margins():
  """The control's pilot gap in margins keeps its sign: identity − gelu 0.0259 nats below gelu
  on the validation loss is -0.0259 / 0.05 = -0.518 margins of the loss's 0.05 (the largest
  candidate, every spread so large that none fits), +4.01 points +4.01 of the error's 1. The
  pilot's condition for taking identity as the control (a gap many times its margin: above
  gelu by more than 3 margins) holds at +4.01, not at -0.518."""
  forms_spreads = [
    hand_spread(a, b, m, 1.0)
    for a, b in transformer.FORMS_PAIRS
    for m in ("validation_error", "validation_loss")
  ]
  spreads = (
    *forms_spreads,
    dataclasses.replace(hand_spread("identity", "gelu", "validation_error", 1.0), mean=0.0401),
    dataclasses.replace(hand_spread("identity", "gelu", "validation_loss", 1.0), mean=-0.0259),
  )
  analysis = pilot.Analysis({}, dict.fromkeys(ARMS, 1e-3), spreads, ())
  d = transformer.from_pilot(transformer.VIT, analysis, "results/x")
  assert d.margins == {"best.test_error": 0.01, "best.test_loss": 0.05}
  lines = [line for line in transformer_design.sizing_lines(d) if "control identity" in line]
  condition = (
    "the pilot's condition for taking it as the control (a gap many times its margin: more "
    "than 3 margins, identity above gelu)"
  )
  assert lines == [
    "  - control identity − gelu: the pilot's mean difference +4.01 points, +4.01 margins: "
    f"{condition} holds.",
    "  - control identity − gelu: the pilot's mean difference -0.0259 nats, -0.518 margins: "
    f"{condition} does not hold.",
  ]


def test_a_missing_pilot_is_refused_in_one_paragraph(tmp_path, monkeypatch):
  """No pilot result under the folder or the checkout: one paragraph naming the folder and the
  command that makes it (no data flag: the tagger's ARK files are downloaded); a pilot not
  finished: the arms missing."""
  monkeypatch.setattr(confirm, "CHECKOUT", tmp_path / "nowhere")
  for design, command in (
    (transformer.VIT, "`python experiments/reproduce.py --task=vit_fashion_mnist_pilot`"),
    (transformer.TAGGER, "`python experiments/reproduce.py --task=transformer_twitter_pos_pilot`"),
  ):
    with pytest.raises(ValueError) as e:
      transformer.filled(design, tmp_path)
    message = str(e.value)
    assert "\n" not in message and command in message
    assert f"{transformer.pilot_folder(design.pilot)}/ is not there" in message
    assert str(tmp_path) in message and "from_pilot" in message
  write_pilot(tmp_path, arms=ARMS[:5])
  with pytest.raises(ValueError, match=r"has not finished swiglu, identity\. Finish it first"):
    transformer.filled(transformer.VIT, tmp_path)


# -------------------------------------------------------------------------------- verdicts

SEEDS = tuple(range(300, 315))
A = np.arange(5, 20)  # relu − gelu: every seed, distinct
C = np.array([1, -2, 3, -4, 5, -6, 7, -8, 8, -7, 6, -5, 4, -3, 2])  # gelu_tanh − gelu, small
B = 100 + np.arange(1, 16)  # geglu − gelu: every seed above
F = np.array([5, -3, 2, -6, 4, -1, 7, -8, 9, -10, 11, -12, 13, -14, 15])  # tanh gate − gelu_tanh
G = np.arange(3, 18)  # relu − swiglu


def counts(identity_gap=2000):
  """Each arm's test errors in images per seed, made so that (on test error) gelu below relu and
  swiglu below relu are confirmed, geglu below gelu refuted (geglu above on every seed), the tanh
  gate below gelu_tanh inconclusive (T+ 66 of 120), gelu_tanh − gelu within the margin, the
  tanh gate − geglu beyond it, identity − gelu ``identity_gap`` (and 0-2) apart: 20 points and
  0.02 nats by default, beyond both margins."""
  relu = 1000 + np.array([7, 3, 11, 5, 9, 2, 14, 6, 12, 8, 1, 13, 4, 10, 0])
  gelu = relu - A
  tanh = gelu + C
  found = {
    "relu": relu, "gelu": gelu, "gelu_tanh": tanh, "geglu": gelu + B, TANH_GATE: tanh + F,
    "swiglu": relu - G, "identity": gelu + identity_gap + np.arange(15) % 3,
  }  # fmt: skip
  return {arm: dict(zip(SEEDS, map(int, x), strict=True)) for arm, x in found.items()}


def values_of(found):
  """arm -> measure -> seed -> value: the error a rate of 10,000 images, the loss 0.3 plus 1e-5
  nats an image."""
  return {
    arm: {
      ERROR.key: {s: c / 10_000 for s, c in by_seed.items()},
      LOSS.key: {s: 0.3 + 1e-5 * c for s, c in by_seed.items()},
    }
    for arm, by_seed in found.items()
  }


def filled_design(**changes):
  """VIT filled by hand: every lr 1e-3, the error's margin 0.3 points (30 images), the loss's
  0.01 nats, 15 seeds."""
  sizing = transformer.Sizing("vit_fashion_mnist_pilot", "results/x", (), 0.0125, 8, {})
  changes = {"learning_rates": dict.fromkeys(changes.get("arms", ARMS), 1e-3), **changes}
  return dataclasses.replace(
    transformer.VIT, margins={ERROR.key: 0.003, LOSS.key: 0.01}, seeds=SEEDS, sizing=sizing,
    **changes,
  )  # fmt: skip


def test_the_ranking_verdicts_against_scipy_and_holm_by_hand():
  """Each ranking hypothesis' p is SciPy's exact two-sided signed-rank p of its paired
  differences (first minus second); Holm over the family of 4 by hand (three at 2/2^15, so each
  4 times 2/2^15 after Holm); the verdicts: confirmed, refuted, inconclusive, confirmed on test
  error; the shift the median of the Walsh averages."""
  d = filled_design()
  result = transformer_runs.judge(d, values_of(counts()))
  assert result.missing == () and len(result.ranking) == 8
  error = [o for o in result.ranking if o.hypothesis.metric == ERROR.key]
  found = counts()
  diffs = [np.array([found[a][s] - found[b][s] for s in SEEDS], float) for a, b in d.ranking]
  p = [scipy.stats.wilcoxon(x, method="exact").pvalue for x in diffs]
  assert p[0] == p[1] == p[3] == 2 / 2**15 and p[2] > 0.5
  for o, want, adjusted in zip(error, p, holm_by_hand(p), strict=True):
    assert o.p == pytest.approx(want, rel=1e-12) and o.holm == pytest.approx(adjusted, rel=1e-12)
  assert [o.holm for o in error][:2] == [pytest.approx(4 * 2 / 2**15)] * 2
  assert [o.verdict for o in error] == ["confirmed", "refuted", "inconclusive", "confirmed"]
  assert [o.side for o in error] == [-1, 1, 1, -1]
  walsh = [(x + y) / 2 for x, y in itertools.combinations_with_replacement(diffs[1], 2)]
  assert error[1].paired.shift == pytest.approx(np.median(walsh))
  # On the loss (1e-5 nats an image) the same signs, so the same p and verdicts.
  loss = [o for o in result.ranking if o.hypothesis.metric == LOSS.key]
  assert [o.verdict for o in loss] == [o.verdict for o in error]
  assert [o.p for o in loss] == pytest.approx([o.p for o in error], rel=1e-12)


def test_the_forms_verdicts_and_the_control_against_scipy():
  """gelu_tanh − gelu (within ±30 images on every seed): TOST p 1/2^15 (SciPy's one-sided exact
  tests of d ± 30), equivalent; the tanh gate − geglu (about −100 images): beyond the margin,
  different, lower; Holm over the 2 by hand; the control (about +2000) different, alone in its
  family: the gate passes and both verdicts stand."""
  d = filled_design()
  result = transformer_runs.judge(d, values_of(counts()))
  found = counts()
  error = [o for o in result.forms if o.comparison.metric.key == ERROR.key]
  assert [(o.comparison.first, o.comparison.second, o.comparison.control) for o in error] == [
    ("gelu_tanh", "gelu", False), (TANH_GATE, "geglu", False), ("identity", "gelu", True)
  ]  # fmt: skip
  tanh = np.array([found["gelu_tanh"][s] - found["gelu"][s] for s in SEEDS], float)
  gate = np.array([found[TANH_GATE][s] - found["geglu"][s] for s in SEEDS], float)
  assert np.array_equal(error[0].differences, tanh) and np.array_equal(error[1].differences, gate)
  one_sided = scipy.stats.wilcoxon(tanh + 30, alternative="greater", method="exact").pvalue
  assert one_sided == 1 / 2**15
  assert error[0].equivalence.p_equivalent == pytest.approx(one_sided)
  beyond = scipy.stats.wilcoxon(gate + 30, alternative="less", method="exact").pvalue
  assert error[1].equivalence.p_beyond == pytest.approx(2 * beyond)
  ps = [error[0].equivalence.p, error[1].equivalence.p]
  assert ps == [pytest.approx(2 / 2**15), pytest.approx(4 / 2**15)]
  assert [error[0].p_holm, error[1].p_holm] == pytest.approx(holm_by_hand(ps))
  assert [o.verdict for o in error] == ["equivalent", "different", "different"]
  assert error[1].direction == "lower" and error[2].direction == "higher"
  assert error[2].p_holm == pytest.approx(error[2].equivalence.p)  # a family of one
  assert result.control_passed()
  assert [result.reported(o) for o in error] == ["equivalent", "different", "different"]


@pytest.mark.parametrize(
  ("gap", "control"),
  [(0, ["equivalent", "equivalent"]), (500, ["different", "equivalent"])],
  ids=["on both metrics", "on the loss alone"],
)
def test_the_control_gate_marks_every_equivalent_not_established(gap, control):
  """The control not found different from gelu on some metric (identity 0-2 images from gelu;
  or 500 images, 5 points, but 0.005 nats, within the loss's margin): every *equivalent* of the
  task, on either metric, is reported *not established*; a *different* stays."""
  result = transformer_runs.judge(filled_design(), values_of(counts(identity_gap=gap)))
  assert [o.verdict for o in result.forms if o.comparison.control] == control
  assert not result.control_passed()
  forms_only = [o for o in result.forms if not o.comparison.control]
  assert [o.verdict for o in forms_only] == ["equivalent", "different", "equivalent", "equivalent"]
  assert [result.reported(o) for o in forms_only] == [
    "not established", "different", "not established", "not established"
  ]  # fmt: skip


@pytest.mark.parametrize(
  ("shift", "verdict", "reported"),
  [(0, "equivalent", "equivalent"), (2000, "different", "not established")],
  ids=["gelu within the margin of itself", "gelu beyond it"],
)
def test_the_negative_control_is_paired_in_seed_order_and_gates_every_equivalent(
  shift, verdict, reported
):
  """A negative control (gelu on seeds each + 100, a variant with a seed offset) is compared
  with gelu seed s + 100 against seed s, in a family of its own: where its paired differences
  (0-2 images, or 2000 more) are found *equivalent*, the forms' *equivalent* stands; where not,
  each is reported *not established* and a *different* stays."""
  variant = grids.Variant("gelu", seed_offset=100)
  d = filled_design(
    arms=(*ARMS, "gelu_again"), negative="gelu_again", variants={"gelu_again": variant}
  )  # fmt: skip
  found = counts()
  again = {s + 100: found["gelu"][s] + shift + (s % 3) for s in SEEDS}
  values = values_of({**found, "gelu_again": again})
  # arm_values' re-keying, as a finished run's seeds give it: seed s + 100 paired with s.
  values["gelu_again"] = {
    k: {s - 100: v for s, v in x.items()} for k, x in values["gelu_again"].items()
  }
  result = transformer_runs.judge(d, values)
  negative = [o for o in result.forms if o.comparison.negative]
  assert [o.comparison.family[0] for o in negative] == ["negative control"] * 2
  want = np.array([shift + s % 3 for s in SEEDS], float)
  assert np.array_equal(negative[0].differences, want)
  assert [o.verdict for o in negative] == [verdict] * 2
  assert negative[0].p_holm == pytest.approx(negative[0].equivalence.p)  # a family of one
  assert result.control_passed() and result.negative_passed() == (verdict == "equivalent")
  forms_only = [o for o in result.forms if o.comparison.is_form]
  assert [o.verdict for o in forms_only] == ["equivalent", "different", "equivalent", "equivalent"]
  assert [result.reported(o) for o in forms_only] == [reported, "different", reported, reported]
  assert made_seeds(d) == {"gelu_again": tuple(s + 100 for s in SEEDS)}


def made_seeds(design):
  """The grids that train seeds of their own, and which."""
  made = transformer.make_grids(design, Path("/out"))
  return {g.name: g.seeds for g in made if g.seeds is not None}


def test_a_pending_arm_judges_nothing_and_a_split_of_another_size_is_refused():
  values = values_of(counts())
  del values["swiglu"]
  result = transformer_runs.judge(filled_design(), values)
  assert result.missing == ("swiglu",) and result.ranking == () and result.forms == ()
  assert not result.control_passed()
  with pytest.raises(ValueError, match="not a whole number of 10000"):
    confirm.whole(0.12345, 10_000)


# ------------------------------------------------------------------------------ wrong form


def tiny_run(tmp_path):
  """A tiny_mnist spec trained with gelu and six untrained networks of it (initial draws of
  seeds 0-5: no training), on MNIST-format files."""
  from gelujax import engine
  from gelujax.members import Members
  from tests.tiny_task import write_mnist_files

  data_dir = tmp_path / "mnist"
  write_mnist_files(str(data_dir))
  spec = tasks.get("tiny_mnist(data_options={'validation_size': 32})").replace(
    activation="gelu", epochs=1
  )
  splits = spec.load_data(str(data_dir))
  members = Members((1e-3,), tuple(range(6)))
  program = engine.make_program(tasks.build(spec, splits), engine.make_mesh(6), 6)
  state = program.unpad(program.init(*program.put_members(members)))
  return spec, splits, members, state


@pytest.mark.slow
def test_the_wrong_form_rows_are_kept_and_read_back(tmp_path):
  """gelu's networks run with gelu_tanh in float32 and bfloat16 (`wrong_form.evaluate`): the
  rows written to wrong_form/<arm>.json read back to the same rows (their summaries derived
  again); a grid whose rows are kept is read, not restored; an arm without wrong forms, or a
  grid with neither rows nor checkpoints, gives none."""
  spec, splits, members, state = tiny_run(tmp_path)
  design = dataclasses.replace(filled_design(), wrong_forms={"gelu": ("gelu_tanh",)})
  rows = wrong_form.evaluate(spec, splits, members, state, "gelu_tanh", dtypes=design.dtypes)
  assert [(r.trained, r.run_with, r.dtype) for r in rows] == [
    ("gelu", "gelu_tanh", "float32"), ("gelu", "gelu_tanh", "bfloat16")
  ]  # fmt: skip
  assert all(len(r.networks) == 6 and r.statistic("largest_change").n == 6 for r in rows)
  assert rows[0].statistic("largest_change").median > 0  # the forms differ
  out = tmp_path / "out"
  path = transformer_runs.wrong_form_path(design, out, "gelu")
  assert path == out / "wrong_form" / "gelu.json"
  wrong_form.write(path, rows)
  back = wrong_form.read(path)
  assert [json.dumps(r.to_json()) for r in back] == [json.dumps(r.to_json()) for r in rows]
  grid = grids.Grid("gelu", spec, out / "runs" / "gelu", (1e-3,))  # no checkpoint there
  kept = transformer_runs.evaluate_wrong_forms(design, grid, out=out, data_dir=None)
  assert [json.dumps(r.to_json()) for r in kept] == [json.dumps(r.to_json()) for r in rows]
  relu = dataclasses.replace(grid, name="relu", spec=spec.replace(activation="relu"))
  assert transformer_runs.evaluate_wrong_forms(design, relu, out=out, data_dir=None) is None
  # An arm is its name, not its activation: a narrower gelu is an arm of its own, without the
  # wrong forms of gelu's arm, trained with its model options in a folder of its own.
  narrow = grids.Variant("gelu", {"hidden_features": 8}, "feed-forward 8")
  varied = dataclasses.replace(
    design, arms=(*design.arms, "gelu_ffn8"), variants={"gelu_ffn8": narrow},
    learning_rates={**design.learning_rates, "gelu_ffn8": 1e-3},
  )  # fmt: skip
  made = {g.name: g for g in transformer.make_grids(varied, out)}
  assert made["gelu_ffn8"].spec.activation == made["gelu"].spec.activation == "gelu"
  assert made["gelu_ffn8"].spec.model_options == {
    **made["gelu"].spec.model_options, "hidden_features": 8
  }  # fmt: skip
  assert made["gelu_ffn8"].workdir == out / "runs" / "gelu_ffn8"
  assert (
    transformer_runs.evaluate_wrong_forms(varied, made["gelu_ffn8"], out=out, data_dir=None) is None
  )
  path.unlink()
  assert transformer_runs.evaluate_wrong_forms(design, grid, out=out, data_dir=None) is None
  assert transformer_runs.read_all_wrong_forms(design, out) == {}


def test_a_network_value_that_is_not_finite_survives_the_round_trip(tmp_path):
  """JSON holds a NaN as null: read back, it is NaN again, and the summary leaves it out as
  before."""
  networks = tuple(
    wrong_form.NetworkCost(1e-3, s, s == 2, 0.001 * s, 0.01, 0.5, 0.1, math.nan) for s in range(7)
  )
  row = wrong_form.WrongForm(
    "gelu", "gelu_tanh", "float32", networks, wrong_form.summarize(networks)
  )
  path = tmp_path / "rows.json"
  wrong_form.write(path, [row])
  (back,) = wrong_form.read(path)
  assert all(math.isnan(n.agreement) for n in back.networks)
  assert back.statistic("error_change") == row.statistic("error_change")
  assert back.statistic("agreement").n == 0 and back.networks[2].diverged


# ---------------------------------------------------------------------------------- README


def write_study(out, design, found, arms=ARMS):
  """The study's runs of ``arms`` as the trainer writes them: 3 epochs, each member's best
  validation loss at epoch 2 (relu's seeds 300 and 301 at the last), its test error and loss
  there ``found``'s (values_of)."""
  values = values_of(found)
  for arm in arms:
    members = []
    for seed in design.seeds:
      error, loss = values[arm][ERROR.key][seed], values[arm][LOSS.key][seed]
      last = arm == "relu" and seed in (300, 301)
      members.append(
        fake_workdirs.member(
          seed, design.learning_rates[arm],
          validation_loss=[1.0, 0.6, 0.5] if last else [1.0, 0.5, 0.6],
          validation_error=[0.5, 0.2, 0.2],
          test_error=[0.5, 0.5, error] if last else [0.5, error, 0.5],
          test_loss=[2.0, 2.0, loss] if last else [2.0, loss, 2.0],
          train_loss=[1.0, 0.9, 0.8],
        )
      )  # fmt: skip
    fake_workdirs.write_workdir(
      out / "runs" / design.folder(arm), members, activation=arm, task=design.task,
      dataset=design.dataset, select_metric="validation_loss",
    )  # fmt: skip


def walsh_interval(x):
  """The median of the Walsh averages and its interval at the largest k with P(T+ <= k - 1) at
  most 2.5%, T+ enumerated over every sign assignment."""
  n = len(x)
  walsh = np.sort([(x[i] + x[j]) / 2 for i in range(n) for j in range(i, n)])
  sums = np.array(list(itertools.product((0, 1), repeat=n))) @ np.arange(1, n + 1)
  k = max(t + 1 for t in range(n * (n + 1) // 2) if np.mean(sums <= t) <= 0.025)
  return np.median(walsh), walsh[k - 1], walsh[len(walsh) - k]


def two_sided_by_hand(d):
  """The exact two-sided signed-rank p (zeros dropped, mid-ranks), every sign assignment
  enumerated: the statistic at least as far from its mean as observed."""
  d = d[d != 0]
  ranks = scipy.stats.rankdata(np.abs(d))
  sums = np.array(list(itertools.product((0, 1), repeat=len(d)))) @ ranks
  observed, mean = ranks[d > 0].sum(), ranks.sum() / 2
  return float(np.mean(np.abs(sums - mean) >= abs(observed - mean) - 1e-9))


def kept_rows(design):
  """Hand-made wrong-form rows of gelu's networks (the test error up by 0-9 images of 10,000,
  skewed: the paired centre is not the mean)."""
  changes = [k / 10_000 for k in (0, 0, 1, 0, 2, 0, 1, 7, 0, 1, 3, 0, 0, 1, 9)]
  networks = tuple(
    wrong_form.NetworkCost(1e-3, s, False, c, 1e-4 * c, 0.01, 0.001, 0.999)
    for s, c in zip(design.seeds, changes, strict=True)
  )
  return [
    wrong_form.WrongForm("gelu", other, dtype, networks, wrong_form.summarize(networks))
    for other in ("gelu_tanh", "gelu_sigmoid")
    for dtype in ("float32", "bfloat16")
  ], changes


@pytest.fixture
def study(tmp_path, monkeypatch):
  """A project root holding the synthetic pilot (whose rule gives 15 seeds) and a README with
  the overview's markers; the study's folder under its results/."""
  monkeypatch.setattr(confirm, "CHECKOUT", tmp_path / "nowhere")
  root = tmp_path
  (root / "README.md").write_text(
    f"# x\n\n## Results\n\n{overview.OVERVIEW_BEGIN}\n{overview.OVERVIEW_END}\n"
  )
  write_pilot(root)
  design = dataclasses.replace(transformer.filled(transformer.VIT, root), epochs=3)
  assert design.seeds == SEEDS
  return root, root / "results" / "fashion_mnist" / design.name, design


def outputs(out):
  return {name: (out / name).read_bytes() for name in ("README.md", "table.md", "summary.json")}


@pytest.mark.e2e
def test_a_pending_study_names_its_arms_and_gives_no_verdict(study):
  root, out, design = study
  write_study(out, design, counts(), arms=ARMS[:4])
  transformer_report.reproduce(design, out=out, root=root, train=False)
  text = (out / "README.md").read_text()
  assert (
    "Pending: geglu, swiglu, identity not trained (`python experiments/reproduce.py "
    "--task=vit_fashion_mnist_study` trains them). No verdict is given" in text
  )
  verdicts = text.split("## Verdicts", 1)[1].split("\n## ", 1)[0]
  for word in ("confirmed", "refuted", "equivalent", "different", "inconclusive", "|"):
    assert word not in verdicts
  assert "| swiglu | 0.001 | pending |" in text and "| relu | 0.0003 | 15 | 0 |" in text
  summary = json.loads((out / "summary.json").read_text())
  assert summary["missing"] == ["geglu", "swiglu", "identity"]
  assert summary["headline"] == [] and summary["ranking"] == [] and summary["outcomes"] == []
  assert summary["headline_summary"] == (
    "gelujax's transformer study on vit_fashion_mnist (`vit_fashion_mnist_study`): pending "
    "(geglu, swiglu, identity not trained)."
  )
  assert summary["control_passed"] is None
  # The design is stated all the same, with the numbers its rule took from the pilot.
  assert "- Learning rates (from the pilot): relu 0.0003, gelu 0.001" in text
  assert "- Seeds (from the pilot): 15, 300–314:" in text
  assert "margin ±30 images (0.3 points)" in text and "margin ±0.01 nats" in text
  assert "(`vit_fashion_mnist_pilot`)" in text
  assert "[`results/fashion_mnist/vit_fashion_mnist_pilot`](../vit_fashion_mnist_pilot/" in text


@pytest.mark.e2e
def test_the_readme_states_the_verdicts_the_code_derives(study):
  """Every arm finished: the verdict rows as `transformer_runs.judge` gives them, the gate line, the
  members still improving at the last epoch, the wrong-form rows from the kept file with their
  paired centre and interval (enumerated here), the bfloat16 caveat, what it does not show; the
  overview's rows; re-rendered from the files alone, byte for byte."""
  root, out, design = study
  relu_lr = design.learning_rates["relu"]
  write_study(out, design, counts())
  rows, changes = kept_rows(design)
  wrong_form.write(transformer_runs.wrong_form_path(design, out, "gelu"), rows)
  transformer_report.reproduce(design, out=out, root=root, train=False)
  text = (out / "README.md").read_text()
  headings = re.findall(r"^## (.+)$", text, flags=re.M)
  assert headings == [
    "Verdicts", "Each arm", "The wrong form (exploratory)", "What this does not show",
    "Corrections", "Design", "Training",
  ]  # fmt: skip
  result = transformer_runs.judge(design, values_of(counts()))
  command = "python experiments/reproduce.py --task=vit_fashion_mnist_study"
  for measure in design.measures:
    chosen = [o for o in result.ranking if o.hypothesis.metric == measure.key]
    section = text.split(f"### {measure.label.capitalize()}", 1)[1].split("\nForms:", 1)[0]
    found = [line for line in section.splitlines() if re.match(r"\| \d \|", line)]
    assert len(found) == len(chosen) == 4
    for o, row in zip(chosen, found, strict=True):
      assert row.startswith(f"| {o.number} | {o.hypothesis.claim()} |")
      words = confirm_report.verdict_words(o, command)
      assert row.endswith(f" | {len(o.paired.seeds)} | {o.p:.2g} | {o.holm:.2g} | {words} |")
  assert f"| 1 | gelu below relu | 0.001, {relu_lr:g} | " in text
  assert "| gelu_tanh − gelu | 0.001, 0.001 | ±30 images (0.3 points) |" in text
  # gelu_tanh − gelu (C, within the margin): equivalent, a same-seed statement calibrated by its
  # own sensitivity (the control 2000 images away, beyond 3 margins of 30), its zero-shift p the
  # two-sided exact signed-rank p enumerated here.
  zero = two_sided_by_hand(C.astype(float))
  assert (
    f"| **equivalent** (same seeds), calibrated by its own sensitivity; zero-shift p {zero:.2g} |"
    in text
  )
  assert "| **different**: geglu(approximate=True) lower; zero-shift p " in text
  assert "| **different**: identity higher |" in text
  assert "The control (identity − gelu) was found *different* on every metric" in text
  verdicts = text.split("## Verdicts", 1)[1].split("\n## ", 1)[0]
  assert "That alone calibrates no *equivalent*" in verdicts and "stand" not in verdicts
  # Its closeness: the arms' per-seed counts' correlation (NumPy), all 15 pairs best at epoch 2,
  # each arm's SD across seeds and the paired SD (ddof 1).
  found = counts()
  tanh = [found["gelu_tanh"][s] for s in SEEDS]
  gelu = [found["gelu"][s] for s in SEEDS]
  r = np.corrcoef(tanh, gelu)[0, 1]
  assert (
    f"- gelu_tanh − gelu: per-seed correlation of the two arms {r:+.2f}, the same best epoch "
    f"in 15 of 15 pairs; SD across seeds gelu_tanh {np.std(tanh, ddof=1):.3g} images, gelu "
    f"{np.std(gelu, ddof=1):.3g} images; paired SD {np.std(C, ddof=1):.3g} images." in text
  )
  assert ("Its pairs stay nearly one network" in text) == (r >= 0.9)
  # The inconclusive claim (the tanh gate below gelu_tanh): what its exact interval (Walsh
  # averages, enumerated here) rules out, each way, and in percent of gelu_tanh's median.
  _, low, high = walsh_interval(F.astype(float))
  assert low < 0 < high
  base = np.median([found["gelu_tanh"][s] for s in SEEDS])
  assert (
    f"- {TANH_GATE} below gelu_tanh: its interval [{low:+.3g}, {high:+.3g}] images rules out "
    f"{TANH_GATE} lower by more than {-low:.3g} images ({-100 * low / base:.2g}% of gelu_tanh's "
    f"median), and {TANH_GATE} higher by more than {high:.3g} images "
    f"({100 * high / base:.2g}% of gelu_tanh's median)." in text
  )
  assert text.count("- gelu below relu: its interval") == 0  # confirmed: no such line
  assert "not established" not in text.split("## Each arm")[0]
  assert "| relu | 0.0003 | 15 | 0 |" in text and "| 2 (seeds 300, 301) |" in text
  # The wrong form: the float32 gelu → gelu_tanh row's centre and interval, in points.
  centre, low, high = walsh_interval(np.array(changes) * 100)
  assert abs(centre - np.mean(changes) * 100) > 0.005
  cell = f"{centre:+.3g} [{low:+.3g}, {high:+.3g}]"
  assert f"| gelu | gelu_tanh | float32 | 15 | {cell} |" in text
  assert "| geglu | pending |" in text
  assert "measure bfloat16's rounding more than the form" in text
  assert "- The wrong form is measured on the networks after their last epoch" in text
  assert "Wall-clock time per run" in text and "- none trained yet" in text
  # The summary and the overview's rows: one per family and metric.
  summary = json.loads((out / "summary.json").read_text())
  assert summary["missing"] == [] and summary["control_passed"] is True
  assert summary["best_at_last_epoch"] == {a: [300, 301] if a == "relu" else [] for a in ARMS}
  assert [r["where"] for r in summary["headline"]] == [
    f"{design.name}, {family}: {key}"
    for key in (ERROR.key, LOSS.key)
    for family in ("ranking", "forms", "control")
  ]
  assert summary["headline"][0]["verdict"] == "2 confirmed, 1 refuted, 1 inconclusive"
  assert summary["design"]["seeds"] == list(SEEDS) and summary["design"]["margins"] == {
    "best.test_error": 0.003, "best.test_loss": 0.01
  }  # fmt: skip
  assert [o["reported"] for o in summary["outcomes"]][:3] == [
    "equivalent", "different", "different"
  ]  # fmt: skip
  results = (root / "results" / "README.md").read_text()
  assert f"| [{design.name}, ranking: best.test_error](fashion_mnist/{design.name}/" in results
  # The study leads the top-level README's results, its line with the float32 gelu → gelu_tanh
  # row and what it does not show.
  top = (root / "README.md").read_text().split(overview.OVERVIEW_BEGIN, 1)[1]
  assert top.startswith(f"\n- {summary['headline_summary']}\n")
  assert f"gelu_tanh in float32 (exploratory): test error change {cell} points" in top
  assert "It shows one small transformer on vit_fashion_mnist, 3 epochs on CPUs" in top
  assert "(2 of its 105 networks still at their best at the last epoch)" in top  # relu's 300, 301
  # The ranking's decided hypotheses named (counts(): two confirmed, one refuted on test error).
  on = f"on {ERROR.label}"
  assert (
    f"(gelu below relu confirmed {on}, geglu below gelu refuted {on}, swiglu below relu "
    f"confirmed {on}" in top
  )
  before = outputs(out)
  transformer_report.reproduce(design, out=out, root=root, train=False)
  assert outputs(out) == before


@pytest.mark.e2e
def test_the_readme_reports_the_failed_control_and_the_short_test(tmp_path, monkeypatch):
  """A control within the margin: the forms' *equivalent* reported *not established*, in the
  tables and the summary; a forms test the cap left short: 'could not have passed' where it did
  not pass, and not where it did."""
  monkeypatch.setattr(confirm, "CHECKOUT", tmp_path / "nowhere")
  write_pilot(tmp_path, spread=4.0)
  design = dataclasses.replace(transformer.filled(transformer.VIT, tmp_path), epochs=3)
  seeds = design.seeds
  assert len(seeds) == 20
  found = {
    arm: {s: by_seed[300 + i % 15] for i, s in enumerate(seeds)}
    for arm, by_seed in counts(identity_gap=0).items()
  }
  out = tmp_path / "out"
  write_study(out, design, found)
  transformer_report.reproduce(design, out=out, root=tmp_path, train=False, project=False)
  text = (out / "README.md").read_text()
  assert "equivalent, **not established** (the control was not found different)" in text
  result = transformer_runs.analyse(design, transformer_runs.finished_runs(design, out))
  equivalents = sum(o.verdict == "equivalent" for o in result.forms if not o.comparison.control)
  assert not result.control_passed() and equivalents >= 2
  assert (
    f"so each of the forms' {equivalents} *equivalent* verdicts is reported as *not established*"
    in text
  )
  # 'Could not have passed' only beside a short test that did not pass; in Design, each short
  # test is 'short of the design's power', whatever its verdict.
  checked = shown_short(design, result, text)
  assert checked == {(False, True), (True, False)} and "this test could not have passed" not in text
  assert text.count(": short of the design's power.") == sum(
    transformer.short_of_power(design, a, b, m) for a, b in design.forms for m in design.measures
  )
  summary = json.loads((out / "summary.json").read_text())
  assert summary["control_passed"] is False
  assert "not established" in [o["reported"] for o in summary["outcomes"]]
  assert "the control failed" in summary["headline_summary"]
  # The short test made to pass (geglu within 8 images of the tanh gate on every seed): no
  # 'could not have passed' beside it.
  gate = found[TANH_GATE]
  found["geglu"] = {s: gate[s] + int(C[i % 15]) for i, s in enumerate(seeds)}
  write_study(out, design, found)
  transformer_report.reproduce(design, out=out, root=tmp_path, train=False, project=False)
  text = (out / "README.md").read_text()
  result = transformer_runs.analyse(design, transformer_runs.finished_runs(design, out))
  assert (True, True) in shown_short(design, result, text)
  assert "could not have passed" not in text


def shown_short(design, result, text):
  """Each forms row's (short of power, equivalent), checking that 'could not have passed' is
  beside the short rows that did not pass and no other."""
  checked = set()
  for o in result.forms:
    c = o.comparison
    if c.control:
      continue
    measure = next(m for m in design.measures if m.key == c.metric.key)
    row = next(
      line
      for line in text.split(f"### {measure.label.capitalize()}", 1)[1].splitlines()
      if line.startswith(f"| {c.first} − {c.second} |")
    )
    short = transformer.short_of_power(design, c.first, c.second, measure)
    marked = "; could not have passed with the design's power (see Design)" in row
    assert marked == (short and o.verdict != "equivalent"), row
    checked.add((short, o.verdict == "equivalent"))
  return checked


@pytest.mark.e2e
def test_training_records_the_command_and_trains_each_arm_at_its_lr(study, monkeypatch):
  """``train=True``: the command and revision recorded, every arm's grid handed to the trainer
  at its own lr on the design's seeds (the trainer replaced here: nothing trains), the wrong
  form evaluated after each (none kept, no checkpoint: nothing); then the README, all pending."""
  root, out, design = study
  calls = []

  def train_grids(found, *, seeds, data_dir, out, after):
    calls.append(([(g.name, g.learning_rates) for g in found], tuple(seeds), data_dir))
    assert [after(g) for g in found] == [None] * len(found)

  monkeypatch.setattr(grids, "train_grids", train_grids)
  transformer_report.reproduce(
    design, out=out, root=root, data_dir="/data", command="the test", project=False
  )
  assert calls == [
    ([(design.folder(a), (design.learning_rates[a],)) for a in ARMS], SEEDS, "/data")
  ]
  assert json.loads((out / "trained_with.json").read_text())["command"] == "the test"
  assert "Pending: relu, gelu" in (out / "README.md").read_text()
  with pytest.raises(ValueError, match="holds no runs to render"):
    transformer_report.reproduce(design, out=root / "none", root=root, train=False)


@pytest.mark.e2e
def test_reproduce_py_refuses_to_change_the_design_or_to_run_without_its_pilot(tmp_path):
  """--task=<study> takes where it runs, never what it trains; with the pilot's result in the
  folder it runs in but not finished, one paragraph naming the arms and the command that
  finishes it; with the pilot finished, --render writes the study's result (pending here)."""
  from run_mains import run_mains

  incomplete, complete = tmp_path / "incomplete", tmp_path / "complete"
  write_pilot(incomplete, arms=ARMS[:6])
  write_pilot(complete)
  (complete / "out" / "runs").mkdir(parents=True)
  script = ROOT / "experiments" / "reproduce.py"
  env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
  ended = run_mains(
    script,
    [
      ["--task=vit_fashion_mnist_study", "--seeds=5", "--learning_rates=1e-3"],
      ["--task=vit_fashion_mnist_study", f"--out={incomplete / 'out'}"],
    ],
    env,
    incomplete,
  )
  assert ended[0].code == (
    "reproduce.py: error: --task vit_fashion_mnist_study trains the design fixed in "
    "gelujax.study.transformer.VIT before its runs (arms relu, gelu, gelu_tanh, "
    "geglu(approximate=True), geglu, swiglu, identity, each arm's lr, the margins and the seeds "
    "from its pilot vit_fashion_mnist_pilot by gelujax.study.transformer.from_pilot, 10 epochs, "
    "fashion_mnist); leave out --seeds, --learning_rates."
  )
  assert ended[1].code == (
    "reproduce.py: error: The study vit_fashion_mnist_study takes each arm's learning rate, its "
    "margins and its number of seeds from its pilot's committed result, and "
    f"{incomplete / 'results/fashion_mnist/vit_fashion_mnist_pilot'}/ has not finished identity. "
    "Finish it first with `gelujax reproduce --task=vit_fashion_mnist_pilot`, which resumes the "
    "pilot where it stopped; then run this again."
  )
  assert not (incomplete / "out").exists()
  (rendered,) = run_mains(
    script, [["--task=vit_fashion_mnist_study", "--render", "--out=out"]], env, complete
  )
  assert rendered.code is None
  summary = json.loads((complete / "out" / "summary.json").read_text())
  assert summary["study"] == "vit_fashion_mnist_study" and summary["missing"] == list(ARMS)
  assert summary["design"]["seeds"] == list(SEEDS)


def test_a_test_error_that_counts_no_whole_images_is_refused(study):
  """A run whose test error is no whole number of the design's test images (another split) is
  refused, naming the numbers."""
  _, out, design = study
  found = counts()
  write_study(out, design, found, arms=("relu",))
  values = values_of(found)
  values["relu"][ERROR.key][300] = 0.12345
  members = [
    fake_workdirs.member(
      s, design.learning_rates["relu"], validation_loss=[1.0, 0.5, 0.6],
      test_error=[0.5, values["relu"][ERROR.key][s], 0.5], test_loss=[2.0, 0.3, 2.0],
    )
    for s in design.seeds
  ]  # fmt: skip
  fake_workdirs.write_workdir(
    out / "runs" / "relu", members, activation="relu", task=design.task, dataset=design.dataset
  )
  with pytest.raises(ValueError, match=r"a test error of 0\.12345 is not a whole number of 10000"):
    transformer_runs.analyse(design, transformer_runs.finished_runs(design, out))


def test_the_readme_sets_the_arms_beside_the_window_model_and_the_paper(study):
  """A design with a model to beat (the tagger's window MLP): its committed runs' medians and
  ranges, the paper's medians its summary quotes, the arms' own, and each model's lowest median,
  computed here with NumPy; no such section without one."""
  root, out, design = study
  design = dataclasses.replace(design, beside="results/w/window", beside_words="the window MLP")
  window = root / "results" / "w" / "window"
  errors = {"elu": [0.152, 0.149, 0.155], "relu": [0.158, 0.157, 0.16, 0.2]}
  for arm, x in errors.items():
    members = [
      fake_workdirs.member(200 + i, 1e-3, validation_loss=[1.0, 0.5, 0.6],
                           validation_error=[0.5, 0.2, 0.2], test_error=[0.5, e, 0.5],
                           test_loss=[2.0, 1.0, 2.0], train_loss=[1.0, 0.9, 0.8])
      for i, e in enumerate(x)
    ]  # fmt: skip
    fake_workdirs.write_workdir(window / "runs" / arm, members, activation=arm, task="twitter_pos",
                                dataset="twitter_pos", select_metric="validation_loss")  # fmt: skip
  hypothesis = {
    "metric": ERROR.key,
    "gelu": "gelu_tanh",
    "baseline": "relu",
    "paper": [0.1257, 0.1267],
  }
  summary = {"study": "window", "title": "w", "outcomes": [{"hypothesis": hypothesis}]}
  (window / "summary.json").write_text(json.dumps(summary))
  write_study(out, design, counts())
  transformer_report.write_result(design, out=out, root=root)
  text = (out / "README.md").read_text()
  section = text.split("## Beside the window MLP (descriptive)\n", 1)[1].split("\n## ", 1)[0]
  assert "([`results/w/window`](../../w/window/README.md))" in section
  gelu = np.array(list(counts()["gelu"].values())) / 100  # images of 10,000, in percent
  assert (
    f"| this study's vit_fashion_mnist | gelu | 15 | {np.median(gelu):.2f} "
    f"[{gelu.min():.2f}–{gelu.max():.2f}] |" in section
  )
  assert "| the window MLP | elu | 3 | 15.20 [14.90–15.50] |" in section
  assert "| the window MLP | relu | 4 | 15.90 [15.70–20.00] |" in section
  assert (
    "| the paper | gelu_tanh | – | 12.57 |" in section
    and "| the paper | relu | – | 12.67 |" in section
  )
  medians = {a: np.median(list(x.values())) / 100 for a, x in counts().items()}
  arm = min(medians, key=medians.get)
  assert (
    f"Lowest median: this study's vit_fashion_mnist, {arm} {medians[arm]:.2f}%; the window MLP, "
    "elu 15.20%; the paper, gelu_tanh 12.57%." in section
  )
  # The design without one: no such section.
  transformer_report.write_result(dataclasses.replace(design, beside=""), out=out, root=root)
  assert "## Beside" not in (out / "README.md").read_text()


def test_a_design_comparing_its_loss_alone_says_the_wrong_forms_loss_change_in_its_line():
  """The top-level README's line of a study with one measure, a loss (as char_lm_study): its
  decided claims without the measure's label, the float32 gelu → gelu_tanh row's change of test
  loss in nats (its paired centre and exact interval enumerated here), not of test error."""
  design = filled_design(measures=(LOSS,))
  result = transformer_runs.judge(design, values_of(counts()))
  rows, changes = kept_rows(design)
  line = transformer_report.headline_summary(design, result, {"gelu": rows})
  assert "ranking 2 confirmed, 1 refuted, 1 inconclusive (gelu below relu confirmed, " in line
  assert " on test" not in line
  centre, low, high = walsh_interval(1e-4 * np.array(changes))
  assert (
    f"run with gelu_tanh in float32 (exploratory): test loss change {centre:+.3g} nats "
    f"[{low:+.3g}, {high:+.3g}], top-1 agreement median 99.90%." in line
  )


def test_the_caveats_name_the_pilots_learning_rates_and_seeds():
  """What the study does not show names its pilot's lrs and selection seeds as that pilot has
  them (a pilot of 3 lrs and 5 seeds here), and one task."""
  wider = dataclasses.replace(pilot.VIT, learning_rates=(3e-3, 1e-3, 3e-4), seeds=(0, 1, 2, 3, 4))
  design = dataclasses.replace(transformer.VIT, pilot=wider)
  text = "\n".join(transformer_design.caveat_lines(design))
  assert "chosen from the pilot's 3 (0.003, 0.001, 0.0003) on its 5 selection seeds" in text
  assert "One small transformer on one CPU-sized task: `vit_fashion_mnist`, 10 epochs" in text
  assert "took the" not in text  # no lr chosen yet: none at the grid's edge
  # Arms at the grid's edges are named, each edge once; every arm at one edge is "Every arm".
  lrs = dict.fromkeys(transformer.VIT.arms, 1e-3) | {"relu": 3e-3, "identity": 3e-4}
  text = "\n".join(transformer_design.caveat_lines(dataclasses.replace(design, learning_rates=lrs)))
  assert (
    "relu took the largest lr the pilot tried (0.003): its best may lie above it, which no run "
    "here saw. identity took the smallest lr the pilot tried (0.0003): its best may lie below "
    "it, which no run here saw." in text
  )
  lrs = dict.fromkeys(transformer.VIT.arms, 3e-3)
  text = "\n".join(transformer_design.caveat_lines(dataclasses.replace(design, learning_rates=lrs)))
  assert "Every arm took the largest lr the pilot tried (0.003): their best may lie above" in text
  assert "smallest" not in text


def test_the_figures_second_panel_is_each_curve_from_its_second_half_on():
  """The figure's second panel: each curve's points from x = start on, every statistic cut at
  the same points (NumPy's own masks here), the members kept; a missing curve left out."""
  x = np.arange(1, 9) / 2.0  # evaluations at epochs 0.5 ... 4
  whole = runs.Curve(x, x * 10, x * 10 - 1, x * 10 + 1, 7)
  late = transformer_report.curves_from({"gelu": {"validation alone": whole, "test": None}}, 2.0)
  assert list(late) == ["gelu"] and list(late["gelu"]) == ["validation alone"]
  got = late["gelu"]["validation alone"]
  keep = x >= 2.0
  for have, want in zip(
    (got.x, got.median, got.low, got.high), (x, x * 10, x * 10 - 1, x * 10 + 1), strict=True
  ):
    np.testing.assert_array_equal(have, want[keep])
  assert got.x[0] == 2.0 and len(got.x) == 5 and got.members == 7


@pytest.mark.slow
def test_a_design_with_a_figure_draws_each_arms_curve_beside_its_row(study):
  """With ``figure`` the README shows curves.png under Each arm (a PNG, one curve a finished
  arm); without it (the committed studies), no figure is drawn or linked."""
  root, out, design = study
  write_study(out, design, counts())
  transformer_report.write_result(design, out=out, root=root)
  assert not (out / transformer_report.FIGURE).exists()
  assert transformer_report.FIGURE not in (out / "README.md").read_text()
  drawn = dataclasses.replace(design, figure="validation_loss")
  transformer_report.write_result(drawn, out=out, root=root)
  text = (out / "README.md").read_text()
  each = text[text.index("## Each arm") : text.index("## ", text.index("## Each arm") + 3)]
  assert f"![Each arm's validation loss against epoch]({transformer_report.FIGURE})" in each
  assert (out / transformer_report.FIGURE).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
