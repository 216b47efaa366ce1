"""Tests for gelujax/cli/_flags.py, the flag handling shared by the commands train and reproduce."""

from pathlib import Path

import pytest

from gelujax import tasks
from gelujax import workdir as workdirs
from gelujax.cli import _flags


@pytest.mark.parametrize(
  ("values", "expected"),
  [(None, [0, 1, 2]), (["2"], [0, 1]), (["4", "7"], [4, 7]), (["7", ""], [7])],
)
def test_parse_seeds(values, expected):
  assert _flags.parse_seeds(values, 3) == expected


def test_parse_evaluation_seeds_counts_from_their_start():
  assert _flags.parse_seeds(["3"], (7, 8), "evaluation_seeds", 100) == [100, 101, 102]
  assert _flags.parse_seeds(None, (7, 8), "evaluation_seeds", 100) == [7, 8]
  assert _flags.parse_seeds(["5", ""], (7, 8), "evaluation_seeds", 100) == [5]
  with pytest.raises(ValueError, match=r"^--evaluation_seeds 'x' is not a count"):
    _flags.parse_seeds(["x"], (), "evaluation_seeds", 100)


@pytest.mark.parametrize("values", [["x"], ["0"], ["1.5", "2"], [""], []])
def test_parse_seeds_rejects(values):
  with pytest.raises(ValueError, match="--seeds"):
    _flags.parse_seeds(values, 3)


def test_parse_floats():
  assert _flags.parse_floats("learning_rates", ["1e-3", "0.5"], (9.0,)) == [1e-3, 0.5]
  assert _flags.parse_floats("learning_rates", None, (9.0,)) == [9.0]


@pytest.mark.parametrize(
  ("parse", "message"),
  [
    (
      lambda: _flags.parse_floats("learning_rates", [], (9.0,)),
      "--learning_rates is given empty; give one or more numbers (e.g. 1e-3,1e-4), or leave "
      "--learning_rates out for its default.",
    ),
    (
      lambda: _flags.parse_seeds([], 3),
      "--seeds is given empty; give a count (e.g. 5) or a comma list of seeds (e.g. 0,1,2), or "
      "leave --seeds out for its default.",
    ),
    (
      lambda: _flags.parse_names("activations", [], ("gelu",)),
      "--activations is given empty; give one or more names (e.g. gelu,relu), or leave "
      "--activations out for its default.",
    ),
  ],
)
def test_a_list_flag_given_empty_is_refused_not_taken_for_its_default(parse, message):
  """``--learning_rates=`` (absl's empty list) trained the task's grid without a word."""
  with pytest.raises(ValueError) as error:
    parse()
  assert str(error.value) == message


@pytest.mark.parametrize(
  ("parse", "message"),
  [
    (
      lambda: _flags.parse_names("activations", ["gelu", "relu", "gelu"], ()),
      "--activations 'gelu,relu,gelu' repeats 'gelu'; give each value once.",
    ),
    (
      lambda: _flags.parse_floats("dropout_rates", ["0", "0.5", "0.0", "0.50"], ()),
      "--dropout_rates '0,0.5,0.0,0.50' repeats 0.0, 0.5; give each value once.",
    ),
    (
      lambda: _flags.parse_seeds(["9", "9", ""], (), "evaluation_seeds", 100),
      "--evaluation_seeds '9,9,' repeats 9; give each value once.",
    ),
  ],
)
def test_a_list_flag_that_repeats_a_value_is_refused(parse, message):
  """``--activations=gelu,gelu`` became one run without a word."""
  with pytest.raises(ValueError) as error:
    parse()
  assert str(error.value) == message


def test_parse_names():
  assert _flags.parse_names("activations", ["gelu", "relu"], ("elu",)) == ["gelu", "relu"]
  assert _flags.parse_names("activations", None, ("elu",)) == ["elu"]


def test_parse_floats_names_the_flag():
  with pytest.raises(ValueError, match=r"--dropout_rates '0.5,x' is not a list of numbers"):
    _flags.parse_floats("dropout_rates", ["0.5", "x"], ())


def test_make_spec_applies_set_flags_and_skips_unset_ones():
  _, spec = _flags.make_spec("mnist", activation="relu", epochs=None)
  assert (spec.activation, spec.epochs) == ("relu", 50)


@pytest.mark.parametrize(
  ("field", "flag", "value", "message"),
  [
    ("activation", "activations", "swish", "--activations 'swish' is not valid for task 'mnist'"),
    ("dataset", "dataset", "cifar10", "expected one of this task's datasets: mnist, fashion_mnist"),
    ("dropout", "dropout_rates", 1.0, "--dropout_rates 1.0 is not valid"),
    ("epochs", "epochs", 0, "--epochs 0 is not valid for task 'mnist': expected an integer"),
  ],
)
def test_check_runs_names_the_flag_of_a_bad_value(field, flag, value, message):
  good = {"activation": "gelu", "dataset": "mnist", "dropout": 0.0, "epochs": 1}[field]
  with pytest.raises(ValueError, match=r"^--") as info:
    _flags.check_runs(tasks.get("mnist"), {field: (flag, [good, value])})
  assert message in str(info.value) and "TaskSpec" not in str(info.value)
  _flags.check_runs(tasks.get("mnist"), {field: (flag, [good]), "seeds": ("seeds", [1, 2])})


def test_make_spec_applies_flags_over_the_task_and_its_name_overrides():
  paper, ours = _flags.make_spec("mnist(evals_per_epoch=3)", dataset="fashion_mnist", epochs=None)
  # The paper's spec is the task as registered: its name's overrides are ours, not the paper's.
  assert (paper.dataset, paper.evals_per_epoch, paper.epochs) == ("mnist", 1, 50)
  assert (ours.dataset, ours.evals_per_epoch, ours.epochs) == ("fashion_mnist", 3, 50)


def test_make_spec_embeddings_is_a_data_option_of_twitter_pos_only():
  _, ours = _flags.make_spec("twitter_pos", embeddings="/data/vectors.txt")
  assert ours.data_options["embeddings"] == "/data/vectors.txt"
  assert _flags.make_spec("twitter_pos", embeddings=None)[1] == tasks.get("twitter_pos")
  with pytest.raises(ValueError, match=r"^--embeddings /v is for --task twitter_pos only"):
    _flags.make_spec("mnist", embeddings="/v")


@pytest.mark.parametrize("task", [None, "no_such", "no_such(epochs=2)"])
def test_make_spec_names_an_unknown_task(task):
  with pytest.raises(ValueError, match=r"^--task .* is unknown\. Known tasks: .*mnist"):
    _flags.make_spec(task)


@pytest.mark.parametrize(
  ("task", "flag_values", "message"),
  [
    (
      "mnsit",
      {},
      "--task 'mnsit' is unknown. Did you mean mnist? Known tasks: char_lm, cifar10, cifar100, ",
    ),
    (
      "mnist(optimizer='adm')",
      {},
      "--task \"mnist(optimizer='adm')\" sets field 'optimizer' to 'adm': expected adam, "
      "adam_anneal, adamw_cosine, nesterov_cosine. Did you mean adam?",
    ),
    (
      "mnist(optimiser='adam')",
      {},
      "--task \"mnist(optimiser='adam')\": TaskSpec 'mnist' has no field 'optimiser'. Did you "
      "mean optimizer? The fields are name, ",
    ),
    (
      "mnist",
      {"activation": "quick_gelu"},
      "--activation 'quick_gelu' is not valid for task 'mnist': expected an activation name, "
      "possibly with arguments, among clipped_gelu, ",
    ),
    (
      "mnist",
      {"activation": "gelu(mu=1.0)"},
      "(e.g. my_pkg.acts:squareplus). Bad arguments in activation 'gelu(mu=1.0)': got an "
      "unexpected keyword argument",
    ),
    (
      "mnist",
      {"dataset": "fashion_mnst"},
      "--dataset 'fashion_mnst' is not valid for task 'mnist': expected one of this task's "
      "datasets: mnist, fashion_mnist. Did you mean fashion_mnist?",
    ),
  ],
)
def test_make_spec_errors_name_the_flag_and_what_was_meant(task, flag_values, message):
  with pytest.raises(ValueError) as info:
    _flags.make_spec(task, **flag_values)
  flag = next(iter(flag_values), "task")
  assert str(info.value).startswith(f"--{flag} ") and message in str(info.value)


@pytest.mark.parametrize(
  ("task", "flag_values", "set_elsewhere", "message"),
  [
    (
      "mnist(epochs=1, epochs=2)",
      {},
      {},
      "--task 'mnist(epochs=1, epochs=2)' cannot be parsed: keyword 'epochs' is given twice; "
      "give each once.",
    ),
    (
      "mnist(epochs=1, dropout=0.3)",
      {"epochs": 2, "dropout": 0.1, "dataset": "mnist"},
      {},
      "--task 'mnist(epochs=1, dropout=0.3)' sets epochs=1 and dropout=0.3, and --epochs 2 and "
      "--dropout 0.1 set them again; set each field once, in --task or by its flag.",
    ),
    (
      "mnist(seeds=3)",
      {"epochs": None},
      {"seeds": ("seeds", ["7", ""]), "learning_rates": ("learning_rates", None)},
      "--task 'mnist(seeds=3)' sets seeds=3, and --seeds '7,' sets it again; set each field "
      "once, in --task or by its flag.",
    ),
    (
      "twitter_pos(data_options={'embeddings': '/a.txt'})",
      {"embeddings": "/b.txt"},
      {},
      "--task \"twitter_pos(data_options={'embeddings': '/a.txt'})\" sets data_options "
      "embeddings='/a.txt', and --embeddings '/b.txt' sets it again; set each field once, in "
      "--task or by its flag.",
    ),
  ],
)
def test_make_spec_refuses_a_field_given_twice(task, flag_values, set_elsewhere, message):
  """``'tiny_mnist(epochs=1, epochs=2)'`` trained 2 epochs, and a flag silently won over the
  task's own override of its field."""
  with pytest.raises(ValueError) as error:
    _flags.make_spec(task, set_elsewhere, **flag_values)
  assert str(error.value) == message


def test_make_spec_takes_each_field_once_however_it_is_given():
  _, ours = _flags.make_spec(
    "mnist(epochs=3)", {"seeds": ("seeds", ["2"])}, dropout=0.1, epochs=None
  )
  assert (ours.epochs, ours.dropout, ours.seeds) == (3, 0.1, 5)  # seeds: the script's to apply


def test_make_spec_names_the_flag_of_a_bad_value():
  with pytest.raises(ValueError, match=r"^--batch_size 0 is not valid for task 'mnist'"):
    _flags.make_spec("mnist", batch_size=0)


def test_name_flags_turns_a_library_field_into_the_scripts_flag(tmp_path):
  """The library's message names `workdir`; the script shows its user --workdir."""
  path = tmp_path / "results.txt"
  path.write_text("x")
  with pytest.raises(workdirs.WorkdirError) as error:
    workdirs.check_writable(str(path))
  assert _flags.name_flags(str(error.value), ["task", "workdir"]) == (
    f"--workdir {path} is a file, not a folder; pass a new folder or this run's workdir."
  )


def test_name_flags_leaves_other_backticked_words_and_commands_alone():
  message = (
    "`evals_per_epoch` 9 does not fit; leave `data_dir` out, or run "
    "`python -m gelujax.data download mnist --data_dir DIR` first; or fewer `seeds`."
  )
  assert _flags.name_flags(message, ["data_dir", "seeds", "workdir"]) == (
    "`evals_per_epoch` 9 does not fit; leave --data_dir out, or run "
    "`python -m gelujax.data download mnist --data_dir DIR` first; or fewer --seeds."
  )


def test_only_the_root_of_the_checkout_the_code_runs_from_is_the_projects_folder(
  tmp_path, monkeypatch
):
  """A command's results go under the folder it runs in; they are the project's record (its
  results/ and README overview) only where that folder is this checkout's root (DESIGN.md
  decision 17)."""
  checkout = Path(__file__).resolve().parent.parent
  monkeypatch.chdir(checkout)
  assert _flags.working_folder() == (checkout, True)
  for elsewhere in (tmp_path, checkout / "results", checkout / "experiments"):
    monkeypatch.chdir(elsewhere)
    assert _flags.working_folder() == (elsewhere.resolve(), False)
