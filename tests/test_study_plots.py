"""Tests for gelujax.study.plots: figures from workdir files, inspected before and after saving."""

import re

import numpy as np
import pytest
from matplotlib.collections import LineCollection, PolyCollection

from gelujax.study import plots, runs
from tests.fake_workdirs import constant, member, write_workdir

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def write_run(path, activation, dropout, scale, diverged_seed=None):
  members = [
    member(
      seed,
      lr,
      diverged_epoch=2 if (seed == diverged_seed and lr == 1e-3) else None,
      train_loss=[scale * (seed + 1) / e for e in (1, 2, 3)],
      validation_loss=[2 * scale * (seed + 1) / e for e in (1, 2, 3)],
      validation_error=constant(0.1),
      test_loss=constant(0.3),
      test_error=constant(0.1),
    )
    for lr in (1e-3, 1e-4)
    for seed in range(3)
  ]
  return runs.load_run(
    write_workdir(
      path / runs.run_name(activation, dropout or None),
      members,
      activation=activation,
      dropout=dropout,
    )
  )


@pytest.fixture
def workdirs(tmp_path):
  return {
    (activation, dropout): write_run(tmp_path, activation, dropout, scale, diverged)
    for activation, scale, diverged in (("gelu", 1.0, None), ("relu", 2.0, 0), ("elu", 3.0, None))
    for dropout in (0.0, 0.5)
  }


def bands(ax):
  return [c for c in ax.collections if isinstance(c, PolyCollection)]


def test_loss_curves_figure(workdirs, tmp_path):
  panels = {
    f"dropout {dropout:g}": {
      activation: plots.run_curves(
        workdirs[activation, dropout], 1e-3, ("train_loss", "validation_loss")
      )
      for activation in ("gelu", "relu", "elu")
    }
    for dropout in (0.0, 0.5)
  }
  fig = plots.plot_curves(panels, ylabel="log loss (nats)", title="MNIST")
  assert len(fig.axes) == 2
  for ax, panel in zip(fig.axes, panels, strict=True):
    # 3 activations x (train, validation): one median line and one min-max band each.
    assert len(ax.lines) == 6
    assert len(bands(ax)) == 6
    assert ax.get_yscale() == "log"
    assert ax.get_xlabel() == "epoch"
    assert ax.get_ylabel() == "log loss (nats)"
    assert ax.get_title() == panel
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend[:3] == ["gelu", "relu", "elu"]
    assert legend[3:] == ["train (median, min–max band)", "validation (median, min–max band)"]
  # gelu's train line is the median over seeds of (seed + 1) / epoch: 2 / epoch.
  gelu_train = fig.axes[0].lines[0]
  np.testing.assert_allclose(gelu_train.get_xdata(), [1, 2, 3])
  np.testing.assert_allclose(gelu_train.get_ydata(), [2.0, 1.0, 2 / 3])
  # relu (scale 2) loses seed 0 at lr 1e-3: median over seeds 1, 2 of 2 (seed + 1) / epoch.
  np.testing.assert_allclose(fig.axes[0].lines[2].get_ydata(), [5.0, 2.5, 5 / 3])
  # Log-axis ticks read as plain numbers (0.5, 2), never 5e-01 or 2 x 10^0.
  fig.canvas.draw()
  ax = fig.axes[0]
  labels = [t.get_text() for t in ax.get_yticklabels() + ax.get_yticklabels(minor=True)]
  labels = [label for label in labels if label]
  assert labels
  assert all(re.fullmatch(r"\d+(\.\d+)?", label) for label in labels), labels
  # Epoch ticks are whole epochs (a 3-epoch axis would otherwise tick every half epoch).
  ticks = ax.get_xticks()
  np.testing.assert_array_equal(ticks, np.round(ticks))
  path = plots.save_figure(fig, tmp_path / "figures" / "mnist.png")
  assert path.read_bytes()[:8] == PNG_MAGIC
  assert path.stat().st_size > 10_000


def test_all_diverged_series_is_not_drawn(workdirs):
  panels = {
    "lr 1e-3": {
      "gelu": plots.run_curves(workdirs["gelu", 0.0], 1e-3, ("train_loss",)),
      "relu": {"train": None},
    }
  }
  fig = plots.plot_curves(panels, ylabel="MSE", title="t", logy=False)
  ax = fig.axes[0]
  assert len(ax.lines) == 1
  assert ax.get_yscale() == "linear"
  # The diverged series keeps its legend entry, so its absence is visible.
  assert [t.get_text() for t in ax.get_legend().get_texts()][:2] == ["gelu", "relu"]


def test_noise_figure(tmp_path):
  levels = np.linspace(0.0, 3.0, 20).tolist()
  results = {
    name: {
      "levels": levels,
      "accuracy": [[1.0 - shift - 0.1 * a for a in levels] for shift in (0.0, 0.01, 0.02)],
      "loss": [[0.1 + shift + a for a in levels] for shift in (0.0, 0.1, 0.2)],
    }
    for name in ("gelu", "relu", "elu")
  }
  fig = plots.plot_noise(results, title="noise")
  assert len(fig.axes) == 2
  for ax, ylabel in zip(fig.axes, ("test accuracy", "test log loss (nats)"), strict=True):
    assert len(ax.lines) == 3
    assert len(bands(ax)) == 3
    assert ax.get_ylabel() == ylabel
    assert ax.get_xlabel().startswith("noise level a")
  np.testing.assert_allclose(fig.axes[0].lines[0].get_ydata(), [0.99 - 0.1 * a for a in levels])
  np.testing.assert_allclose(fig.axes[1].lines[0].get_ydata(), [0.2 + a for a in levels])
  path = plots.save_figure(fig, tmp_path / "noise.png")
  assert path.read_bytes()[:8] == PNG_MAGIC


def test_a_one_epoch_runs_figure_shows_its_points(tmp_path):
  """A run evaluated once per member (one epoch, one evaluation each) has curves of one point,
  which a line and a band would leave invisible: each is a marker, its min-max a bar."""
  shown = []
  for activation, scale in (("gelu", 1.0), ("my_pkg.acts:squareplus", 2.0)):
    members = [
      member(seed, 1e-3, train_loss=[scale * (seed + 1)], validation_loss=[scale * (seed + 2)],
             validation_error=[0.1], test_loss=[0.3], test_error=[0.1])
      for seed in range(3)
    ]  # fmt: skip
    run = runs.load_run(
      write_workdir(
        tmp_path / runs.run_name(activation), members, activation=activation, task="tiny_mnist"
      )
    )
    shown.append((run, runs.summarize_run(run).selected, "seeds 0–2"))
  fig = plots.loss_figure("tiny_mnist", shown)
  (ax,) = fig.axes
  # 2 activations x (train, validation): one point each, drawn as a visible marker, no line,
  # at epoch 1, each activation's moved a little to its side so that equal values stay apart.
  assert len(ax.lines) == 4
  for line in ax.lines:
    assert line.get_marker() == "o" and line.get_markersize() > 0
    assert line.get_linestyle() == "None"
    assert len(line.get_xdata()) == 1
  x = [line.get_xdata()[0] for line in ax.lines]
  assert x[0] == x[1] < 1.0 < x[2] == x[3] and x[2] - x[0] <= plots.DODGE_SPAN
  # gelu's train point: the median of 1, 2, 3; squareplus's validation point: of 4, 6, 8.
  assert [list(line.get_ydata()) for line in ax.lines] == [[2.0], [3.0], [4.0], [6.0]]
  # Each min-max is a vertical bar at its point (a band of one point has no width): gelu's
  # train from 1 to 3.
  bars = [c for c in ax.collections if isinstance(c, LineCollection)]
  assert len(bars) == 4 and not bands(ax)
  np.testing.assert_allclose(bars[0].get_segments()[0], [[x[0], 1.0], [x[0], 3.0]])
  # The x axis is the one epoch, ticked as such.
  assert list(ax.get_xticks()) == [1] and ax.get_xlim() == (0.5, 1.5)
  # The legend's split entries carry the marker and call the min-max a bar.
  legend = ax.get_legend()
  names = [t.get_text() for t in legend.get_texts()]
  assert names[2:] == ["train (median, min–max bar)", "validation (median, min–max bar)"]
  assert all(h.get_marker() == "o" for h in legend.legend_handles[2:])
  path = plots.save_figure(fig, tmp_path / "loss_curves.png")
  assert path.read_bytes()[:8] == PNG_MAGIC


def test_curves_of_several_points_have_no_markers(workdirs):
  panels = {"p": {"gelu": plots.run_curves(workdirs["gelu", 0.0], 1e-3, ("train_loss",))}}
  (line,) = plots.plot_curves(panels, ylabel="y", title="t").axes[0].lines
  assert line.get_marker() == "None" and len(line.get_xdata()) == 3
