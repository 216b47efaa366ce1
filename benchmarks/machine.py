"""What every benchmark report says about the machine it ran on."""

from __future__ import annotations

import os
import platform


def describe_machine() -> str:
  """The CPU model and the number of cores this process sees."""
  cpu = platform.processor() or platform.machine()
  try:
    with open("/proc/cpuinfo") as f:
      cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
  except (OSError, StopIteration):
    pass
  return f"{cpu}, {os.cpu_count()} cores visible"
