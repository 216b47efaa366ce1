"""Where a training step's time goes: XLA's own per-operation times, by what the code computes.

Each contender of `benchmarks/training.py` that has a ≥ 80% target (the 15-member MNIST grid,
one member, the autoencoder's 6-member grid, each at the layout ``--cpu_devices=auto`` picks)
runs in a worker of that benchmark (`training.Worker`: its own process, device count and XLA
flags). After a warm-up epoch that compiles, one more epoch's training segment (the
`lax.scan` over its steps; a fraction of the epoch as in `training.py`) runs under JAX's
profiler, and XLA dumps that program's optimized HLO.

XLA:CPU records every operation it runs (a *thunk*: one fusion, dot, copy or collective) as an
event named after its HLO instruction. Their self times (an event's time less the events it
encloses), summed over threads, are the device time; divided by the devices and the steps they
are a device's time per step. Each thunk is then placed by its HLO:

- a thunk that holds a dot or a convolution is a *matrix product* (the limit `training.py`
  measures), whatever else XLA fused into it; a collective (all-gather, all-reduce) is a
  device waiting for the others as much as moving data;
- any other thunk's time is shared among the Python lines that made its instructions
  (the stack XLA keeps with each instruction, innermost gelujax line first), in proportion to
  how many instructions each made; each line belongs to a category (`category`): the dropout-off
  pass that logs the training loss, the optimizer, dropout, the activation, the loss, the batch
  gather, or other;

so the report lists, for each contender, the milliseconds per step of each category, the
share of the traced time each takes, and the source lines that take most. What the thunks do
not cover (the time between them: the loop, waiting) is reported as such.

Run: python benchmarks/step_profile.py           (about 5 min on 2 cores)
     python benchmarks/step_profile.py --quick   (the tiny tasks: a smoke run)
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import reports
import training

CONTROL = {"while", "call", "conditional"}  # Thunks whose own time is the loop's, not work.
TRIVIAL = {
  "parameter", "constant", "bitcast", "get-tuple-element", "tuple", "broadcast", "reshape",
}  # fmt: skip
PRODUCT_OPCODES = {"dot", "convolution"}
COLLECTIVE_OPCODES = {
  "all-gather",
  "all-reduce",
  "reduce-scatter",
  "collective-permute",
  "all-to-all",
}
PRODUCTS = "matrix products"
COLLECTIVES = "collectives (a device waiting for the others)"
DROPOUT_OFF = "dropout-off loss pass (not its products)"
OPTIMIZER = "optimizer (Adam, divergence guard)"
DROPOUT = "dropout (bits and mask)"
ACTIVATION = "activation (and its derivative)"
LOSS = "loss"
GATHER = "batch gather"
OTHER = "other"
CATEGORIES = (
  PRODUCTS,
  COLLECTIVES,
  DROPOUT_OFF,
  OPTIMIZER,
  DROPOUT,
  ACTIVATION,
  LOSS,
  GATHER,
  OTHER,
)
TOP_LINES = 8


# ------------------------------------------------------------------------------- the HLO


_INSTRUCTION = re.compile(
  r"^\s*(?:ROOT )?%(?P<name>[\w.\-]+) = (?:\([^=]*?\)|\S+) (?P<opcode>[a-z][\w\-]*)\((?P<rest>.*)$"
)
_COMPUTATION = re.compile(r"^(?:ENTRY )?%(?P<name>[\w.\-]+) \(")
_CALLS = re.compile(r"(?:calls|to_apply|body|condition)=%([\w.\-]+)")
_FRAME_ID = re.compile(r"stack_frame_id=(\d+)")


def parse_hlo(text: str) -> dict:
  """An optimized HLO module's instructions (name -> opcode, computation, called computations,
  stack frame), its computations' instructions, and its stack-frame tables."""
  tables: dict[str, dict[int, str]] = {}
  instructions, computations = {}, collections.defaultdict(list)
  section, computation = None, None
  for line in text.splitlines():
    if line in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
      section = line
      tables[section] = {}
      continue
    if section and re.match(r"^\d+ ", line):
      key, value = line.split(" ", 1)
      tables[section][int(key)] = value
      continue
    section = None
    if match := _COMPUTATION.match(line):
      computation = match["name"]
    elif match := _INSTRUCTION.match(line):
      frame = _FRAME_ID.search(match["rest"])
      instructions[match["name"]] = {
        "opcode": match["opcode"],
        "computation": computation,
        "calls": _CALLS.findall(match["rest"]),
        "frame": int(frame[1]) if frame else None,
      }
      computations[computation].append(match["name"])
  return {"instructions": instructions, "computations": computations, "tables": tables}


def _field(entry: str, key: str) -> int:
  return int(re.search(rf"\b{key}=(\d+)", entry)[1])


def stack(module: dict, frame: int | None) -> list[tuple[str, str, int]]:
  """The Python stack of an instruction, innermost first: (file, function, line)."""
  tables, frames = module["tables"], []
  while frame:
    entry = tables["StackFrames"][frame]
    location = tables["FileLocations"][_field(entry, "file_location_id")]
    frames.append(
      (
        json.loads(tables["FileNames"][_field(location, "file_name_id")]),
        json.loads(tables["FunctionNames"][_field(location, "function_name_id")]),
        _field(location, "line"),
      )
    )
    parent = _field(entry, "parent_frame_id")
    frame = None if parent == frame else parent
  return frames


def _source_line(file: str, line: int, cache: dict = {}) -> str:  # noqa: B006
  if file not in cache:
    cache[file] = Path(file).read_text().splitlines() if Path(file).is_file() else []
  lines = cache[file]
  return lines[line - 1].strip() if 0 < line <= len(lines) else ""


def _dropout_off_lines() -> tuple[str, range]:
  """step.py and the lines of `train_step`'s dropout-off pass (its ``if`` block)."""
  import inspect

  from gelujax.engine import step

  source, first = inspect.getsourcelines(step.train_step)
  start = next(i for i, text in enumerate(source) if 'train_loss == "dropout_off"' in text)
  end = next(i for i in range(start + 1, len(source)) if source[i].strip() == "else:")
  return inspect.getsourcefile(step), range(first + start, first + end)


def _within(file: str) -> str:
  """A gelujax file's path inside the package (``activations/gelus.py``, ``optimizers.py``): a
  module's name alone is not unique (``paper.py``, ``tasks/paper.py``)."""
  return file.rpartition("/gelujax/")[2]


def category(frames: list[tuple[str, str, int]], dropout_off: tuple[str, range]) -> str:
  """The category of a non-product instruction made by the Python stack ``frames``."""
  step_file, lines = dropout_off
  if any(file == step_file and line in lines for file, _, line in frames):
    return DROPOUT_OFF
  user = [frame for frame in frames if "/gelujax/" in frame[0]]
  if not user:
    return OTHER
  file, function, line = user[0]
  name, text, function = Path(file).name, _source_line(file, line), function.split(".")[-1]
  if name == "optimizers.py" or re.search(r"optimizer|apply_updates|trains|isfinite", text):
    return OPTIMIZER
  if name == "prng.py" or "ropout" in text or "dropout" in function:
    return DROPOUT
  if (
    _within(file).startswith("activations/") or name == "_gelu_numerics.py" or "activation" in text
  ):
    return ACTIVATION
  if name == "objectives.py" and "prepare_batch" not in function:
    return LOSS
  if function in ("gather", "<dictcomp>", "prepare_batch", "permute"):
    return GATHER
  return OTHER


def _inner(module: dict, name: str) -> list[str]:
  """The instructions a thunk runs: itself, or those of the computations it calls (fusions)."""
  found, todo = [], [name]
  while todo:
    instruction = module["instructions"][todo.pop()]
    called = [c for c in instruction["calls"] if c in module["computations"]]
    if called and instruction["opcode"] not in CONTROL:
      for computation in called:
        todo.extend(module["computations"][computation])
    else:
      found.append(instruction)
  return found


def attribute(module: dict, thunk: str, dropout_off) -> dict[tuple[str, str], float]:
  """(category, source line) -> the share of ``thunk``'s time it takes (shares sum to 1)."""
  instruction = module["instructions"][thunk]
  if instruction["opcode"] in CONTROL:
    return {("loop control", ""): 1.0}
  if instruction["opcode"] in COLLECTIVE_OPCODES:
    return {(COLLECTIVES, f"(XLA's {instruction['opcode']})"): 1.0}
  inner = [inst for inst in _inner(module, thunk) if inst["opcode"] not in TRIVIAL]
  if any(inst["opcode"] in PRODUCT_OPCODES for inst in inner):
    return {(PRODUCTS, "(every dot)"): 1.0}
  where = []
  for inst in inner:
    frames = stack(module, inst["frame"] or instruction["frame"])
    user = next(((f, n, ln) for f, n, ln in frames if "/gelujax/" in f), None)
    line = (
      f"{_within(user[0])}:{user[2]} {_source_line(user[0], user[2])}"
      if user
      else f"(XLA's {inst['opcode']}, no Python line)"
    )
    where.append((category(frames, dropout_off), line))
  if not where:
    return {(OTHER, f"(XLA's {instruction['opcode']}, no Python line)"): 1.0}
  counts = collections.Counter(where)
  return {key: n / len(where) for key, n in counts.items()}


# ----------------------------------------------------------------------------- the trace


def thunk_self_times(xplane: Path, names: set[str]) -> tuple[dict[str, float], float]:
  """Each named thunk's self time in seconds, summed over threads, and the traced span."""
  from jax.profiler import ProfileData

  times: dict[str, float] = collections.Counter()
  first, last = float("inf"), 0.0
  for plane in ProfileData.from_file(str(xplane)).planes:
    for line in plane.lines:
      events = sorted(
        ((e.start_ns, e.duration_ns, e.name) for e in line.events if e.name in names),
        key=lambda e: (e[0], -e[1]),
      )
      open_: list[list] = []  # [end, name, self time] of the enclosing events
      for start, duration, name in events:
        while open_ and open_[-1][0] <= start:
          _, done, own = open_.pop()
          times[done] += own
        if open_:
          open_[-1][2] -= duration
        open_.append([start + duration, name, duration])
        first, last = min(first, start), max(last, start + duration)
      for _, done, own in open_:
        times[done] += own
  return {k: v * 1e-9 for k, v in times.items()}, max(0.0, last - first) * 1e-9


def profile(name: str, settings: dict, workdir: Path) -> dict:
  """Profiles one contender in a worker of its own; returns its categories and lines."""
  dump, trace = workdir / "hlo", workdir / "trace"
  flags = f"--xla_dump_to={dump} --xla_dump_hlo_as_text --xla_dump_hlo_module_re=jit_train_segment"
  settings = {
    **settings, "xla_flags": f"{settings.get('xla_flags', '')} {flags}".strip(),
    "profile_dir": str(trace),
  }  # fmt: skip
  worker = training.Worker(settings)
  worker.wait_ready()
  wall = worker.time("epoch")  # Once more compiled, untraced: the step's time without tracing.
  traced = worker.time("profile")
  worker.close()
  info = worker.info
  (hlo,) = sorted(dump.glob("*jit_train_segment*after_optimizations.txt"))
  module = parse_hlo(hlo.read_text())
  (xplane,) = sorted(trace.rglob("*.xplane.pb"))
  times, span = thunk_self_times(xplane, set(module["instructions"]))
  devices, steps = info["devices"], info["steps_timed"]
  dropout_off = _dropout_off_lines()
  by_category: dict[str, float] = collections.Counter()
  by_line: dict[tuple[str, str], float] = collections.Counter()
  for thunk, seconds in times.items():
    for key, share in attribute(module, thunk, dropout_off).items():
      by_category[key[0]] += seconds * share
      by_line[key] += seconds * share
  per_step = 1e3 / (devices * steps)  # seconds of all devices -> ms of one device per step
  return {
    "name": name,
    "layout": info["layout"],
    "steps": steps,
    "devices": devices,
    "untraced_ms": 1e3 * wall / steps,
    "traced_ms": 1e3 * traced / steps,
    "span_ms": 1e3 * span / steps,
    "thunks_ms": per_step * sum(times.values()),
    "categories": {k: per_step * v for k, v in by_category.items()},
    "lines": [
      {"category": k[0], "line": k[1], "ms": per_step * v}
      for k, v in sorted(by_line.items(), key=lambda kv: -kv[1])[:TOP_LINES]
    ],
  }


def contenders(quick: bool) -> dict[str, dict]:
  """The three targets' contenders, at their automatic layouts, as `training.py` runs them."""
  mnist, ae = (training.QUICK_MNIST, training.QUICK_AE) if quick else (training.MNIST, training.AE)
  members, ae_members = (2, 2) if quick else (15, 6)
  common = {"kind": "train", "examples": 320 if quick else 0, "data_dir": None}
  out = {}
  for label, task, m, fraction in (
    (f"{members}-member grid", mnist, members, training.PROFILE_FRACTION),
    ("1 member", mnist, 1, training.PROFILE_FRACTION),
    (f"autoencoder, {ae_members}-member grid", ae, ae_members, training.AE_FRACTION),
  ):
    out[label] = {
      **common, **task, **training.auto_settings(m), "members": m, "fraction": fraction,
    }  # fmt: skip
  return out


def write_report(result: dict, output_dir: Path) -> None:
  (output_dir / "step_profile.json").write_text(json.dumps(result, indent=1) + "\n")
  out = [
    *reports.header("Where a training step's time goes (XLA's per-operation times)", result),
    "Made by `benchmarks/step_profile.py` (its docstring says how): each thunk XLA:CPU ran in",
    "one traced training segment, by its self time, a device's milliseconds per step. A thunk",
    "holding a dot is a matrix product; any other is shared among the Python lines that made",
    "its instructions.",
  ]
  for c in result["contenders"]:
    traced = c["span_ms"] or 1.0
    out += [
      "",
      f"## {c['name']}: {c['layout']}",
      "",
      f"{c['steps']} steps traced. Per step: {c['untraced_ms']:.2f} ms untraced, "
      f"{c['traced_ms']:.2f} ms traced; the thunks span {c['span_ms']:.2f} ms of it, and "
      f"their self times sum to {c['thunks_ms']:.2f} ms per device.",
      "",
      "| category | ms / step | share of the span |",
      "|---|---:|---:|",
    ]
    for name in (*CATEGORIES, "loop control"):
      if name in c["categories"]:
        ms = c["categories"][name]
        out.append(f"| {name} | {ms:.3f} | {100 * ms / traced:.1f}% |")
    gap = c["span_ms"] - c["thunks_ms"]
    out.append(
      f"| between thunks (the span less their times) | {gap:.3f} | {100 * gap / traced:.1f}% |"
    )
    out += ["", "The source lines that take most:", "", "| ms / step | category | line |",
            "|---:|---|---|"]  # fmt: skip
    for line in c["lines"]:
      text = line["line"].replace("|", "\\|")
      out.append(f"| {line['ms']:.3f} | {line['category']} | `{text}` |")
  (output_dir / "step_profile.md").write_text("\n".join(out) + "\n")


def main(argv: list[str] | None = None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--quick", action="store_true", help="the tiny tasks (a smoke run)")
  parser.add_argument("--output-dir", type=Path, default=training.RESULTS_DIR)
  args = parser.parse_args(argv)

  results = []
  with tempfile.TemporaryDirectory(prefix="gelujax-step-profile-") as tmp:
    for i, (name, settings) in enumerate(contenders(args.quick).items()):
      start = time.perf_counter()
      results.append(profile(name, settings, Path(tmp, str(i))))
      print(f"{name}: profiled in {time.perf_counter() - start:.0f} s", file=sys.stderr)
  command = "python benchmarks/step_profile.py" + (" --quick" if args.quick else "")
  result = {
    **reports.stamp(command),
    "contenders": results,
  }
  write_report(result, args.output_dir)
  print((args.output_dir / "step_profile.md").read_text())


if __name__ == "__main__":
  main()
