"""gelujax.paper: one record per paper task, and the defaults reproduce.py trains, by hand."""

import pytest

from gelujax import paper, tasks


def test_one_record_per_task_in_the_papers_order():
  assert paper.PAPER_TASKS == (
    "mnist", "mnist_noise", "mnist_ae", "twitter_pos", "timit", "cifar10", "cifar100"
  )  # fmt: skip
  for name, record in paper.PAPER.items():
    assert record.name == name
    assert all(h.task == name for h in record.hypotheses)
  assert [paper.figure(t) for t in ("mnist", "mnist_noise", "twitter_pos", "cifar100")] == [
    "Fig. 2", "Fig. 3", "§3.3", "§3.5",
  ]  # fmt: skip
  assert paper.figure("tiny_mnist_noise") == "tiny_mnist_noise"
  assert paper.hypotheses("tiny_mnist") == ()
  assert paper.PAPER["cifar10"].retrain and not paper.PAPER["cifar100"].retrain


@pytest.mark.parametrize(
  ("task", "seeds", "dropout_rates", "evaluation_seeds"),
  [
    ("mnist", None, (0.0, 0.5), tuple(range(100, 110))),
    ("mnist_noise", None, (0.0,), tuple(range(100, 110))),
    ("mnist_ae", None, (0.0,), (3, 4, 5)),
    ("twitter_pos", 3, (0.2,), tuple(range(100, 110))),
    ("timit", 3, (0.5,), (100, 101, 102)),
    ("cifar100", None, (0.3,), ()),
    ("tiny_mnist", None, (0.0,), (100, 101)),
  ],
)
def test_defaults_by_hand(task, seeds, dropout_rates, evaluation_seeds):
  spec = tasks.get(task.removesuffix(paper.NOISE_SUFFIX))
  found = paper.defaults(task, spec, seeds)
  assert found.activations == ("gelu", "gelu_tanh", "relu", "elu", "silu")
  assert found.seeds == tuple(range(spec.seeds))
  assert found.learning_rates == tuple(spec.learning_rates) and found.epochs == spec.epochs
  assert found.dropout_rates == dropout_rates
  assert found.evaluation_seeds == evaluation_seeds
