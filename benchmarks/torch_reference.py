"""PyTorch references of the paper's MNIST classifier, for the training and agreement benchmarks.

`train_epoch_classic` is written like the classic reference scripts: a `DataLoader` over a
Python list of (image, label) pairs, GELU as an `nn.Module` using `erf`. `train_epoch_tuned`
indexes preloaded tensors directly with a shuffled permutation. Both train the same model as
gelujax's `MLP`: inputs -> features x [dense, activation, dropout] -> outputs, unit-norm
incoming weights and zero biases, Adam. `evaluate` gives a model's mean log loss and error.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn


class ErfGELU(nn.Module):
  """x * Phi(x) with erf, as the classic scripts define it."""

  def forward(self, x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


# gelujax activation names -> their PyTorch modules, written independently of gelujax.
ACTIVATIONS = {
  "gelu": ErfGELU,
  "gelu_tanh": lambda: nn.GELU(approximate="tanh"),
  "relu": nn.ReLU,
  "elu": nn.ELU,
  "silu": nn.SiLU,
}


def build_mlp(
  num_inputs: int,
  features: Sequence[int],
  num_outputs: int,
  dropout: float,
  activation: str = "gelu",
) -> nn.Module:
  """``num_inputs`` -> ``features`` x [Linear, activation, Dropout] -> ``num_outputs``."""
  layers, fan_in = [], num_inputs
  for width in features:
    layers += [nn.Linear(fan_in, width), ACTIVATIONS[activation](), nn.Dropout(dropout)]
    fan_in = width
  layers.append(nn.Linear(fan_in, num_outputs))
  model = nn.Sequential(*layers)
  with torch.no_grad():
    for m in model.modules():
      if isinstance(m, nn.Linear):
        w = torch.randn_like(m.weight)
        m.weight.copy_(w / w.norm(dim=1, keepdim=True))  # Unit-norm incoming weights.
        m.bias.zero_()
  return model


def make_model_and_optimizer(
  num_inputs: int,
  features: Sequence[int],
  num_outputs: int,
  dropout: float,
  *,
  seed: int = 0,
  lr: float = 1e-3,
  activation: str = "gelu",
) -> tuple[nn.Module, torch.optim.Optimizer]:
  """The model and its Adam optimizer (the paper's betas and epsilon)."""
  torch.manual_seed(seed)
  model = build_mlp(num_inputs, features, num_outputs, dropout, activation)
  return model, torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.999), eps=1e-8)


def make_classic_loader(
  images: np.ndarray, labels: np.ndarray, batch_size: int
) -> torch.utils.data.DataLoader:
  """A shuffling DataLoader over a Python list of (flat float image, int label) pairs.

  Built once, like a script's dataset; every epoch then collates each batch from the list.
  """
  pairs = [
    (torch.from_numpy(x.reshape(-1).astype(np.float32) / 255.0), int(y))
    for x, y in zip(images, labels, strict=True)
  ]
  return torch.utils.data.DataLoader(pairs, batch_size=batch_size, shuffle=True, drop_last=True)


def train_epoch_classic(model, optimizer, loader: torch.utils.data.DataLoader) -> float:
  """One epoch over a `make_classic_loader` loader; returns the last batch's loss."""
  model.train()
  for x, y in loader:
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
  return loss.item()


def train_epoch_tuned(
  model, optimizer, x_all: torch.Tensor, y_all: torch.Tensor, batch_size: int
) -> float:
  """One epoch indexing preloaded float tensors with a shuffled permutation."""
  model.train()
  perm = torch.randperm(x_all.shape[0])
  for i in range(x_all.shape[0] // batch_size):
    idx = perm[i * batch_size : (i + 1) * batch_size]
    optimizer.zero_grad(set_to_none=True)
    loss = nn.functional.cross_entropy(model(x_all[idx]), y_all[idx])
    loss.backward()
    optimizer.step()
  return loss.item()


@torch.no_grad()
def evaluate(model: nn.Module, x_all: torch.Tensor, y_all: torch.Tensor) -> tuple[float, float]:
  """Mean log loss (nats) and error rate of ``model`` with dropout off."""
  model.eval()
  logits = model(x_all)
  loss = nn.functional.cross_entropy(logits, y_all)
  error = (logits.argmax(dim=1) != y_all).double().mean()
  return float(loss), float(error)
