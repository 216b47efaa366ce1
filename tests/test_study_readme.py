"""Tests for gelujax.study.readme: the commands, settings, deviations and README of a result."""

import dataclasses
import json
import shlex

from gelujax import host, tasks
from gelujax import workdir as workdirs
from gelujax.paper import DEFAULT_ACTIVATIONS
from gelujax.study import readme


def test_deviations_compare_the_runs_spec_with_the_paper_spec():
  paper = tasks.get("mnist")
  ours = workdirs.jsonable(
    dataclasses.asdict(paper.replace(dataset="fashion_mnist", epochs=2, batch_size=64))
  )
  del ours["dropout_bits"]  # config.json leaves it out at its default.
  deviations = readme.list_deviations(
    "mnist",
    paper,
    ours,
    seeds=[0, 1],
    learning_rates=[1e-3],
    activations=["gelu", "relu", "elu"],
    dropout_rates=[0.0],
    noise=False,
  )
  assert deviations == [
    "Dataset: fashion_mnist instead of the paper's mnist.",
    "batch_size: 64 instead of the paper's 128.",
    "epochs: 2 instead of the paper's 50.",
    "(choice) Evaluations per epoch: 1 instead of the 3 of the authors' script (the paper "
    "states none); best-epoch values are picked among these evaluations.",
    "Runs per setting: 2 (seeds [0, 1]) instead of 5.",
    "Learning rates: [0.001] instead of the paper's [0.001, 0.0001, 1e-05].",
    "Dropout rates: [0.0] instead of [0.0, 0.5].",
    "Activations of the paper not run: gelu_tanh.",
    "Activations added that the paper reports no numbers for: gelu (the paper's GELU is "
    "`gelu_tanh`; `gelu` is the exact erf form).",
  ]
  same = readme.list_deviations(
    "mnist",
    paper,
    workdirs.jsonable(dataclasses.asdict(paper.replace(evals_per_epoch=3))),
    seeds=range(5),
    learning_rates=paper.learning_rates,
    activations=["gelu_tanh", "relu", "elu"],
    dropout_rates=[0.0, 0.5],
    noise=False,
  )
  assert same == ["evals_per_epoch: 3 instead of the paper's 1."]


def test_reproduce_command_leaves_defaults_out(tmp_path):
  paper = tasks.get("mnist")
  settings = {
    "task": "mnist",
    "dataset": "fashion_mnist",
    "epochs": 50,
    "activations": list(DEFAULT_ACTIVATIONS),
    "seeds": [0, 1, 2, 3, 4],
    "evaluation_seeds": list(range(100, 110)),
    "learning_rates": [1e-3, 1e-4, 1e-5],
    "dropout_rates": [0.0, 0.5],
    "spec": {"data_options": {}},
  }
  out = tmp_path / "results" / "fashion_mnist" / "mnist"
  command = readme.reproduce_command(settings, paper, out=out, root=tmp_path)
  assert command == "python experiments/reproduce.py --task=mnist --dataset=fashion_mnist"
  settings |= {"epochs": 2, "activations": ["relu"], "seeds": [7], "learning_rates": [1e-3]}
  settings |= {"evaluation_seeds": [8, 9]}
  command = readme.reproduce_command(settings, paper, out=tmp_path / "elsewhere", root=tmp_path)
  assert command == (
    "python experiments/reproduce.py --task=mnist --dataset=fashion_mnist --epochs=2 "
    "--activations=relu --seeds=7, --evaluation_seeds=8,9, --learning_rates=0.001 "
    "--out=elsewhere"
  )
  assert readme.render_command(command) == (
    "python experiments/reproduce.py --task=mnist --dataset=fashion_mnist --out=elsewhere --render"
  )
  # A name with arguments is quoted for the shell, as the command it came from quotes it.
  quoted = "python experiments/reproduce.py '--task=mnist(dropout=0.1)' --dataset=mnist"
  assert readme.render_command(quoted) == (
    "python experiments/reproduce.py '--task=mnist(dropout=0.1)' --dataset=mnist --render"
  )
  settings |= {"task": "mnist_noise", "dropout_rates": [0.0], "seeds": [0, 1, 2]}
  settings |= {"evaluation_seeds": []}  # None trained yet: the default is left out.
  command = readme.reproduce_command(settings, paper, out=out, root=tmp_path)
  assert "--seeds=3 " in command and "--evaluation_seeds" not in command


def test_reproduce_command_names_spec_overrides_no_flag_sets(tmp_path):
  # Twitter POS with trainable embeddings: the runs' spec differs from the paper's in two fields
  # that only the task's name can set; the command must train that spec again.
  from gelujax.cli import _flags

  paper = tasks.get("twitter_pos")
  ours = paper.replace(model="embedding_mlp_twitter_pos", preprocessing=())
  settings = {
    "task": "twitter_pos",
    "dataset": "twitter_pos",
    "epochs": 30,
    "activations": list(DEFAULT_ACTIVATIONS),
    "seeds": [0, 1, 2, 3, 4],
    "evaluation_seeds": list(range(100, 110)),
    "learning_rates": [1e-3, 1e-4, 1e-5],
    "dropout_rates": [0.2],
    "spec": workdirs.jsonable(dataclasses.asdict(ours)),
  }
  out = tmp_path / "results" / "twitter_pos" / "twitter_pos"
  command = readme.reproduce_command(settings, paper, out=out, root=tmp_path)
  assert command == (
    "python experiments/reproduce.py "
    "'--task=twitter_pos(model=\"embedding_mlp_twitter_pos\", preprocessing=())'"
  )
  task = shlex.split(command)[2].removeprefix("--task=")
  assert _flags.make_spec(task)[1] == ours


def test_readme_records_what_ran(tmp_path):
  # relu's entry is in the format written before machines were recorded: bare seconds.
  timings = {"gelu": {"seconds": 65.4, "machines": ["box A", "box B"]}, "relu": 12.0}
  timings |= {"elu": {"seconds": 3.0, "machines": ["box A", "box B"]}}
  (tmp_path / "timings.json").write_text(json.dumps(timings))
  readme.write_readme(
    tmp_path,
    title="GELU paper reproduction: mnist on fashion_mnist",
    opening=["## Primary hypotheses", "", "| # |", ""],
    method=["## How the verdicts are reached", "", "By rank tests.", ""],
    command="python experiments/reproduce.py --task=mnist --dataset=fashion_mnist --epochs=3",
    settings=["Seeds: 0, 1"],
    trained=False,
    deviations=[],
    files=["table.md: the table below"],
    sections={"Verdicts": ["- Hypothesis [Fig. 2, primary 1]: x: pending: y."]},
    table="# mnist: table\n\n| run |\n|---|\n",
  )
  lines = (tmp_path / "README.md").read_text().splitlines()
  # What was found first: the hypotheses, the tables (table.md's headings one level down), the
  # findings; then the method, the commands, what ran, the deviations and the files.
  assert lines[:10] == [
    "# GELU paper reproduction: mnist on fashion_mnist",
    "",
    "## Primary hypotheses",
    "",
    "| # |",
    "",
    "## Tables",
    "",
    "## mnist: table",
    "",
  ]
  headings = [line for line in lines if line.startswith("## ")]
  assert headings == [
    "## Primary hypotheses", "## Tables", "## mnist: table", "## Findings",
    "## How the verdicts are reached", "## Reproduce", "## Deviations from the paper's protocol",
    "## Files",
  ]  # fmt: skip
  assert "python experiments/reproduce.py --task=mnist --dataset=fashion_mnist --epochs=3" in lines
  # The render command keeps what finds the result (task, dataset), not what trains it.
  assert "python experiments/reproduce.py --task=mnist --dataset=fashion_mnist --render" in lines
  assert "- Seeds: 0, 1" in lines
  written = next(line for line in lines if line.startswith("- Written "))
  assert written.endswith(f"rendered without training, on {host.describe_machine()}.")
  assert (
    "- Training time per run (summed over the invocations that trained it): gelu 65 s, "
    "relu 12 s, elu 3 s." in lines
  )
  trained_on = lines.index("- Trained on:")
  assert lines[trained_on + 1 : trained_on + 3] == [
    "  - gelu, elu: box A | then | box B",
    "  - relu: not recorded (trained before machines were recorded)",
  ]
  assert lines[lines.index("## Deviations from the paper's protocol") + 2] == "- None."
  verdicts = lines.index("### Verdicts")
  assert lines[verdicts + 2] == "- Hypothesis [Fig. 2, primary 1]: x: pending: y."
  assert lines[lines.index("## How the verdicts are reached") + 2] == "By rank tests."
  assert lines[-3:] == ["## Files", "", "- table.md: the table below"]
