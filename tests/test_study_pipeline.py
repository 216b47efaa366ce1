"""Tests for gelujax.study.pipeline: results rendered from workdirs written in the trainer's
formats, with evaluation runs present, unfinished or absent."""

import json

import numpy as np
import pytest
import scipy.stats

from gelujax.study import overview, pipeline
from tests.fake_workdirs import constant, member, write_workdir

# 5 selection seeds tell the lrs apart (every seed's best validation loss is lower at 1e-3: the
# rank-sum p is 2/252 < 0.05): lr 1e-3 is each run's one candidate. With 3 (the smallest p is
# 0.1) both lrs are candidates.
SEEDS = [0, 1, 2, 3, 4]
EVAL = list(range(100, 105))
LRS = [1e-3, 1e-4]


def write_selection(
  out, name, activation, finals, dropout=0.0, task="mnist", seeds=SEEDS, **options
):
  """A finished selection grid: lr 1e-3 has the lower validation loss for every seed."""
  members = [
    member(
      seed,
      lr,
      train_loss=[1.0, 0.5, finals[i][seed]],
      validation_loss=[0.4, 0.2 + i, 0.3 + i],
      validation_error=constant(0.05),
      test_loss=constant(0.25),
      test_error=[0.5, 0.1 + 0.01 * seed, 0.12],
    )
    for i, lr in enumerate(LRS)
    for seed in seeds
  ]
  return write_workdir(
    out / "runs" / name, members, activation=activation, dropout=dropout, task=task, **options
  )


def write_evaluation(
  out, name, activation, finals, lr=1e-3, seeds=EVAL, workdir_name=None, **options
):
  members = [
    member(
      seed,
      lr,
      train_loss=[1.0, 0.5, final],
      validation_loss=[0.4, 0.2, 0.3],
      validation_error=constant(0.05),
      test_loss=constant(0.25),
      test_error=[0.5, 0.1 + 0.001 * seed, 0.12],
    )
    for seed, final in zip(seeds, finals, strict=True)
  ]
  return write_workdir(
    out / "runs" / (workdir_name or f"{name}_eval"), members, activation=activation, **options
  )


def snapshot(folder):
  return {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def mnist(tmp_path):
  out = tmp_path / "results" / "fashion_mnist" / "mnist"
  write_selection(out, "gelu_tanh", "gelu_tanh", [[0.01, 0.02, 0.03, 0.04, 0.05], [1] * 5])
  write_selection(out, "relu", "relu", [[0.04, 0.05, 0.06, 0.07, 0.08], [1] * 5])
  write_selection(out, "elu", "elu", [[0.02, 0.03, 0.04, 0.05, 0.06], [1] * 5])
  write_evaluation(out, "gelu_tanh", "gelu_tanh", [0.010, 0.011, 0.012, 0.013, 0.014])
  write_evaluation(out, "relu", "relu", [0.020, 0.021, 0.022, 0.023, 0.024])
  (tmp_path / "README.md").write_text(
    f"# x\n\n## Results\n\n{overview.OVERVIEW_BEGIN}\nold\n{overview.OVERVIEW_END}\nend\n"
  )
  return tmp_path, out


def test_render_judges_the_hypotheses_on_the_evaluation_seeds(mnist):
  root, out = mnist
  runs_before = snapshot(out / "runs")
  pipeline.render("mnist", out=out, root=root)
  assert snapshot(out / "runs") == runs_before
  summary = json.loads((out / "summary.json").read_text())
  first, second, third, fourth = summary["verdicts"]["primary"]
  # gelu_tanh vs relu on the evaluation seeds 100-104: apart, p = 2 / C(10, 5); Holm over the
  # family of 4 (the others pending or not run count as p = 1): 4 x 0.0079 = 0.032: confirmed.
  p = scipy.stats.mannwhitneyu(
    [0.010, 0.011, 0.012, 0.013, 0.014], [0.020, 0.021, 0.022, 0.023, 0.024], method="exact"
  ).pvalue
  assert first["comparison"]["a"] == [0.010, 0.011, 0.012, 0.013, 0.014]
  assert first["p"] == pytest.approx(p) and first["holm"] == pytest.approx(4 * p)
  assert first["verdict"] == "confirmed"
  assert first["seeds"] == "evaluation seeds 100–104 at the selected lr"
  # elu has no evaluation run: pending, never judged on its selection seeds.
  assert (second["verdict"], second["seeds"]) == (
    "pending",
    "pending: evaluation seeds not trained",
  )
  assert third["seeds"] == "not run: no gelu_tanh or relu run with dropout 0.5"
  assert fourth["seeds"] == "not run: no gelu_tanh or elu run with dropout 0.5"
  assert summary["settings"]["evaluation_seeds"] == EVAL
  readme_text = (out / "README.md").read_text()
  lines = readme_text.splitlines()
  assert lines[0] == "# GELU paper reproduction: mnist on fashion_mnist"
  table = lines.index("## Primary hypotheses") + 2
  assert lines[table].startswith("| # | claim | paper |")
  assert lines[table + 2].startswith(
    "| 1 | gelu_tanh below relu: final train log loss (nats), dropout 0 | 0.008 vs 0.007 | "
    "0.001 vs 0.001 | 0.012 vs 0.022 (evaluation seeds 100–104 at the selected lr; 5 vs 5) | "
    "-0.01 ["
  )
  # Its caveats: the train loss falls from 0.5 to 0.01 over the last fifth of the 3 epochs; 3
  # epochs of the paper's 50.
  assert lines[table + 2].endswith(
    f"| {p:.2g} | {4 * p:.2g} | confirmed; caveats: the tested metric, final train_loss, still "
    "falls at the last epoch (median fall over the last fifth of training, epochs 2–3: "
    "gelu_tanh 97.6%, relu 95.6%); judged at epoch 3 of the paper's 50 |"
  )
  # The sensitivity sets the selection seeds at each lr against the evaluation seeds' result.
  (sensitivity,) = [
    s for s in summary["sensitivity"] if s["claim"].startswith("gelu_tanh below relu: final")
  ]
  assert sensitivity["reference"]["seeds"] == "evaluation seeds"
  assert [x["agrees"] for x in sensitivity["at_lr"]] == [True, None]  # 1e-4: shift 0
  # The evaluation runs are in the table, beside the selection grids.
  table_md = (out / "table.md").read_text()
  assert "| gelu_tanh_eval | 0.001 | 100–104 | 0/5 | 0/5 | 0.008 | 0.012 |" in table_md
  assert "| relu | 0.001 | 0–4 | 0/5 | 0/5 | 0.007 | 0.06 |" in table_md
  # The top-level summary counts the verdicts; results/README.md has a row per hypothesis.
  top = (root / "README.md").read_text().splitlines()
  begin = top.index(overview.OVERVIEW_BEGIN)
  assert top[begin + 1] == (
    "- Confirmed: 1 of the paper's 8 pre-registered hypotheses, Fig. 2 primary 1*."
  )
  assert top[begin + 2].startswith("- Inconclusive: 1 of the paper's 8 pre-registered hypothe")
  assert top[begin + 3] == (
    "- Pending: 6 of the paper's 8 pre-registered hypotheses, Fig. 2 primary 2, 3, 4, secondary "
    "2, 3, 4."
  )
  assert top[-2:] == [overview.OVERVIEW_END, "end"]
  rows = (root / "results" / "README.md").read_text().split("|---|---|---|---|---|---|\n")[1]
  assert rows.splitlines()[0].startswith(
    "| [Fig. 2 primary 1](fashion_mnist/mnist/README.md) | gelu_tanh below relu: final train "
    "log loss (nats), dropout 0 | gelu_tanh 0.008 vs relu 0.007 | gelu_tanh 0.012 vs relu 0.022; "
    "shift -0.01 ["
  )
  assert rows.splitlines()[0].endswith(
    "| confirmed | the tested metric, final train_loss, still falls at the last epoch (median "
    "fall over the last fifth of training, epochs 2–3: gelu_tanh 97.6%, relu 95.6%); judged at "
    "epoch 3 of the paper's 50 |"
  )
  # Rendered again: the same summary.
  pipeline.render("mnist", out=out, root=root)
  assert json.loads((out / "summary.json").read_text()) == summary


def test_a_users_result_leaves_the_overview_alone_and_runs_again_from_its_folder(mnist):
  """A result in a user's folder (``project=False``) is not the project's record: the overview
  in that folder's README.md is not the user's to have rewritten, nor results/README.md
  written; the commands its README gives are the installed ones, run from that folder."""
  root, out = mnist
  top = (root / "README.md").read_text()
  pipeline.render("mnist", out=out, root=root, project=False)
  assert (root / "README.md").read_text() == top
  assert not (root / "results" / "README.md").exists()
  text = (out / "README.md").read_text()
  assert f"From scratch (from `{root}`, the folder it was run in; finished runs" in text
  assert "\ngelujax reproduce --task=mnist --dataset=fashion_mnist --render\n" in text
  assert "experiments/reproduce.py" not in text
  pipeline.render("mnist", out=out, root=root)  # the project's own: the overview follows
  assert (root / "README.md").read_text() != top
  assert "\npython experiments/reproduce.py --task=mnist" in (out / "README.md").read_text()


def test_the_references_choose_what_every_other_activation_is_compared_with(mnist):
  """Every activation that is not a baseline is compared with the baselines and with the
  references trained beside it (by default gelu and gelu_tanh), each pair of runs once; another
  choice is recorded and kept in the README's commands."""
  root, out = mnist
  write_selection(out, "silu", "silu", [[0.03, 0.04, 0.05, 0.06, 0.07], [1] * 5])

  def compared():
    summary = json.loads((out / "summary.json").read_text())
    first = summary["exploratory"][0]["metric"]
    pairs = [(e["run"], e["baseline"]) for e in summary["exploratory"] if e["metric"] == first]
    return summary, pairs

  pipeline.render("mnist", out=out, root=root)
  summary, pairs = compared()
  assert summary["settings"]["references"] == ["gelu", "gelu_tanh"]
  assert pairs == [
    ("gelu_tanh", "relu"), ("gelu_tanh", "elu"),
    ("silu", "relu"), ("silu", "elu"), ("silu", "gelu_tanh"),
  ]  # fmt: skip
  # silu has selection seeds alone: compared there, seed by seed on the 5 both grids trained.
  (silu,) = [e for e in summary["exploratory"] if e["baseline"] == "gelu_tanh"][:1]
  assert silu["seeds"] == "selection seeds" and silu["paired"]["seeds"] == SEEDS
  text = (out / "README.md").read_text()
  assert "--reference" not in text
  pipeline.render("mnist", out=out, root=root, references=["silu"])
  summary, pairs = compared()
  assert summary["settings"]["references"] == ["silu"]
  assert pairs == [
    ("gelu_tanh", "relu"), ("gelu_tanh", "elu"), ("gelu_tanh", "silu"),
    ("silu", "relu"), ("silu", "elu"),
  ]  # fmt: skip
  commands = [
    line for line in (out / "README.md").read_text().splitlines() if line.startswith("python ")
  ]
  # The reproduce command and the render command, each with the references.
  assert len(commands) == 2 and commands[1].endswith(" --render")
  assert all("--reference=silu" in line.split() for line in commands)


def test_unfinished_or_mismatched_evaluation_runs_are_pending(mnist):
  root, out = mnist
  # relu's evaluation run has not finished: no summary.json yet.
  (out / "runs" / "relu_eval" / "summary.json").unlink()
  # elu's was trained at lr 1e-4, but its selection grid selected 1e-3.
  write_evaluation(out, "elu", "elu", [0.02] * 5, lr=1e-4)
  pipeline.render("mnist", out=out, root=root)
  primary = json.loads((out / "summary.json").read_text())["verdicts"]["primary"]
  assert primary[0]["seeds"] == "pending: evaluation seeds not trained"
  assert primary[1]["seeds"] == (
    "pending: elu_eval holds lrs [0.0001], not the selected lr [0.001]: retrain it"
  )


def test_the_autoencoder_tests_every_lr_on_all_its_seeds(tmp_path):
  out = tmp_path / "ae"
  for name, scale in (("gelu_tanh", 1.0), ("relu", 2.0)):
    members = [
      member(s, lr, train_loss=[0.03, 0.02, 0.01], test_loss=[0.04, 0.03, scale * (0.01 + s)])
      for lr in LRS
      for s in (0, 1, 2)
    ]
    write_workdir(out / "runs" / name, members, activation=name, task="mnist_ae")
    extra = [
      member(s, lr, train_loss=[0.03, 0.02, 0.01], test_loss=[0.04, 0.03, scale * (0.01 + s)])
      for lr in LRS
      for s in (3, 4, 5)
    ]
    write_workdir(out / "runs" / f"{name}_eval", extra, activation=name, task="mnist_ae")
  pipeline.render("mnist_ae", out=out, root=tmp_path)
  summary = json.loads((out / "summary.json").read_text())
  first = summary["verdicts"]["primary"][0]
  assert first["seeds"] == "seeds 0–5"
  assert first["comparison"]["a"] == pytest.approx([0.01 + s for s in range(6)])
  assert first["comparison"]["b"] == pytest.approx([2 * (0.01 + s) for s in range(6)])
  assert summary["selections"] == []  # Nothing selected: no selection and no sensitivity.
  assert summary["sensitivity"] == []
  assert (out / "reconstruction_curves.png").read_bytes()[:4] == b"\x89PNG"
  table = (out / "table.md").read_text()
  assert "final test MSE, median over seeds at lr 0.001 (the paper's)" in table
  # Nothing selected: the grid of every lr marks no lr, not the paper's lr the tables show.
  assert "| relu | 0.0001 | 0/3 |" in table and "(selected)" not in table


def test_cifar10_reports_the_runs_retrained_at_the_selected_lr(tmp_path):
  out = tmp_path / "cifar10"
  write_selection(out, "gelu_tanh", "gelu_tanh", [[0.1] * 5, [0.1] * 5], dropout=0.5,
                  task="cifar10", dataset="cifar10")  # fmt: skip
  retrained = [
    member(s, 1e-3, train_loss=constant(0.1), test_loss=constant(0.3), test_error=[0.2, 0.1, e])
    for s, e in zip((100, 101, 102), (0.08, 0.0789, 0.07), strict=True)
  ]
  write_workdir(out / "runs" / "gelu_tanh_eval", retrained, activation="gelu_tanh", dropout=0.5,
                task="cifar10", dataset="cifar10")  # fmt: skip
  pipeline.render("cifar10", out=out, root=tmp_path)
  table = (out / "table.md").read_text()
  # Final test errors 8, 7.89, 7 (%) -> median 7.89, beside the paper's 7.89.
  assert "| gelu_tanh_eval | 0.001 | 100–102 | 0/3 | 0/3 | 7.89 | 7.89 | 7.63 ± 0.55 |" in table
  readme_text = (out / "README.md").read_text()
  assert "The evaluation runs train on the whole train file at the selected lr" in readme_text


def test_render_refuses_empty_results(tmp_path):
  with pytest.raises(ValueError, match="holds no runs to render"):
    pipeline.render("mnist", out=tmp_path / "nothing", root=tmp_path)
  with pytest.raises(ValueError, match="holds no noise evaluations to render"):
    pipeline.render("mnist_noise", out=tmp_path / "nothing", root=tmp_path)


def test_noise_render_reads_the_kept_evaluations(mnist, tmp_path):
  root, classifiers = mnist
  out = classifiers.parent / "mnist_noise"
  levels = np.linspace(0, 3, 20).tolist()
  for workdir, lr, seeds, base in (
    ("gelu_tanh", 1e-3, SEEDS, 0.50), ("elu", 1e-3, SEEDS, 0.40),
    ("gelu_tanh_eval", 1e-3, EVAL, 0.50), ("relu_eval", 1e-3, EVAL, 0.505),
  ):  # fmt: skip
    accuracy = [[base + 0.001 * i - 0.1 * a for a in levels] for i in range(len(seeds))]
    result = {
      "learning_rate": lr, "members": len(seeds), "diverged": 0, "levels": levels,
      "seeds": seeds, "accuracy": accuracy, "loss": [[1.0 + a for a in levels] for _ in seeds],
      "workdir": str((classifiers / "runs" / workdir).relative_to(root)),
    }  # fmt: skip
    path = out / "noise" / f"{workdir}_lr{lr:g}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result))
  pipeline.render("mnist_noise", out=out, root=root)
  primary = json.loads((out / "summary.json").read_text())["verdicts"]["primary"]
  # gelu_tanh vs elu: elu's evaluation run is absent. relu within 0.02 of gelu_tanh at a = 1:
  # relu lies 0.005 above on the evaluation seeds, and either sample moved by the margin lies
  # wholly past the other: each one-sided p is 1 / C(10, 5), the hypothesis' p twice that, Holm
  # 4 x 2 / 252 = 0.032: equivalent.
  assert primary[0]["seeds"] == "pending: evaluation seeds not trained"
  assert primary[2]["comparison"]["shift"] == pytest.approx(-0.005)
  assert primary[2]["equivalence"]["p_equivalent"] == pytest.approx(1 / 252)
  assert primary[2]["holm"] == pytest.approx(4 * 2 / 252)
  assert primary[2]["verdict"] == "equivalent"
  # The noise table shows the evaluation classifiers where evaluated, else the selection ones.
  table = (out / "table.md").read_text()
  assert "| gelu_tanh_eval | 0.001 | 100–104 | 0/5 |" in table
  assert "| elu | 0.001 | 0–4 | 0/5 |" in table


def test_candidate_lrs_are_pending_until_their_evaluation_seeds_are_trained(tmp_path):
  """3 selection seeds cannot tell lr 1e-4 from the selected 1e-3 (rank-sum p = 0.1): it is a
  candidate of every run, each hypothesis is tested at both lrs of both runs, pending (with the
  command that trains them) until the candidate's evaluation runs are there; the earlier
  design's verdict (the selected lrs alone) stays beside."""
  root = tmp_path
  out = tmp_path / "results" / "fashion_mnist" / "mnist"
  three = [0, 1, 2]
  write_selection(out, "gelu_tanh", "gelu_tanh", [[0.01] * 3, [1] * 3], seeds=three)
  write_selection(out, "relu", "relu", [[0.04] * 3, [1] * 3], seeds=three)
  ten = list(range(100, 110))
  gelu, relu = [0.010 + 0.001 * i for i in range(10)], [0.020 + 0.001 * i for i in range(10)]
  write_evaluation(out, "gelu_tanh", "gelu_tanh", gelu, seeds=ten)
  write_evaluation(out, "relu", "relu", relu, seeds=ten)
  pipeline.render("mnist", out=out, root=root)
  summary = json.loads((out / "summary.json").read_text())
  assert [c["lrs"] for c in summary["candidates"]] == [
    [{"learning_rate": 1e-3, "p": None, "candidate": True},
     {"learning_rate": 1e-4, "p": pytest.approx(0.1), "candidate": True}],
  ] * 2  # fmt: skip
  first = summary["verdicts"]["primary"][0]
  assert first["verdict"] == "pending"
  assert [o["learning_rates"] for o in first["outcomes"]] == [
    [1e-3, 1e-3], [1e-3, 1e-4], [1e-4, 1e-3], [1e-4, 1e-4]
  ]  # fmt: skip
  # The family: 4 pairs of this hypothesis, 3 hypotheses without runs: Holm over 7.
  p = scipy.stats.mannwhitneyu(gelu, relu, method="exact").pvalue
  assert first["outcomes"][0]["holm"] == pytest.approx(7 * p)
  assert first["outcomes"][0]["verdict"] == "confirmed"
  assert summary["untrained"]["gelu_tanh below relu: final train log loss (nats), dropout 0"] == [
    {"run": "gelu_tanh", "learning_rate": 1e-4, "workdir": "gelu_tanh_eval_lr0.0001"},
    {"run": "relu", "learning_rate": 1e-4, "workdir": "relu_eval_lr0.0001"},
  ]
  readme_text = (out / "README.md").read_text()
  assert (
    "- Hypothesis [Fig. 2, primary 1]: gelu_tanh below relu: final train log loss (nats), "
    "dropout 0: pending: candidate lrs 0.0001 of gelu_tanh, 0.0001 of relu need evaluation "
    "seeds 100–109 (gelu_tanh_eval_lr0.0001, relu_eval_lr0.0001; `python "
    "experiments/reproduce.py --task=mnist --dataset=fashion_mnist --epochs=3 "
    "--activations=gelu_tanh,relu --seeds=3 --learning_rates=0.001,0.0001 --dropout_rates=0` "
    "trains them); "
    "tested at 4 pairs of candidate lrs (gelu_tanh 0.001, 0.0001 × relu 0.001, 0.0001), each a "
    "Candidate line; caveats: " in readme_text
  )
  # The earlier design: the selected lrs alone, Holm over the family's 4 hypotheses.
  (earlier,) = [
    v for v in summary["earlier_design_verdicts"]["primary"] if v["claim"] == first["claim"]
  ]
  assert (earlier["verdict"], earlier["holm"]) == ("confirmed", pytest.approx(4 * p))
  assert "## Earlier design: primary hypotheses at the selected lrs alone" in readme_text
  assert "- Earlier design [Fig. 2, primary 1]: gelu_tanh below relu" in readme_text
  assert "## Design change of 2026-11-26: learning-rate candidates" in readme_text
  # The candidates' evaluation runs trained: every pair judged, gelu_tanh below relu at each.
  for name, finals in (("gelu_tanh", 0.015), ("relu", 0.03)):
    write_evaluation(out, name, name, [finals + 0.001 * i for i in range(10)], lr=1e-4,
                     seeds=ten, workdir_name=f"{name}_eval_lr0.0001")  # fmt: skip
  pipeline.render("mnist", out=out, root=root)
  summary = json.loads((out / "summary.json").read_text())
  first = summary["verdicts"]["primary"][0]
  assert [o["verdict"] for o in first["outcomes"]] == ["confirmed"] * 4
  assert first["verdict"] == "confirmed" and summary["untrained"] == {}
  assert first["outcomes"][1]["seeds"] == "evaluation seeds 100–109 at lrs 0.001 vs 0.0001"
  # Every pair is also compared seed by seed, on the 10 seeds both runs trained.
  paired = first["outcomes"][0]["paired"]
  assert paired["seeds"] == ten and paired["p"] == pytest.approx(2 / 1024)
  assert "| gelu_tanh_eval_lr0.0001 | 0.0001 | 100–109 | 0/10 |" in (out / "table.md").read_text()
