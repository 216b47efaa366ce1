"""README's layout section against the package: every module is named, none that is gone."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def layout_text():
  text = (ROOT / "README.md").read_text()
  return text.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]


def test_the_layout_names_every_module():
  text = layout_text()
  named = set(re.findall(r"`([A-Za-z_]+)/?`", text))
  modules = {p.stem for p in (ROOT / "gelujax").rglob("*.py") if p.stem != "__init__"}
  missing = sorted(modules - named)
  assert not missing, f"README's Layout names no module {missing}"
  for package in ("engine", "study"):
    assert f"`{package}/`" in text or f"`gelujax/{package}/`" in text
