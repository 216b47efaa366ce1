"""Fast tasks for the trainer's tests: ``tiny_mnist`` (an MLP) and ``tiny_cifar`` (a WRN with
batch norm, dropout, crops, noise and an L2 penalty)."""

from __future__ import annotations

from gelujax.tasks.paper import MNIST_LIKE
from gelujax.tasks.registry import register
from gelujax.tasks.spec import TaskSpec


@register
def tiny_mnist_task() -> TaskSpec:
  """A fast task for trainer tests: a 784 -> 2x16 -> 10 MLP on MNIST-like data for 2 epochs."""
  return TaskSpec(
    name="tiny_mnist",
    dataset="mnist",
    datasets=MNIST_LIKE,
    model="mlp_tiny",
    learning_rates=(1e-3,),
    seeds=2,
    batch_size=32,
    epochs=2,
  )


@register
def tiny_cifar_task() -> TaskSpec:
  """A fast task for trainer tests with batch norm, dropout, crops, noise and an L2 penalty.

  A depth-10 width-1 WRN with 10 outputs on CIFAR-10-like uint8 images (no host-side
  preprocessing), Nesterov-cosine SGD, 2 epochs.
  """
  return TaskSpec(
    name="tiny_cifar",
    dataset="cifar10",
    datasets=("cifar10",),
    model="wrn_tiny",
    dropout=0.1,
    learning_rates=(0.05,),
    seeds=2,
    batch_size=16,
    epochs=2,
    optimizer="nesterov_cosine",
    weight_decay=5e-4,
    input_noise=0.05,
    crop_padding=2,
  )
