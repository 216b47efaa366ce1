"""The pilots of the transformer study (gelujax.study.pilot, pilot_report): the designs as fixed,
the analysis against values computed here by hand (NumPy and SciPy in float64) from runs written
in the trainer's formats, the validation-only guarantee, the overview, the command line, and the
tagger pilot end to end on ARK fixtures."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from pathlib import Path

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest
import scipy.stats

from gelujax import paper, tasks
from gelujax.specs import gated_unit
from gelujax.study import confirm, forms, grids, overview, pilot, pilot_report, power, registry
from tests import fake_workdirs

ROOT = Path(__file__).resolve().parents[1]
ARMS = ("relu", "gelu", "gelu_tanh", "geglu(approximate=True)", "geglu", "swiglu", "identity")
COMPARISONS = {
  ("gelu", "relu"),
  ("geglu", "gelu"),
  ("geglu(approximate=True)", "gelu_tanh"),
  ("swiglu", "relu"),
  ("gelu_tanh", "gelu"),
  ("geglu(approximate=True)", "geglu"),
  ("identity", "gelu"),
}


@pytest.mark.parametrize(
  "name, task, dataset",
  [
    ("vit_fashion_mnist_pilot", "vit_fashion_mnist", "fashion_mnist"),
    ("transformer_twitter_pos_pilot", "transformer_twitter_pos", "twitter_pos"),
  ],
)
def test_the_designs_are_fixed_as_the_issue_states(name, task, dataset):
  """Both pilots: the seven arms, the task's lrs, epochs and selection metric, selection seeds
  0-3; each arm a spec the task takes (the gated units gated, the others not), in a folder a file
  system takes; the study's seven comparisons, the control's last."""
  d = registry.get(name)
  spec = tasks.get(task)
  assert (d.name, d.task, d.dataset, d.date) == (name, task, dataset, "2026-11-27")
  assert d.arms == ARMS and d.control == "identity"
  assert d.learning_rates == spec.learning_rates == (1e-3, 3e-4)
  assert d.epochs == spec.epochs and d.select_metric == spec.select_metric
  assert d.seeds == (0, 1, 2, 3)
  assert set(d.comparisons) == COMPARISONS and len(d.comparisons) == 7
  assert d.comparisons[-1] == ("identity", "gelu")
  assert registry.variable(d) == {"vit_fashion_mnist_pilot": "VIT"}.get(name, "TAGGER")
  for reason in (d.arms_reason, d.control_reason, d.lr_reason, d.seeds_reason, d.epochs_reason):
    assert reason
  assert "fresh" in d.seeds_reason and "never evaluation seeds" in d.seeds_reason
  assert "candidate" in d.control_reason
  assert (d.alpha, d.power, d.bound) == (0.05, 0.8, 0.8)
  folders = [d.folder(a) for a in d.arms]
  assert len(set(folders)) == len(folders)
  assert all(re.fullmatch(r"[A-Za-z0-9_.=-]+", f) for f in folders)
  assert d.folder("geglu(approximate=True)") == "geglu_approximate=True_"
  grids = pilot.make_grids(d, Path("/out"))
  assert [g.name for g in grids] == folders
  for arm, grid in zip(d.arms, grids, strict=True):
    assert grid.spec.activation == arm and grid.learning_rates == d.learning_rates
    assert grid.spec.epochs == d.epochs and grid.spec.dataset == dataset
    assert grid.workdir == Path("/out/runs") / d.folder(arm)
    assert (gated_unit(arm) is not None) == (arm in ("geglu(approximate=True)", "geglu", "swiglu"))
  with pytest.raises(ValueError, match="selects on a validation metric"):
    dataclasses.replace(d, select_metric="test_error")


def test_the_selection_seeds_are_no_evaluation_seeds_of_the_project():
  """Seeds 0-3 lie below the first evaluation seed a task without its own design draws (the
  transformer tasks' study's default, 100 on), and are none of the evaluation seeds of the
  transformer tasks, the confirmation or the powered forms study. One paper task's design
  evaluates on seed 3: Fig. 4's autoencoder (mnist_ae, seeds 3-5), another task's networks."""
  for d in (registry.get(n) for n in registry.names(registry.PILOT)):
    assert max(d.seeds) < paper.EVALUATION_SEED_START
    shared = {}
    for task in (*paper.PAPER, "vit_fashion_mnist", "transformer_twitter_pos", "char_lm"):
      shared[task] = set(d.seeds) & set(paper.design(task, 10).evaluation_seeds)
    for other in (confirm.TWITTER, forms.POWERED):
      shared[other.name] = set(d.seeds) & set(other.seeds)
    assert {k: v for k, v in shared.items() if v} == {"mnist_ae": {3}}
    assert not shared[d.task]


def test_the_pairs_needed_are_the_normal_approximation():
  """SD 0.4 points, margin 0.2 points, alpha 0.05, power 0.8: to detect, (1.95996 + 0.84162)^2
  x 2^2 = 31.4, so 32; for equivalence, (1.64485 + 1.28155)^2 x 4 = 34.3, so 35."""
  z = scipy.stats.norm.ppf
  sd, margin = 0.004, 0.002
  detect = ((z(0.975) + z(0.8)) * sd / margin) ** 2
  equivalent = ((z(0.95) + z(0.9)) * sd / margin) ** 2
  assert (detect, equivalent) == (pytest.approx(31.3955, abs=1e-3), pytest.approx(34.2555, 1e-4))
  assert power.pairs_to_detect(sd, margin, alpha=0.05, power=0.8) == 32
  assert power.pairs_for_equivalence(sd, margin, alpha=0.05, power=0.8) == 35
  assert power.pairs_to_detect(0.0001, 0.01, alpha=0.05, power=0.8) == 2  # at least 2
  assert power.pairs_to_detect(math.nan, 0.01, alpha=0.05, power=0.8) is None


# Each member's best validation error, at epoch 2 of 3 (the curve 0.3, best, best + 0.01; its
# validation loss 1.0, best + 0.5, best + 0.6). Seed 0 of gelu at 1e-3 ties at epochs 2 and 3
# (its loss is lower at 3); seed 3 of identity at 3e-4 diverges at epoch 2. relu's two lrs tie
# on their medians (0.115).
BEST = {
  "relu": {1e-3: [0.10, 0.12, 0.11, 0.13], 3e-4: [0.12, 0.11, 0.10, 0.14]},
  "gelu": {1e-3: [0.15, 0.09, 0.10, 0.12], 3e-4: [0.13, 0.14, 0.12, 0.15]},
  "identity": {1e-3: [0.20, 0.22, 0.21, 0.25], 3e-4: [0.18, 0.19, 0.20, 0.16]},
}
DESIGN = dataclasses.replace(
  pilot.TAGGER,
  arms=("relu", "gelu", "identity", "swiglu"),
  comparisons=(("gelu", "relu"), ("swiglu", "relu"), ("identity", "gelu")),
  epochs=3,
)


def write_runs(out):
  """DESIGN's finished runs (swiglu not trained), their test metrics unlike their validation's
  (lowest where validation is highest)."""
  for arm, by_lr in BEST.items():
    members = []
    for lr, values in by_lr.items():
      for seed, best in enumerate(values):
        error, loss = [0.3, best, best + 0.01], [1.0, best + 0.5, best + 0.6]
        if (arm, lr, seed) == ("gelu", 1e-3, 0):
          error, loss = [0.20, 0.15, 0.15], [0.9, 0.65, 0.4]
        diverged = 2 if (arm, lr, seed) == ("identity", 3e-4, 3) else None
        members.append(
          fake_workdirs.member(
            seed, lr, diverged_epoch=diverged, validation_error=error, validation_loss=loss,
            test_error=[0.01, 0.9, 0.5], test_loss=[0.1, 3.0, 2.0], train_loss=[1.0, 0.9, 0.8],
          )
        )  # fmt: skip
    fake_workdirs.write_workdir(
      out / "runs" / DESIGN.folder(arm), members, activation=arm, task=DESIGN.task,
      dataset=DESIGN.dataset, select_metric=DESIGN.select_metric, dropout=0.1,
    )  # fmt: skip


def bests(arm, lr, key):
  """The hand-made values: seed -> best validation error (or loss); NaN where diverged."""
  values = dict(enumerate(BEST[arm][lr]))
  if key == "validation_loss":
    values = {s: v + 0.5 for s, v in values.items()}
    if arm == "gelu" and lr == 1e-3:
      values[0] = 0.65  # the earliest tied epoch's, not the lower loss of the latest
  if arm == "identity" and lr == 3e-4:
    values[3] = math.nan
  return values


def test_the_analysis_matches_values_computed_by_hand(tmp_path):
  """Each member's best at the earliest lowest validation error; each cell's medians and
  ranges; relu's tied medians select the smaller lr (the runs' own rule would take 1e-3, the
  first of the grid), identity's diverged member counts as +inf; the paired differences at the
  selected lrs, their SD and its bound from SciPy's chi-square, the pairs by hand."""
  write_runs(tmp_path)
  finished = pilot.finished_runs(DESIGN, tmp_path)
  assert set(finished) == {"relu", "gelu", "identity"}
  a = pilot.analyse(DESIGN, finished)
  assert a.missing == ("swiglu",)
  assert a.selected == {"relu": 3e-4, "gelu": 1e-3, "identity": 3e-4}
  tie = a.cells["gelu"][1e-3].bests[0]
  assert (tie.epoch, tie.values) == (2.0, {"validation_error": 0.15, "validation_loss": 0.65})
  for arm, by_lr in a.cells.items():
    for lr, cell in by_lr.items():
      for key in pilot.VALIDATION_KEYS:
        want = bests(arm, lr, key)
        got = cell.values(key)
        assert list(got) == [0, 1, 2, 3]
        np.testing.assert_allclose([got[s] for s in want], list(want.values()), rtol=1e-12)
        finite = [v for v in want.values() if math.isfinite(v)]
        s = cell.stats(key)
        assert s["median"] == pytest.approx(np.median(finite), rel=1e-12)
        assert (s["low"], s["high"]) == (pytest.approx(min(finite)), pytest.approx(max(finite)))
  assert a.cells["identity"][3e-4].selection_median("validation_error") == pytest.approx(0.195)
  assert a.cells["identity"][3e-4].diverged == 1
  # The study's comparisons whose arms both finished, error then loss; swiglu's left out.
  assert [(s.first, s.second, s.metric) for s in a.spreads] == [
    ("gelu", "relu", "validation_error"),
    ("identity", "gelu", "validation_error"),
    ("gelu", "relu", "validation_loss"),
    ("identity", "gelu", "validation_loss"),
  ]
  for s in a.spreads:
    x = bests(s.first, a.selected[s.first], s.metric)
    y = bests(s.second, a.selected[s.second], s.metric)
    seeds = [k for k in x if math.isfinite(x[k]) and math.isfinite(y[k])]
    d = np.array([x[k] - y[k] for k in seeds])
    assert s.seeds == tuple(seeds) == ((0, 1, 2) if s.first == "identity" else (0, 1, 2, 3))
    np.testing.assert_allclose(s.differences, d, atol=1e-12)
    assert s.mean == pytest.approx(d.mean(), abs=1e-12)
    sd = math.sqrt(((d - d.mean()) ** 2).sum() / (len(d) - 1))
    bound = sd * math.sqrt((len(d) - 1) / scipy.stats.chi2.ppf(0.2, len(d) - 1))
    assert (s.sd, s.sd_bound) == (pytest.approx(sd, rel=1e-9), pytest.approx(bound, rel=1e-9))
    z, ze = scipy.stats.norm.ppf(0.975) + scipy.stats.norm.ppf(0.8), scipy.stats.norm.ppf(0.95)
    ze += scipy.stats.norm.ppf(0.9)
    margins = (pilot.ERROR if s.metric == "validation_error" else pilot.LOSS).margins
    assert list(s.detect) == list(margins)
    for m in margins:
      assert s.detect[m] == max(2, math.ceil((z * bound / m) ** 2))
      assert s.equivalence[m] == max(2, math.ceil((ze * bound / m) ** 2))
  # gelu − relu in validation error: +0.03, -0.02, 0, -0.02 (gelu at 1e-3, relu at 3e-4).
  np.testing.assert_allclose(a.spreads[0].differences, [0.03, -0.02, 0.0, -0.02], atol=1e-12)


@pytest.fixture
def rendered(tmp_path):
  root = tmp_path
  (root / "README.md").write_text(
    f"# x\n\n## Results\n\n{overview.OVERVIEW_BEGIN}\n{overview.OVERVIEW_END}\n"
  )
  out = root / "results" / DESIGN.dataset / DESIGN.name
  write_runs(out)
  pilot_report.reproduce(DESIGN, out=out, root=root, train=False)
  return root, out


def outputs(out):
  return {name: (out / name).read_bytes() for name in ("README.md", "table.md", "summary.json")}


def test_the_curves_are_each_arms_validation_loss_at_its_selected_lr(rendered):
  """The figure's series by hand from write_runs' curves: gelu at 1e-3 (seed 0: 0.9, 0.65, 0.4;
  seeds 1-3: 1.0, best + 0.5, best + 0.6), identity at 3e-4 without its diverged seed 3, relu
  at 3e-4; swiglu not trained, not drawn. The README shows the figure."""
  _, out = rendered
  finished = pilot.finished_runs(DESIGN, out)
  (panel,) = pilot_report.curve_panels(DESIGN, finished, pilot.analyse(DESIGN, finished)).values()
  assert list(panel) == ["relu (lr 0.0003)", "gelu (lr 0.001)", "identity (lr 0.0003)"]
  gelu = panel["gelu (lr 0.001)"]["validation alone"]
  assert gelu.x.tolist() == [1.0, 2.0, 3.0] and gelu.members == 4
  assert gelu.median == pytest.approx([1.0, 0.61, 0.695])
  assert gelu.low == pytest.approx([0.9, 0.59, 0.4])
  assert gelu.high == pytest.approx([1.0, 0.65, 0.72])
  identity = panel["identity (lr 0.0003)"]["validation alone"]
  assert identity.members == 3 and identity.median[1] == pytest.approx(0.69)
  assert (out / pilot_report.FIGURE).stat().st_size > 10_000
  assert f"]({pilot_report.FIGURE})" in (out / "README.md").read_text()


@pytest.mark.e2e
def test_no_test_metric_changes_anything_the_pilot_writes(rendered):
  """The runs' test metrics replaced by other values (in metrics.jsonl and in each run's
  summary.json) leave README.md, table.md and summary.json as they were, byte for byte; the
  records the analysis sees hold an epoch and validation metrics alone."""
  root, out = rendered
  before = outputs(out)
  rng = np.random.default_rng(3)
  changed = 0
  for path in (out / "runs").glob("*/metrics.jsonl"):
    records = [json.loads(line) for line in path.read_text().splitlines()]
    for r in records:
      for k in [k for k in r if k.startswith("test_") and r[k] is not None]:
        r[k], changed = float(rng.uniform(0.0, 5.0)), changed + 1
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
  for path in (out / "runs").glob("*/summary.json"):
    summary = json.loads(path.read_text())
    for m in summary["members"]:
      for where in ("best", "final"):
        for k in [k for k in m[where] if k.startswith("test_") and m[where][k] is not None]:
          m[where][k] = float(rng.uniform(0.0, 5.0))
    path.write_text(json.dumps(summary))
  assert changed == 3 * 2 * 4 * 3 * 2 - 2 * 2  # the diverged member's last two are null
  pilot_report.reproduce(DESIGN, out=out, root=root, train=False)
  assert outputs(out) == before
  run = pilot.finished_runs(DESIGN, out)["gelu"]
  seen = pilot.validation_records(run, run.members[0])
  assert {k for r in seen for k in r} == {"epoch", *pilot.VALIDATION_KEYS}
  assert "test" not in json.dumps(json.loads(before["summary.json"])["pilot"])


def test_the_readme_and_summary_state_the_tables_and_no_verdict(rendered):
  """Tables first (each arm and lr, the selected lrs, the spreads), then the method and what the
  pilot does not show; the summary names its study and title, holds no outcome and no headline
  row, and one line for the top-level README."""
  _, out = rendered
  text = (out / "README.md").read_text()
  headings = re.findall(r"^## (.+)$", text, flags=re.M)
  assert headings == [
    "Each arm and learning rate", "Selected learning rates",
    "Paired spread at the selected learning rates", "Method", "What the pilot does not show",
    "Corrections", "Design", "Training",
  ]  # fmt: skip
  assert "(exact: `gelujax.study.power.chi2_quantile`, within 1e-10 of SciPy's)" in text
  assert "it called the chi-square quantile “SciPy's”" in text
  assert "| relu | 0.001 | 4 | 0 | 11.50 | 11.50 [10.00–13.00] |" in text
  assert "| identity | 0.0003 | 4 | 1 | 19.50 | 19.00 [18.00–20.00] |" in text
  assert "| relu | 0.0003 | 11.50 | 11.50 |" in text  # the tie: the smaller lr
  assert "| swiglu | pending | – | – |" in text
  assert "Pending: swiglu not trained" in text
  assert "| gelu − relu | 0.001, 0.0003 | 4 | -0.25 |" in text
  assert "No verdicts" in text and "4 seeds" in text and "Validation metrics only" in text
  assert "`runs/geglu_approximate=True_/`" not in text  # not an arm of this copy
  for word in ("confirmed", "refuted", "significan", "better", "worse", "outperform"):
    assert word not in text.lower()
  summary = json.loads((out / "summary.json").read_text())
  assert summary["study"] == DESIGN.name and summary["title"] == pilot_report.title(DESIGN)
  assert summary["outcomes"] == [] and summary["headline"] == []
  assert summary["missing"] == ["swiglu"]
  assert summary["headline_summary"].endswith("no verdicts; pending (swiglu not trained).")
  assert summary["pilot"]["selected"][0] == {"arm": "relu", "learning_rate": 3e-4}


def test_the_overview_lists_the_pilot_without_rows(rendered):
  """results/README.md: the pilot under what each result ran, no row in the verdicts' table; the
  top-level README: the pilot's one line among the studies' (as tests/test_results.py counts
  them)."""
  root, out = rendered
  results = (root / "results" / "README.md").read_text()
  assert results == overview.results_readme(root)
  assert not [line for line in results.splitlines() if line.startswith("| [")]
  link = f"{DESIGN.dataset}/{DESIGN.name}/README.md"
  assert (
    f"- [`results/{DESIGN.dataset}/{DESIGN.name}/`]({link}): {pilot_report.title(DESIGN)}."
    in (results)
  )
  readme = (root / "README.md").read_text()
  assert overview.results_overview(root) in readme
  summary = readme.split(overview.OVERVIEW_BEGIN, 1)[1].split(overview.OVERVIEW_END, 1)[0]
  lines = [x for x in summary.splitlines() if x.startswith("- ")]
  assert lines == [f"- {json.loads((out / 'summary.json').read_text())['headline_summary']}"]


@pytest.mark.e2e
def test_render_reads_the_runs_and_refuses_a_folder_without_them(rendered, tmp_path):
  root, out = rendered
  before = outputs(out)
  pilot_report.reproduce(DESIGN, out=out, root=root, train=False)
  assert outputs(out) == before
  with pytest.raises(ValueError, match="holds no runs to render"):
    pilot_report.reproduce(DESIGN, out=tmp_path / "none", root=root, train=False)


def test_reproduce_py_refuses_to_change_the_fixed_design(tmp_path):
  """--task=<pilot> takes where it runs, never what it trains; --render of nothing is a
  one-line error; both write nothing. --render of finished runs writes the pilot's result."""
  from run_mains import run_mains

  outs = [tmp_path / "a", tmp_path / "b", tmp_path / "c"]
  write_runs(tmp_path / "d")
  ended = run_mains(
    ROOT / "experiments" / "reproduce.py",
    [
      ["--task=vit_fashion_mnist_pilot", "--seeds=10", "--activations=gelu", f"--out={outs[0]}"],
      ["--task=transformer_twitter_pos_pilot", "--render", f"--out={outs[1]}"],
      ["--task=transformer_twitter_pos_pilot", "--dataset=twitter_pos", f"--out={outs[2]}"],
      ["--task=transformer_twitter_pos_pilot", "--render", f"--out={tmp_path / 'd'}"],
    ],
    {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)},
    ROOT,
  )
  assert ended[0].code == (
    "reproduce.py: error: --task vit_fashion_mnist_pilot trains the design fixed in "
    "gelujax.study.pilot.VIT before its runs (arms relu, gelu, gelu_tanh, "
    "geglu(approximate=True), geglu, swiglu, identity, lrs 0.001, 0.0003, seeds 0–3, 10 epochs, "
    "fashion_mnist); leave out --activations, --seeds."
  )
  assert ended[1].code.startswith(f"reproduce.py: error: --render: {outs[1] / 'runs'} holds no")
  assert ended[2].code.endswith("80 epochs, twitter_pos); leave out --dataset.")
  assert not any(out.exists() for out in outs)
  assert ended[3].code is None
  summary = json.loads((tmp_path / "d" / "summary.json").read_text())
  assert summary["study"] == "transformer_twitter_pos_pilot"
  assert summary["missing"] == ["gelu_tanh", "geglu(approximate=True)", "geglu", "swiglu"]


@pytest.mark.slow
def test_the_tagger_pilot_trains_end_to_end_on_ark_files(tmp_path):
  """The tagger pilot's runs on Twitter POS files written in the ARK format (one epoch, two
  seeds, two of its arms: each arm is a compilation of the full tagger, about a minute on 2
  busy cores): one run per arm at both lrs, the tanh-gated unit's folder named for a file
  system; then the result from their records, and the same result re-rendered from the files
  alone."""
  from tests.test_reproduce_paper_tasks import write_ark

  data = tmp_path / "data"
  data.mkdir()
  # A batch is 16 tweets: the train split holds two batches' worth (ARK tweets of 1-7 words).
  for name, tokens in (("oct27.train", 160), ("oct27.dev", 20), ("oct27.test", 20)):
    write_ark(data / name, tokens)
  arms = ("gelu", "geglu(approximate=True)")
  design = dataclasses.replace(
    pilot.TAGGER, arms=arms, comparisons=(arms[::-1],), seeds=(0, 1), epochs=1
  )
  out = tmp_path / "out"
  pilot_report.reproduce(
    design, out=out, root=tmp_path, data_dir=str(data), command="the test", project=False
  )
  for arm in design.arms:
    config = json.loads((out / "runs" / design.folder(arm) / "config.json").read_text())
    assert config["activation"] == arm and config["spec"]["model"] == "transformer_twitter_pos"
    assert config["members"] == [
      {"seed": s, "learning_rate": lr} for lr in design.learning_rates for s in design.seeds
    ]
  assert (out / "runs" / "geglu_approximate=True_" / "summary.json").exists()
  summary = json.loads((out / "summary.json").read_text())
  assert summary["missing"] == [] and len(summary["pilot"]["cells"]) == 4
  assert len(summary["pilot"]["spreads"]) == 2  # 1 comparison, 2 metrics
  for s in summary["pilot"]["spreads"]:
    assert s["seeds"] == [0, 1] and len(s["differences"]) == 2
  assert set(json.loads((out / "timings.json").read_text())) == {
    design.folder(a) for a in design.arms
  }
  text = (out / "README.md").read_text()
  assert "Trained with `the test`" in text and "Pending" not in text
  before = outputs(out)
  pilot_report.reproduce(design, out=out, root=tmp_path, train=False, project=False)
  assert outputs(out) == before


def test_the_language_models_pilots_are_fixed_as_the_issue_states():
  """char_lm_pilot: the issue's arms (relu, gelu, gelu_tanh, both GEGLUs, SwiGLU, ReGLU) and
  identity, its lrs, selection seeds 0-3 and the task's 4 epochs; char_lm_controls_pilot: gelu
  and gelu at feed-forwards 384 and 256, gelu's lr 2e-3, the same seeds, each variant's grid
  gelu with its feed-forward in a folder of its own."""
  d = pilot.CHAR_LM
  assert (d.name, d.task, d.dataset, d.date) == (
    "char_lm_pilot", "char_lm", "tiny_shakespeare", "2026-11-29"
  )  # fmt: skip
  assert d.arms == (
    "relu", "gelu", "gelu_tanh", "geglu(approximate=True)", "geglu", "swiglu", "reglu",
    "identity",
  )  # fmt: skip
  assert d.seeds == (0, 1, 2, 3) and d.epochs == tasks.get("char_lm").epochs == 4
  assert d.comparisons[-1] == ("identity", "gelu") and registry.variable(d) == "CHAR_LM"
  for arm in d.arms:
    assert (gated_unit(arm) is not None) == ("glu" in arm)
  c = pilot.CHAR_LM_CONTROLS
  assert c.arms == ("gelu", "gelu_ffn384", "gelu_ffn256") and c.learning_rates == (2e-3,)
  assert c.seeds == d.seeds and registry.variable(c) == "CHAR_LM_CONTROLS"
  made = pilot.make_grids(c, Path("/out"))
  assert [g.spec.activation for g in made] == ["gelu"] * 3
  assert [g.spec.model_options.get("hidden_features") for g in made] == [None, 384, 256]
  assert [g.workdir.name for g in made] == list(c.arms)


@pytest.mark.e2e
def test_a_language_model_pilot_trains_an_activation_and_a_narrower_variant_end_to_end(tmp_path):
  """At the tiny preset (feed-forward 64) on a small text: gelu, reglu and a variant of gelu
  with a feed-forward of 32, trained, read back and re-rendered from the files alone to the same
  bytes. The variant trains in its own folder with the task's other options kept, its
  feed-forward kernels (16, 32) and (32, 16) where gelu's are (16, 64) and (64, 16)."""
  from tests.test_char_lm import write_text

  write_text(tmp_path / "text")
  design = dataclasses.replace(
    pilot.CHAR_LM_CONTROLS,
    task="char_lm(model='char_gpt_tiny', data_options={'block_size': 16}, steps_per_epoch=6)",
    arms=("gelu", "reglu", "gelu_ffn32"),
    variants={"gelu_ffn32": grids.Variant("gelu", {"hidden_features": 32}, "feed-forward 32")},
    comparisons=(("reglu", "gelu"), ("gelu_ffn32", "gelu")), seeds=(0, 1), epochs=2,
  )  # fmt: skip
  out = tmp_path / "out"
  pilot_report.reproduce(
    design, out=out, root=tmp_path, data_dir=str(tmp_path / "text"), command="the test",
    project=False,
  )  # fmt: skip
  kernels = {}
  for arm in ("gelu", "gelu_ffn32"):
    config = json.loads((out / "runs" / arm / "config.json").read_text())
    assert config["spec"]["data_options"] == {"block_size": 16}
    assert config["spec"]["activation"] == "gelu"
    saved = sorted((out / "runs" / arm / "checkpoints").glob("*/default"))[-1]
    tree = ocp.StandardCheckpointer().metadata(saved)
    flat = jax.tree_util.tree_flatten_with_path(getattr(tree, "item_metadata", tree))[0]
    kernels[arm] = sorted(
      v.shape[1:]
      for p, v in flat
      if (k := jax.tree_util.keystr(p)).startswith("['params']") and "'mlp'" in k and "kernel" in k
    )  # each member's, stacked: (members, in, out); the optimizer's moments aside
  assert kernels == {"gelu": [(16, 64), (64, 16)], "gelu_ffn32": [(16, 32), (32, 16)]}
  summary = json.loads((out / "summary.json").read_text())
  assert summary["missing"] == [] and len(summary["pilot"]["cells"]) == 3
  assert {(s["first"], s["second"]) for s in summary["pilot"]["spreads"]} == {
    ("reglu", "gelu"), ("gelu_ffn32", "gelu")
  }  # fmt: skip
  assert len(summary["pilot"]["spreads"]) == 4  # two comparisons on two metrics
  text = (out / "README.md").read_text()
  assert "gelu_ffn32: gelu with feed-forward 32 (model options {'hidden_features': 32})" in text
  assert "gelu_ffn32 − gelu is the control's gap" in text
  before = outputs(out)
  pilot_report.reproduce(design, out=out, root=tmp_path, train=False, project=False)
  assert outputs(out) == before
