"""gelujax.devices: how a fresh process splits the CPU host, as each entry point starts it.

`configure_cpu` must run before JAX starts its backends, so each case it accepts runs in a new
Python process and reports what JAX then sees; the values it refuses are checked here.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys

import jax
import pytest

from gelujax import devices

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROBE = """
import json, os, sys
from gelujax import devices
try:
  count = devices.configure_cpu(sys.argv[1], int(sys.argv[2]))
except ValueError as error:
  print(json.dumps({"error": str(error)}))
  raise SystemExit(0)
import jax
print(json.dumps({
  "returned": count, "devices": jax.device_count(), "xla_flags": os.environ.get("XLA_FLAGS", "")
}))
"""


def configure(cpu_devices: str, members: int, xla_flags: str | None = None) -> dict:
  env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
  env.update(PYTHONPATH=ROOT, JAX_PLATFORMS="cpu")
  if xla_flags is not None:
    env["XLA_FLAGS"] = xla_flags
  done = subprocess.run(
    [sys.executable, "-c", PROBE, cpu_devices, str(members)],
    env=env, capture_output=True, text=True, timeout=120, check=True,
  )  # fmt: skip
  return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
  ("members", "cores", "expected"), [(1, 2, 1), (15, 2, 2), (3, 8, 3), (0, 4, 1), (100, 1, 1)]
)
def test_auto_gives_a_grid_one_device_per_core_and_a_member_one_device(members, cores, expected):
  assert devices.choose_cpu_devices(members, cores) == expected


def test_several_devices_run_single_threaded_kernels_on_xlas_own_dots():
  seen = configure("3", 15)
  assert seen["returned"] == seen["devices"] == 3
  assert seen["xla_flags"].split() == [
    "--xla_cpu_multi_thread_eigen=false",
    "--xla_cpu_experimental_ynn_fusion_type=",
  ]


def test_one_device_keeps_multithreaded_kernels():
  seen = configure("1", 1)
  assert seen["devices"] == 1
  assert seen["xla_flags"].split() == ["--xla_cpu_experimental_ynn_fusion_type="]


def test_the_users_own_xla_flags_win():
  mine = (
    "--xla_force_host_platform_device_count=3 --xla_cpu_experimental_ynn_fusion_type=individual_dot"
  )
  seen = configure("auto", 1, mine)
  assert seen["returned"] == seen["devices"] == 3
  assert seen["xla_flags"].split() == [*mine.split(), "--xla_cpu_multi_thread_eigen=false"]


@pytest.mark.parametrize("bad", ["0", "-2", "two", "1.5", ""])
def test_a_bad_device_count_is_refused_in_one_line(bad, monkeypatch):
  # Refused before JAX is asked anything, so this process (whose JAX has started) will do.
  monkeypatch.setenv("XLA_FLAGS", "")
  with pytest.raises(ValueError) as error:
    devices.configure_cpu(bad, 4)
  assert str(error.value) == (
    f"--cpu_devices {bad!r} is not valid: give 'auto' or a device count >= 1."
  )
  assert os.environ["XLA_FLAGS"] == ""  # nothing set


def test_a_count_after_jax_started_is_refused_in_one_line(monkeypatch):
  monkeypatch.setenv("XLA_FLAGS", "")
  started = len(jax.devices("cpu"))  # this process's JAX has started (or starts here)
  with pytest.raises(ValueError) as error:
    devices.configure_cpu(str(started + 1), 4)
  assert str(error.value) == (
    f"--cpu_devices {started + 1}: JAX has already started with {started} CPU devices, and the "
    "device count can only be set before the first array is made."
  )
  assert devices.configure_cpu(str(started), 4) == started  # what it has is fine


def test_describe_machine_names_the_cpu_devices_and_versions():
  import platform

  import jax

  line = devices.describe_machine()
  kinds = collections.Counter(f"{d.device_kind} ({d.platform})" for d in jax.devices())
  assert line.startswith(platform.platform() + "; CPU: ")
  assert f", {os.cpu_count()} cores; " in line
  assert "devices: " + ", ".join(f"{n} x {k}" for k, n in kinds.items()) + ";" in line
  assert line.endswith(f"jax {jax.__version__}, Python {platform.python_version()}")
