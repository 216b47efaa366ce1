"""A study of the user's own: a design literal in the user's module, run by
``reproduce.py --task=module:VARIABLE`` through the one registry, its design recorded before
its runs and a changed design refused (`gelujax.study.registry.resolve`, `record_design`)."""

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gelujax.study import forms, registry
from tests.test_reproduce_cli import write_tiny_mnist

ROOT = Path(__file__).resolve().parents[1]
STUDY = """
import dataclasses

from gelujax.study import forms, pilot, transformer

MINE = dataclasses.replace(
  forms.DESIGN, name="mine", date="2026-11-29", task="tiny_mnist", dataset="mnist", epochs=1,
  arms=("gelu", "my_act:squareplus", "relu"), learning_rates=(1e-3,), seeds=(0, 1, 2),
  dtypes=("float32",), swaps=False,
)
NOT_A_DESIGN = 3
THEIRS = dataclasses.replace(MINE, name="gelu_forms")
MY_PILOT = dataclasses.replace(pilot.VIT, name="my_pilot", date="2026-11-29")
MY_VIT = dataclasses.replace(
  transformer.VIT, name="my_vit", date="2026-11-29", arms=("gelu", "my_act:squareplus", "relu"),
)
"""
ACTIVATION = """
import jax.numpy as jnp


def squareplus(x):
  return (x + jnp.sqrt(x * x + 4.0)) / 2.0
"""


@pytest.fixture
def user_module(tmp_path, monkeypatch):
  folder = tmp_path / "mine"
  folder.mkdir()
  (folder / "my_studies.py").write_text(textwrap.dedent(STUDY))
  (folder / "my_act.py").write_text(ACTIVATION)
  monkeypatch.syspath_prepend(str(folder))
  monkeypatch.delitem(sys.modules, "my_studies", raising=False)
  monkeypatch.setattr(registry, "_USERS", {})
  return folder


def test_a_users_design_resolves_to_its_kind_and_names_its_file_and_source(user_module):
  study = registry.resolve("my_studies:MINE")
  assert study.kind is registry.FORMS and study.where == "my_studies:MINE"
  source = (user_module / "my_studies.py").read_bytes()
  assert study.source["sha256"] == hashlib.sha256(source).hexdigest()
  assert registry.variable(study.design) == "MINE"
  assert registry.fixed_in(study.design) == (
    f"`{user_module / 'my_studies.py'}` (`MINE`, 2026-11-29; its source's sha256 "
    f"{hashlib.sha256(source).hexdigest()})"
  )
  # gelujax's own are unchanged: their file and variable, as the committed READMEs have them.
  assert registry.fixed_in(forms.DESIGN) == "`gelujax/study/forms.py` (`DESIGN`, 2026-11-26)"
  assert registry.resolve("gelu_forms").design is forms.DESIGN


def test_a_users_forms_study_is_framed_by_its_own_design_not_gelujaxs_question(
  user_module, monkeypatch
):
  import dataclasses

  from gelujax.study import forms_report

  design = registry.resolve("my_studies:MINE").design
  assert forms_report.title(design) == (
    "`mine`: gelu, my_act:squareplus trained on mnist (relu as the control; 3 paired seeds, "
    "lrs 0.001, float32, 1 epochs)"
  )
  assert forms_report.lead(design) == (
    "A pre-registered study of your own (`my_studies:MINE`): do gelu, my_act:squareplus train "
    "to networks that differ beyond the margins below? relu is the positive control, compared "
    "with gelu: a design that cannot tell them apart cannot call the others equivalent."
  )
  # Without its control among its arms it claims none.
  bare = dataclasses.replace(design, arms=("gelu", "my_act:squareplus"))
  source = registry._USERS["mine"].source
  monkeypatch.setitem(registry._USERS, "mine", registry.Study(bare, registry.FORMS, source))
  assert forms_report.title(bare) == (
    "`mine`: gelu, my_act:squareplus trained on mnist (3 paired seeds, lrs 0.001, float32, "
    "1 epochs)"
  )
  assert forms_report.lead(bare).endswith("differ beyond the margins below?")
  (task,) = [line for line in forms_report.design_lines(design) if line.startswith("- Task")]
  # (its epochs' reason is the user's: here inherited from gelujax's design by replace)
  assert task.startswith(
    "- Task: `--task=tiny_mnist` (its model, batch size and optimizer) on mnist, dropout 0, "
    f"1 epochs: {forms.DESIGN.epochs_reason}"
  )
  # gelujax's own study keeps its question.
  assert forms_report.title(forms.DESIGN).startswith("Which GELU? The forms trained and swapped")
  assert forms_report.lead(forms.DESIGN).startswith("Do the GELU forms train differently")


def test_a_users_transformer_study_and_pilot_are_framed_as_the_users(user_module):
  from types import SimpleNamespace

  from gelujax.study import pilot, pilot_report, transformer, transformer_report

  vit = registry.resolve("my_studies:MY_VIT").design
  assert transformer_report.lead(vit) == (
    "A pre-registered study of your own (`my_studies:MY_VIT`) of the feed-forward activations "
    "gelu, my_act:squareplus, relu in `vit_fashion_mnist`: do the pairs it ranks differ, and do "
    "the pairs it holds within margins train to networks as good? Its hypotheses fixed in code "
    "before its runs, each arm's lr, the margins and the seeds taken from its pilot "
    "`vit_fashion_mnist_pilot` by a stated rule."
  )
  pending = SimpleNamespace(missing=("gelu",))
  assert transformer_report.headline_summary(vit, pending, {}) == (
    "a transformer study of your own on vit_fashion_mnist (`my_vit`): pending (gelu not trained)."
  )
  mine = registry.resolve("my_studies:MY_PILOT").design
  assert pilot_report.headline_summary(mine, pending).startswith(
    "your own pilot of a feed-forward activation study on vit_fashion_mnist (`my_pilot`): "
  )
  # gelujax's own keep their words.
  assert transformer_report.lead(transformer.VIT).startswith("Which feed-forward activation")
  assert transformer_report.headline_summary(transformer.VIT, pending, {}).startswith(
    "gelujax's transformer study on vit_fashion_mnist"
  )
  assert pilot_report.headline_summary(pilot.VIT, pending).startswith("gelujax's pilot of")


@pytest.mark.parametrize(
  ("name", "words"),
  [
    ("no_such_module:MINE", "module 'no_such_module' does not import (ModuleNotFoundError"),
    ("my_studies:MISSING", "my_studies.MISSING is nothing, not a study's design"),
    ("my_studies:NOT_A_DESIGN", "my_studies.NOT_A_DESIGN is a int, not a study's design"),
    ("my_studies:THEIRS", "its design is named 'gelu_forms', the name of gelujax's own study"),
    ("not_a_study", "No study is named 'not_a_study'"),
  ],
)
def test_what_is_not_a_users_study_is_refused_in_one_paragraph(user_module, name, words):
  with pytest.raises(ValueError, match=None) as found:
    registry.resolve(name)
  message = str(found.value)
  assert words in message and "\n" not in message


def test_the_design_is_recorded_before_its_runs_and_a_changed_one_refused(user_module, tmp_path):
  import dataclasses

  design = registry.resolve("my_studies:MINE").design
  out = tmp_path / "out"
  registry.record_design(design, out)
  kept = json.loads((out / registry.DESIGN_FILE).read_text())
  assert kept["sha256"] == hashlib.sha256(repr(design).encode()).hexdigest()
  assert kept["source"]["function"] == "MINE"
  registry.record_design(design, out)  # the same design: accepted
  before = (out / registry.DESIGN_FILE).read_bytes()
  changed = dataclasses.replace(design, seeds=(0, 1, 2, 3))
  with pytest.raises(ValueError, match=r"holds runs of the design 'mine' with sha256 .* is now"):
    registry.record_design(changed, out)
  assert (out / registry.DESIGN_FILE).read_bytes() == before


@pytest.mark.e2e
def test_reproduce_runs_a_users_study_from_its_folder(tmp_path):
  """``reproduce.py --task=my_studies:MINE`` from the user's folder, one arm the user's own
  activation: the design recorded, its runs trained, a README that names the user's file and
  its sha256 and derives the verdicts; then the module edited: training it again is refused in
  one line, the result untouched."""
  folder = tmp_path / "mine"
  folder.mkdir()
  (folder / "my_studies.py").write_text(textwrap.dedent(STUDY))
  (folder / "my_act.py").write_text(ACTIVATION)
  data = tmp_path / "data"
  data.mkdir()
  write_tiny_mnist(data, n_train=5_064, n_test=100)
  out = tmp_path / "out"
  command = [
    sys.executable, str(ROOT / "experiments" / "reproduce.py"), "--task=my_studies:MINE",
    f"--out={out}", f"--data_dir={data}", "--compilation_cache=none",
  ]  # fmt: skip
  env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
  done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True)
  assert done.returncode == 0, done.stderr[-3000:]
  source = hashlib.sha256((folder / "my_studies.py").read_bytes()).hexdigest()
  readme = (out / "README.md").read_text()
  assert f"(`MINE`, 2026-11-29; its source's sha256 {source})" in readme
  # Its own question and title, not gelujax's forms study's.
  assert readme.startswith("# `mine`: gelu, my_act:squareplus trained on mnist (relu as the")
  assert "A pre-registered study of your own (`my_studies:MINE`)" in readme
  assert "Which GELU" not in readme and "GELU forms" not in readme
  assert (
    "gelujax's own study" not in json.loads((out / "summary.json").read_text())["headline_summary"]
  )
  assert json.loads((out / registry.DESIGN_FILE).read_text())["source"]["sha256"] == source
  # What it does not say is its own design's: its data and model, not gelujax's forms study's
  # (the margins' reasons are the user's: here inherited from gelujax's design by replace).
  (limits,) = [line for line in readme.splitlines() if line.startswith("What this does not say")]
  assert "one data set (`mnist`), one architecture (`tiny_mnist`'s model)" in limits
  assert "Fashion-MNIST" not in limits and "the paper's 50" not in limits
  summary = json.loads((out / "summary.json").read_text())
  assert summary["study"] == "mine" and summary["missing"] == []
  # my_act:squareplus − gelu and relu − gelu, on 3 metrics
  pairs = {(o["comparison"]["first"], o["comparison"]["second"]) for o in summary["outcomes"]}
  assert len(summary["outcomes"]) == 2 * 3
  assert pairs == {("my_act:squareplus", "gelu"), ("relu", "gelu")}
  assert sorted(p.name for p in (out / "runs").iterdir()) == [
    "gelu_float32", "my_act:squareplus_float32", "relu_float32"
  ]  # fmt: skip
  (folder / "my_studies.py").write_text(
    textwrap.dedent(STUDY).replace("seeds=(0, 1, 2)", "seeds=(0, 1, 2, 3)")
  )
  again = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True)
  assert again.returncode != 0
  assert "holds runs of the design 'mine'" in again.stderr
  assert (out / "README.md").read_text() == readme
