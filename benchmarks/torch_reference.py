"""PyTorch baselines for the training benchmark: the paper's MNIST classifier in two styles.

`train_epoch_classic` is written like the classic reference scripts: a `DataLoader` over a
Python list of (image, label) pairs, GELU as an `nn.Module` using `erf`. `train_epoch_tuned`
indexes preloaded tensors directly with a shuffled permutation. Both train the same model:
784 -> 8 x [128, GELU, dropout] -> 10, unit-norm initialisation, Adam, batch 128.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn


class ErfGELU(nn.Module):
  """x * Phi(x) with erf, as the classic scripts define it."""

  def forward(self, x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def build_mlp(width: int = 128, depth: int = 8, dropout: float = 0.5) -> nn.Module:
  layers, fan_in = [], 784
  for _ in range(depth):
    layers += [nn.Linear(fan_in, width), ErfGELU(), nn.Dropout(dropout)]
    fan_in = width
  layers.append(nn.Linear(fan_in, 10))
  model = nn.Sequential(*layers)
  with torch.no_grad():
    for m in model.modules():
      if isinstance(m, nn.Linear):
        w = torch.randn_like(m.weight)
        m.weight.copy_(w / w.norm(dim=1, keepdim=True))  # Unit-norm incoming weights.
        m.bias.zero_()
  return model


def train_epoch_classic(model, optimizer, images: np.ndarray, labels: np.ndarray, batch=128):
  """One epoch through a DataLoader over a Python list, like the classic reference scripts."""
  pairs = [
    (torch.from_numpy(x.reshape(-1).astype(np.float32) / 255.0), int(y))
    for x, y in zip(images, labels, strict=True)
  ]
  loader = torch.utils.data.DataLoader(pairs, batch_size=batch, shuffle=True, drop_last=True)
  model.train()
  for x, y in loader:
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
  return float(loss)


def train_epoch_tuned(model, optimizer, x_all: torch.Tensor, y_all: torch.Tensor, batch=128):
  """One epoch indexing preloaded float tensors with a shuffled permutation."""
  model.train()
  perm = torch.randperm(x_all.shape[0])
  for i in range(x_all.shape[0] // batch):
    idx = perm[i * batch : (i + 1) * batch]
    optimizer.zero_grad(set_to_none=True)
    loss = nn.functional.cross_entropy(model(x_all[idx]), y_all[idx])
    loss.backward()
    optimizer.step()
  return float(loss)


def make_model_and_optimizer(seed: int = 0, lr: float = 1e-3, dropout: float = 0.5):
  torch.manual_seed(seed)
  model = build_mlp(dropout=dropout)
  return model, torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.999), eps=1e-8)
