"""The paper's figures, drawn from trainer workdir files alone (matplotlib's Agg canvas).

Figure 2 (MNIST loss curves with and without dropout) and Figure 4 (autoencoder train/test MSE
per learning rate) share one layout: a panel per setting, a colour per activation, the first
split drawn dark and thick and the others thin and light, each line the median over seeds with a
band from the minimum to the maximum seed. Figure 3 (noise robustness) plots test accuracy and
log loss against the noise level a.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gelujax.study import noise, runs
from gelujax.study.runs import Curve, LrRow, Run, RunRow

if TYPE_CHECKING:  # matplotlib is imported where a figure is drawn: 0.5 s a command otherwise.
  from matplotlib.figure import Figure

# Split name -> (legend name, line width, opacity): the paper draws training curves dark and
# evaluation curves light and thin.
SPLIT_STYLES = {
  "train": ("train", 1.8, 1.0),
  "validation": ("validation", 1.0, 0.55),
  "test": ("test", 1.0, 0.55),
  # A figure of held-out curves alone (a pilot's): drawn as boldly as a training curve.
  "validation alone": ("validation", 1.8, 1.0),
}
BAND_ALPHA = 0.15
PANEL_SIZE = (5.0, 4.0)
LEGEND_WIDTH = 2.6  # Inches beside each loss-curve panel for its legend.
# One-point curves of a panel's series are set apart along x (in epochs), so that equal values
# do not hide each other: at most DODGE_STEP apart, all within DODGE_SPAN.
DODGE_STEP, DODGE_SPAN = 0.08, 0.4


def plain_log_formatter(**kwargs: Any) -> Any:
  """A LogFormatter's choice of which log-axis ticks to label, printed plainly (0.06, not
  6e-02)."""
  from matplotlib.ticker import LogFormatter

  class PlainLogFormatter(LogFormatter):
    def __call__(self, x: float, pos: int | None = None) -> str:
      return f"{x:g}" if super().__call__(x, pos) else ""

  return PlainLogFormatter(**kwargs)


def run_curves(run: Run, learning_rate: float, keys: Sequence[str]) -> dict[str, Curve | None]:
  """Median-over-seeds curves of ``keys`` (e.g. ``train_loss``) for one lr, keyed by split."""
  return {key.split("_", 1)[0]: runs.median_curve(run, key, learning_rate) for key in keys}


def _colors(panels: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
  """A colour per series label; labels sharing their first word (the activation) share one."""
  labels = list(dict.fromkeys(label for series in panels.values() for label in series))
  names = list(dict.fromkeys(label.split()[0] for label in labels))
  return {label: f"C{names.index(label.split()[0]) % 10}" for label in labels}


def _new_figure(columns: int, legend_width: float = 0.0) -> tuple[Figure, list[Any]]:
  """A row of ``columns`` panels, each ``legend_width`` inches wider for a legend beside it."""
  from matplotlib.backends.backend_agg import FigureCanvasAgg
  from matplotlib.figure import Figure

  width = (PANEL_SIZE[0] + legend_width) * columns
  fig = Figure(figsize=(width, PANEL_SIZE[1]), layout="constrained")
  FigureCanvasAgg(fig)
  return fig, list(fig.subplots(1, columns, squeeze=False)[0])


def _draw(
  ax: Any, curve: Curve, color: str, width: float, alpha: float, dodge: float = 0.0
) -> None:
  """The median line and its min-max band; a curve of one point (a run evaluated once, as a
  one-epoch run with one evaluation per epoch is), which a line and a band would leave
  invisible, as a marker with its min-max as a vertical bar, moved ``dodge`` along x so that
  series of equal values stay apart."""
  if len(curve.x) == 1:
    x = curve.x + dodge
    ax.plot(x, curve.median, color=color, alpha=alpha, linestyle="none", **_marker(width))
    ax.vlines(x, curve.low, curve.high, color=color, linewidth=width, alpha=alpha)
    return
  ax.plot(curve.x, curve.median, color=color, linewidth=width, alpha=alpha)
  ax.fill_between(curve.x, curve.low, curve.high, color=color, alpha=BAND_ALPHA * alpha, lw=0)


def _dodge(index: int, count: int) -> float:
  """How far the ``index``-th of ``count`` series' one-point curves are moved along x: spread
  over at most :data:`DODGE_SPAN` about their epoch, at most :data:`DODGE_STEP` apart."""
  if count < 2:
    return 0.0
  step = min(DODGE_STEP, DODGE_SPAN / (count - 1))
  return (index - (count - 1) / 2) * step


def _marker(width: float) -> dict[str, Any]:
  """The marker of a one-point curve (:func:`_draw`), larger for the thicker splits."""
  return {"marker": "o", "markersize": 3.0 * width + 2.0}


def plot_curves(
  panels: Mapping[str, Mapping[str, Mapping[str, Curve | None]]],
  *,
  ylabel: str,
  title: str,
  logy: bool = True,
  xlabel: str = "epoch",
) -> Figure:
  """Loss curves: one panel per setting, one colour per series, one line per split.

  Args:
    panels: panel title -> series label (e.g. ``"gelu (2/5 diverged)"``) -> split (``"train"``,
      ``"validation"``, ``"test"``) -> curve; a None curve (every member diverged) is not drawn.
      Labels with the same first word get the same colour in every panel.
    ylabel: the y axis label, with units.
    title: the figure's title.
    logy: log-scale y axis, as the paper's Figures 2 and 4.
    xlabel: the x axis label.

  Returns:
    The figure: per panel, one line and one min-max band per drawn curve; a curve of one point
    (a run evaluated once) as a marker (a line of one point, no line style) and a min-max bar,
    each series' moved a little along x (:func:`_dodge`).
  """
  from matplotlib.lines import Line2D
  from matplotlib.ticker import FuncFormatter, MaxNLocator

  fig, axes = _new_figure(len(panels), legend_width=LEGEND_WIDTH)
  colors = _colors(panels)
  for ax, (panel, series) in zip(axes, panels.items(), strict=True):
    splits = []
    drawn = []  # How many points each drawn curve has (one: a marker and a bar, no band).
    for index, (label, curves) in enumerate(series.items()):
      for split, curve in curves.items():
        _, width, alpha = SPLIT_STYLES[split]
        if split not in splits:
          splits.append(split)
        if curve is not None:
          _draw(ax, curve, colors[label], width, alpha, _dodge(index, len(series)))
          drawn.append(len(curve.x))
    points = 1 in drawn
    handles = [Line2D([], [], color=colors[label], lw=1.8) for label in series]
    handles += [
      Line2D([], [], color="black", lw=SPLIT_STYLES[s][1], alpha=SPLIT_STYLES[s][2],
             **(_marker(SPLIT_STYLES[s][1]) if points else {}))
      for s in splits
    ]  # fmt: skip
    band = {(False, True): "min–max bar", (True, True): "min–max band or bar"}.get(
      (any(n > 1 for n in drawn), points), "min–max band"
    )
    names = list(series) + [f"{SPLIT_STYLES[s][0]} (median, {band})" for s in splits]
    # Beside the panel: the curves fill the whole axes area, a legend inside would hide some.
    ax.legend(handles, names, fontsize="small", loc="upper left", bbox_to_anchor=(1.02, 1.0))
    if logy:
      ax.set_yscale("log")
      # Plain numbers (0.05, 2.2) rather than 5 x 10^-2; minor ticks labelled on short ranges.
      ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}"))
      ax.yaxis.set_minor_formatter(plain_log_formatter(minor_thresholds=(1, 0.4)))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # Whole epochs, never 2.5.
    if points and max(drawn) == 1:  # Whole epochs about the points, each ticked.
      low, high = ax.get_xlim()
      first, last = math.floor(low + DODGE_SPAN), math.ceil(high - DODGE_SPAN)
      ax.set_xlim(first - 0.5, last + 0.5)
      ax.set_xticks(range(first, last + 1))
    ax.set_title(panel)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.2)
  fig.suptitle(title)
  return fig


def plot_noise(results: Mapping[str, Mapping[str, Any]], *, title: str) -> Figure:
  """Figure 3: test accuracy and log loss against the noise level a, one line per series.

  Args:
    results: series label -> :func:`gelujax.study.noise.evaluate_noise` result.
    title: the figure's title.

  Returns:
    The figure: two panels, each with one median line and min-max band per series.
  """
  from matplotlib.lines import Line2D

  fig, axes = _new_figure(2)
  colors = _colors({"": results})
  for ax, key, ylabel in zip(
    axes, ("accuracy", "loss"), ("test accuracy", "test log loss (nats)"), strict=True
  ):
    for label, result in results.items():
      curve = noise.noise_curve(result, key)
      _draw(ax, curve, colors[label], 1.8, 1.0)
    ax.legend(
      [Line2D([], [], color=colors[label], lw=1.8) for label in results],
      list(results),
      fontsize="small",
    )
    ax.set_xlabel("noise level a (pixels in [0, 1] plus Unif[−a, a])")
    ax.set_ylabel(ylabel)
    ax.set_title(ylabel)
    ax.grid(True, alpha=0.3)
  axes[0].set_ylim(0.0, 1.0)
  fig.suptitle(f"{title} (median over seeds, min–max band)")
  return fig


def save_figure(fig: Figure, path: str | Path) -> Path:
  """Writes the figure as a PNG, creating the directory."""
  path = Path(path)
  path.parent.mkdir(parents=True, exist_ok=True)
  fig.savefig(path, dpi=120)
  return path


def series_label(name: str, stats: LrRow, seeds: str) -> str:
  """A legend label: the run, its lr, its seeds and its diverged members."""
  label = f"{name} (lr {stats.learning_rate:g}, {seeds}"
  if stats.diverged:
    label += f", {stats.diverged}/{stats.members} diverged"
  return label + ")"


def loss_keys(run: Run) -> tuple[str, str]:
  """Training loss and the evaluation loss of the split the run selects on."""
  return "train_loss", runs.selection_metric(run).split("_", 1)[0] + "_loss"


def draw_loss_figure(task: str, shown: Sequence[tuple[Run, LrRow | None, str]], out: Path) -> Path:
  """:func:`loss_figure`, saved as ``out/loss_curves.png``."""
  return save_figure(loss_figure(task, shown), out / "loss_curves.png")


def loss_figure(task: str, shown: Sequence[tuple[Run, LrRow | None, str]]) -> Figure:
  """Fig. 2 style: a panel per dropout rate, each run at one lr.

  Args:
    task: the task, for the title.
    shown: per run, ``(run, its statistics at the lr shown, which seeds)``; statistics None
      where every member diverged.
  """
  panels: dict[str, dict[str, Any]] = {}
  for run, stats, seeds in shown:
    series = panels.setdefault(f"dropout rate {run.dropout:g}", {})
    if stats is None:
      series[f"{run.activation} (all diverged)"] = {"train": None}
    else:
      label = series_label(run.activation, stats, seeds)
      series[label] = run_curves(run, stats.learning_rate, loss_keys(run))
  return plot_curves(
    panels,
    ylabel="log loss (nats)",
    title=f"{task} on {shown[0][0].config['dataset']}: training (dark) and held-out (light) loss",
  )


def draw_autoencoder_figure(shown: Sequence[tuple[Run, RunRow]], out: Path, seeds: str) -> Path:
  """Fig. 4: a panel per learning rate, train and test MSE of every run (its row) at that lr."""
  panels: dict[str, dict[str, Any]] = {}
  for run, row in shown:
    for stats in row.grid:
      lr = stats.learning_rate
      label = series_label(run.activation, stats, seeds)
      panels.setdefault(f"learning rate {lr:g}", {})[label] = run_curves(
        run, lr, ("train_loss", "test_loss")
      )
  fig = plot_curves(
    panels,
    ylabel="reconstruction MSE",
    title=f"autoencoder on {shown[0][0].config['dataset']}: train (dark) and test (light)",
  )
  return save_figure(fig, out / "reconstruction_curves.png")


def draw_noise_figure(task: str, dataset: str, results: Mapping[str, Any], out: Path) -> Path:
  """Fig. 3: accuracy and log loss against the noise level; ``results``: legend label -> noise
  evaluation."""
  fig = plot_noise(results, title=f"{task} on {dataset}: robustness to input noise (test set)")
  return save_figure(fig, out / "noise_robustness.png")
