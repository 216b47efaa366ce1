"""Training speed of the character-level GPT (``char_lm``) against nanoGPT's own model in PyTorch,
side by side, and of a grid of members against one member alone.

Each configuration is timed in a process of its own, with the CPU split as ``gelujax train``
splits it for that grid (`gelujax.host.configure_cpu`: one member, one device using every core;
a grid, a device per core). In each process the gelujax program (the engine's own
``train_segment``: the task's model, nanoGPT's AdamW, the data's windows gathered on the device)
and, given ``--nanogpt``, nanoGPT's ``model.GPT`` at the same configuration (block 64, batch 12,
4 layers, 4 heads, width 128, dropout 0, no biases; its ``configure_optimizers`` AdamW at weight
decay 0.1, betas 0.9 and 0.99; the gradient clipped at 1; windows drawn as its ``get_batch``
draws them) train ``--steps`` steps in turn, **alternating** ``--repeats`` times so that other
load falls on both alike; the median gives tokens per second (a step's windows x characters,
times the members). nanoGPT's code is read from the folder given (a checkout of
karpathy/nanoGPT), never copied here. PyTorch uses every core (its default threads).

Run: python benchmarks/char_lm_speed.py --nanogpt=PATH --data_dir=PATH
     python benchmarks/char_lm_speed.py --render      (the .md again from the .json)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
RESULTS_DIR = Path(__file__).resolve().parent / "results"

import reports  # noqa: E402


def time_gelujax(spec, splits, members: int, steps: int):
  """A closure that trains ``steps`` steps of ``members`` members and returns the seconds."""
  import jax
  import numpy as np

  from gelujax import engine, tasks
  from gelujax.members import Members

  parts = tasks.build(spec, splits)
  grid = Members(learning_rates=(1e-3,), seeds=tuple(range(members)))
  program = engine.make_program(parts, engine.make_mesh(members), members)
  seeds, lrs = program.put_members(grid)
  state = program.init(seeds, lrs)
  data = program.put_data(splits["train"])
  batches = program.shuffle(seeds, np.int32(1))
  holder = {"state": state, "first": 0}

  def run() -> float:
    first = holder["first"] % max(program.steps_per_epoch - steps, 1)
    begin = time.perf_counter()
    holder["state"], losses = program.train_segment(
      holder["state"], data, batches, seeds, lrs,
      epoch=np.int32(1), first_step=np.int32(first), num_steps=steps,
    )  # fmt: skip
    jax.block_until_ready(losses)
    holder["first"] += steps
    return time.perf_counter() - begin

  params = jax.tree.leaves(program.abstract_state().params)
  count = sum(int(np.prod(p.shape[1:])) for p in params)
  return run, count, program


def time_nanogpt(path: str, splits, steps: int):
  """nanoGPT's GPT at the CPU configuration, trained ``steps`` steps a call."""
  import numpy as np
  import torch

  sys.path.insert(0, path)
  from model import GPT, GPTConfig  # nanoGPT's own file, read from its checkout

  torch.manual_seed(0)
  config = GPTConfig(
    block_size=64, vocab_size=65, n_layer=4, n_head=4, n_embd=128, dropout=0.0, bias=False
  )
  model = GPT(config)
  optimizer = model.configure_optimizers(0.1, 1e-3, (0.9, 0.99), "cpu")
  inputs = splits["train"]["inputs"]
  text = np.concatenate([inputs[:, 0], inputs[-1, 1:]]).astype(np.int64)
  rng = np.random.default_rng(0)

  def batch():
    starts = rng.integers(0, len(text) - 65, 12)
    x = np.stack([text[s : s + 64] for s in starts])
    y = np.stack([text[s + 1 : s + 65] for s in starts])
    return torch.from_numpy(x), torch.from_numpy(y)

  def run() -> float:
    begin = time.perf_counter()
    for _ in range(steps):
      x, y = batch()
      _, loss = model(x, y)
      loss.backward()
      torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
      optimizer.step()
      optimizer.zero_grad(set_to_none=True)
    return time.perf_counter() - begin

  return run, sum(p.numel() for p in model.parameters()), torch.get_num_threads()


def worker(args) -> dict:
  """One process: the CPU split for ``args.members``, both frameworks timed alternately."""
  from gelujax import host

  devices = host.configure_cpu("auto", args.members)
  from gelujax import tasks

  spec = tasks.get("char_lm")
  splits = spec.load_data(args.data_dir)
  jax_run, jax_params, program = time_gelujax(spec, splits, args.members, args.steps)
  runs = {"gelujax": jax_run}
  found = {"members": args.members, "cpu_devices": devices, "gelujax_parameters": jax_params}
  found["layout"] = engine_layout(program)
  if args.nanogpt:
    torch_run, torch_params, threads = time_nanogpt(args.nanogpt, splits, args.steps)
    runs["nanogpt"] = torch_run
    found.update(nanogpt_parameters=torch_params, torch_threads=threads)
  for run in runs.values():  # warm up: compile, allocate
    run()
  seconds = {name: [] for name in runs}
  for _ in range(args.repeats):
    for name, run in runs.items():
      seconds[name].append(run())
  tokens = args.steps * 12 * 64
  for name, times in seconds.items():
    members = args.members if name == "gelujax" else 1
    found[f"{name}_seconds"] = times
    found[f"{name}_tokens_per_second"] = members * tokens / statistics.median(times)
  return found


def engine_layout(program) -> str:
  from gelujax.engine.mesh import describe_layout

  return describe_layout(program.num_members, program.mesh, program.strategy)


def render(record: dict) -> str:
  lines = reports.header("Character-level GPT: gelujax against nanoGPT's PyTorch model", record)
  lines += [
    f"{record['steps']} steps a timing, {record['repeats']} timings each, the frameworks "
    "alternating in each process; medians. Tokens: windows x characters a step (12 x 64), "
    "times the members.",
    "",
    "| process | layout | gelujax tokens/s | gelujax per member | nanoGPT tokens/s | ratio |",
    "|---|---|---|---|---|---|",
  ]
  for run in record["runs"]:
    ours = run["gelujax_tokens_per_second"]
    theirs = run.get("nanogpt_tokens_per_second")
    per = ours / run["members"]
    ratio = f"{per / theirs:.2f}x" if theirs else "–"
    lines.append(
      f"| {run['members']} member{'s' * (run['members'] > 1)} | {run['layout']} | {ours:,.0f} | "
      f"{per:,.0f} | {f'{theirs:,.0f}' if theirs else '–'} | {ratio} |"
    )
  first = record["runs"][0]
  lines += [
    "",
    f"Parameters: gelujax {first['gelujax_parameters']:,} (Flax's biases kept), nanoGPT "
    f"{first.get('nanogpt_parameters', 0):,} (no biases). Ratio: gelujax's tokens per second "
    "per member over nanoGPT's, in the same process.",
    "",
  ]
  return "\n".join(lines)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--nanogpt", default=None, help="a checkout of karpathy/nanoGPT")
  parser.add_argument("--data_dir", default=None)
  parser.add_argument("--steps", type=int, default=50)
  parser.add_argument("--repeats", type=int, default=5)
  parser.add_argument("--members", default="1,2", help="grids to time, one process each")
  parser.add_argument("--name", default="char_lm_speed")
  parser.add_argument("--out", default=str(RESULTS_DIR))
  parser.add_argument("--render", action="store_true")
  parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
  args = parser.parse_args()
  out = Path(args.out)
  if args.worker:
    args.members = int(args.members)
    print(json.dumps(worker(args)))
    return
  if args.render:
    record = json.loads((out / f"{args.name}.json").read_text())
    (out / f"{args.name}.md").write_text(render(record))
    return
  command = "python benchmarks/char_lm_speed.py " + " ".join(sys.argv[1:])
  record = {**reports.stamp(command), "steps": args.steps, "repeats": args.repeats, "runs": []}
  for members in args.members.split(","):
    flags = [a for a in sys.argv[1:] if not a.startswith("--members")]
    done = subprocess.run(
      [sys.executable, __file__, "--worker", f"--members={members}", *flags],
      capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    if done.returncode:
      raise SystemExit(f"the {members}-member process failed:\n{done.stderr[-3000:]}")
    record["runs"].append(json.loads(done.stdout.strip().splitlines()[-1]))
  out.mkdir(parents=True, exist_ok=True)
  (out / f"{args.name}.json").write_text(json.dumps(record, indent=1) + "\n")
  (out / f"{args.name}.md").write_text(render(record))
  print(render(record))


if __name__ == "__main__":
  main()
