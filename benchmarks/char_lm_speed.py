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

``--config=gpu`` times nanoGPT's GPU configuration instead (``config/train_shakespeare_char.py``:
block 256, batch 64, 6 layers, 6 heads, width 384, dropout 0.2) on the first GPU: gelujax in
``--dtype`` (bfloat16 by default there: mixed precision, as nanoGPT's autocast) and nanoGPT as
its ``train.py`` runs on a GPU (bfloat16 autocast, ``torch.compile``; eager where compiling
fails, and the record says so). Each row also gives the **model FLOPs utilisation**: nanoGPT's
own estimate (``GPT.estimate_mfu``: 6N + 12·L·H·Q·T FLOPs a token, N the parameters less the
position table) at the measured tokens per second, over the device's peak dense bfloat16 rate
(`PEAK_BF16`, the vendor's figure; nanoGPT divides by the A100's 312 TFLOP/s).

Run: python benchmarks/char_lm_speed.py --nanogpt=PATH --data_dir=PATH
     python benchmarks/char_lm_speed.py --config=gpu --members=1,4 --nanogpt=PATH --data_dir=PATH
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

# nanoGPT's two shakespeare_char configurations: gelujax's task (field overrides of char_lm) and
# nanoGPT's GPTConfig at the same sizes.
CONFIGS = {
  "cpu": {
    "task": "char_lm",
    "gpt": {"block_size": 64, "n_layer": 4, "n_head": 4, "n_embd": 128, "dropout": 0.0},
    "batch": 12,
  },
  "gpu": {
    "task": 'char_lm(model="char_gpt_gpu", data_options={"block_size": 256}, batch_size=64, '
    "dropout=0.2, epochs=10)",
    "gpt": {"block_size": 256, "n_layer": 6, "n_head": 6, "n_embd": 384, "dropout": 0.2},
    "batch": 64,
  },
}
# Peak dense bfloat16 FLOP/s by JAX's device_kind (the vendor's data sheet: the H100 and H200
# SXM's 1,979 TFLOP/s "with sparsity" halved; the A100's 312, nanoGPT's denominator).
PEAK_BF16 = {
  "NVIDIA H200": 989.5e12,
  "NVIDIA H100 80GB HBM3": 989.5e12,
  "NVIDIA A100-SXM4-80GB": 312e12,
}


def flops_per_token(parameters: int, layers: int, heads: int, width: int, block: int) -> int:
  """nanoGPT's ``estimate_mfu`` count (PaLM's appendix B): 6 FLOPs a parameter a token (forward
  and backward) and 12·L·H·Q·T for attention's two products, Q = width / heads, T the block;
  ``parameters`` without the position table, as its ``get_num_params`` counts them."""
  return 6 * parameters + 12 * layers * heads * (width // heads) * block


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


def time_nanogpt(path: str, splits, steps: int, config: dict, compile_: bool):
  """nanoGPT's GPT at ``config``, trained ``steps`` steps a call: on the first GPU where there
  is one (bfloat16 autocast, compiled when ``compile_``, as its train.py), else the CPU."""
  import contextlib

  import numpy as np
  import torch

  sys.path.insert(0, path)
  from model import GPT, GPTConfig  # nanoGPT's own file, read from its checkout

  torch.manual_seed(0)
  device = "cuda" if torch.cuda.is_available() else "cpu"
  gpt = config["gpt"]
  model = GPT(GPTConfig(vocab_size=65, bias=False, **gpt)).to(device)
  optimizer = model.configure_optimizers(0.1, 1e-3, (0.9, 0.99), device)
  step_model = torch.compile(model) if compile_ else model
  autocast = (
    torch.autocast(device_type="cuda", dtype=torch.bfloat16)
    if device == "cuda"
    else contextlib.nullcontext()
  )
  block, size = gpt["block_size"], config["batch"]
  inputs = splits["train"]["inputs"]
  text = np.concatenate([inputs[:, 0], inputs[-1, 1:]]).astype(np.int64)
  rng = np.random.default_rng(0)

  def batch():
    starts = rng.integers(0, len(text) - block - 1, size)
    x = np.stack([text[s : s + block] for s in starts])
    y = np.stack([text[s + 1 : s + block + 1] for s in starts])
    return torch.from_numpy(x).to(device), torch.from_numpy(y).to(device)

  def run() -> float:
    begin = time.perf_counter()
    for _ in range(steps):
      x, y = batch()
      with autocast:
        _, loss = step_model(x, y)
      loss.backward()
      torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
      optimizer.step()
      optimizer.zero_grad(set_to_none=True)
    if device == "cuda":
      torch.cuda.synchronize()
    return time.perf_counter() - begin

  found = {
    "nanogpt_parameters": sum(p.numel() for p in model.parameters()),
    "nanogpt_flops_per_token": flops_per_token(
      model.get_num_params(), gpt["n_layer"], gpt["n_head"], gpt["n_embd"], block
    ),
    "torch_threads": torch.get_num_threads(),
    "torch_device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
    "torch_compiled": compile_,
  }
  return run, found


def worker(args) -> dict:
  """One process: the CPU split for ``args.members`` (on a CPU), both frameworks timed
  alternately."""
  from gelujax import host

  devices = host.configure_cpu("auto", args.members)
  import jax

  from gelujax import tasks

  config = CONFIGS[args.config]
  spec = tasks.get(config["task"]).replace(dtype=args.dtype)
  splits = spec.load_data(args.data_dir)
  jax_run, jax_params, program = time_gelujax(spec, splits, args.members, args.steps)
  runs = {"gelujax": jax_run}
  device = jax.devices()[0]
  gpt = config["gpt"]
  found = {
    "members": args.members, "cpu_devices": devices, "gelujax_parameters": jax_params,
    "dtype": args.dtype, "device_kind": device.device_kind, "platform": device.platform,
    "gelujax_flops_per_token": flops_per_token(
      jax_params - gpt["block_size"] * gpt["n_embd"], gpt["n_layer"], gpt["n_head"],
      gpt["n_embd"], gpt["block_size"],
    ),
  }  # fmt: skip
  found["layout"] = engine_layout(program)
  if args.nanogpt:
    compile_ = device.platform == "gpu"
    torch_run, torch_found = time_nanogpt(args.nanogpt, splits, args.steps, config, compile_)
    try:
      torch_run()  # warm up: compile, allocate
    except Exception as e:  # torch.compile missing a compiler here: nanoGPT's --compile=False
      if not compile_:
        raise
      print(f"torch.compile failed ({type(e).__name__}: {e}); nanoGPT eager", file=sys.stderr)
      torch_run, torch_found = time_nanogpt(args.nanogpt, splits, args.steps, config, False)
      torch_found["torch_compile_error"] = f"{type(e).__name__}: {str(e)[:300]}"
      torch_run()
    runs["nanogpt"] = torch_run
    found.update(torch_found)
  jax_run()  # warm up: compile, allocate
  seconds = {name: [] for name in runs}
  for _ in range(args.repeats):
    for name, run in runs.items():
      seconds[name].append(run())
  tokens = args.steps * config["batch"] * gpt["block_size"]
  peak = PEAK_BF16.get(device.device_kind) if device.platform == "gpu" else None
  for name, times in seconds.items():
    members = args.members if name == "gelujax" else 1
    found[f"{name}_seconds"] = times
    rate = members * tokens / statistics.median(times)
    found[f"{name}_tokens_per_second"] = rate
    if peak:
      found[f"{name}_mfu"] = rate * found[f"{name}_flops_per_token"] / peak
  found["peak_bf16_flops"] = peak
  return found


def engine_layout(program) -> str:
  from gelujax.engine.mesh import describe_layout

  return describe_layout(program.num_members, program.mesh, program.strategy)


def render(record: dict) -> str:
  config = CONFIGS[record.get("config", "cpu")]
  gpt = config["gpt"]
  mfu = any("gelujax_mfu" in run for run in record["runs"])
  lines = reports.header("Character-level GPT: gelujax against nanoGPT's PyTorch model", record)
  lines += [
    f"nanoGPT's {record.get('config', 'cpu').upper()} configuration (block {gpt['block_size']}, "
    f"batch {config['batch']}, {gpt['n_layer']} layers, {gpt['n_head']} heads, width "
    f"{gpt['n_embd']}, dropout {gpt['dropout']:g}). {record['steps']} steps a timing, "
    f"{record['repeats']} timings each, the frameworks alternating in each process; medians. "
    f"Tokens: windows x characters a step ({config['batch']} x {gpt['block_size']}), times the "
    "members.",
    "",
    "| process | layout | gelujax tokens/s | gelujax per member | nanoGPT tokens/s | ratio |"
    + (" gelujax MFU | nanoGPT MFU |" if mfu else ""),
    "|---|---|---|---|---|---|" + ("---|---|" if mfu else ""),
  ]
  first = record["runs"][0]
  for run in record["runs"]:
    ours = run["gelujax_tokens_per_second"]
    theirs = run.get("nanogpt_tokens_per_second")
    per = ours / run["members"]
    # On a GPU nanoGPT is timed in the first process only; the other rows divide by that.
    against = theirs or (first.get("nanogpt_tokens_per_second") if "dtype" in run else None)
    ratio = "–"
    if against:
      ratio = f"{per / against:.2f}x" + ("" if theirs else " (first row's nanoGPT)")
    dtype = f", {run['dtype']}" if "dtype" in run else ""
    cells = [
      f"{run['members']} member{'s' * (run['members'] > 1)}{dtype}", run["layout"],
      f"{ours:,.0f}", f"{per:,.0f}", f"{theirs:,.0f}" if theirs else "–", ratio,
    ]  # fmt: skip
    if mfu:
      cells += [f"{100 * run[k]:.1f}%" if k in run else "–" for k in ("gelujax_mfu", "nanogpt_mfu")]
    lines.append("| " + " | ".join(cells) + " |")
  lines += [
    "",
    f"Parameters: gelujax {first['gelujax_parameters']:,} (Flax's biases kept), nanoGPT "
    f"{first.get('nanogpt_parameters', 0):,} (no biases). Ratio: gelujax's tokens per second "
    "per member over nanoGPT's, in the same process.",
  ]
  if mfu:
    compiled = (
      "compiled (`torch.compile`)"
      if first.get("torch_compiled")
      else f"eager ({first.get('torch_compile_error', 'not compiled')})"
    )
    lines += [
      "",
      f"MFU: nanoGPT's own estimate, {first['gelujax_flops_per_token']:,} FLOPs a token for "
      f"gelujax's parameters and {first.get('nanogpt_flops_per_token', 0):,} for nanoGPT's "
      "(6N + 12·L·H·Q·T, N without the position table), at the measured tokens per second, "
      f"over {first['peak_bf16_flops'] / 1e12:,.1f} TFLOP/s, the {first['device_kind']}'s "
      "peak dense bfloat16 rate (the vendor's figure; nanoGPT divides by the A100's 312). It "
      "counts the model's products only: gelujax's step also runs a forward pass without "
      "dropout to log the training loss, not counted. nanoGPT ran in bfloat16 autocast, "
      f"{compiled}, on {first.get('torch_device', '?')}.",
    ]
  return "\n".join([*lines, ""])


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--nanogpt", default=None, help="a checkout of karpathy/nanoGPT")
  parser.add_argument("--config", default="cpu", choices=sorted(CONFIGS))
  parser.add_argument("--dtype", default=None, help="gelujax's: float32 (cpu), bfloat16 (gpu)")
  parser.add_argument("--data_dir", default=None)
  parser.add_argument("--steps", type=int, default=50)
  parser.add_argument("--repeats", type=int, default=5)
  parser.add_argument("--members", default="1,2", help="grids to time, one process each")
  parser.add_argument("--name", default="char_lm_speed")
  parser.add_argument("--out", default=str(RESULTS_DIR))
  parser.add_argument("--render", action="store_true")
  parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
  args = parser.parse_args()
  args.dtype = args.dtype or ("bfloat16" if args.config == "gpu" else "float32")
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
  record = {**reports.stamp(command), "config": args.config, "steps": args.steps}
  record.update(repeats=args.repeats, runs=[])
  path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
  for i, members in enumerate(args.members.split(",")):
    flags = [a for a in sys.argv[1:] if not a.startswith("--members")]
    if args.config == "gpu" and i:  # a GPU is not shared by a split: nanoGPT's first row stands
      flags = [a for a in flags if not a.startswith("--nanogpt")]
    done = subprocess.run(
      [sys.executable, __file__, "--worker", f"--members={members}", *flags],
      capture_output=True, text=True, env={**os.environ, "PYTHONPATH": path},
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
