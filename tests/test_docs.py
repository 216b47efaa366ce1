"""The documentation against the repository: docs/layout.md names every module, the README
links every docs page and stays a landing page, every relative link leads somewhere, and every
code name, file and folder a page, a result or a docstring cites exists."""

import dataclasses
import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_MAX_LINES = 200
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def pages() -> list[Path]:
  return sorted(DOCS.glob("*.md"))


def fenced_out(text: str) -> str:
  """The text less its fenced code blocks."""
  return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def prose(text: str) -> str:
  """The text less its code, fenced and inline, where a link is only text."""
  return re.sub(r"`[^`\n]*`", "", fenced_out(text))


def links(path: Path) -> list[str]:
  """The relative links of a Markdown file (web and mail addresses left out)."""
  found = LINK.findall(prose(path.read_text()))
  return [link for link in found if not re.match(r"[a-z][a-z0-9+.-]*:", link)]


def slug(heading: str) -> str:
  """A heading's anchor as GitHub writes it: lowercase, punctuation dropped, spaces to '-'."""
  text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
  return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
  headings = re.findall(r"^#+ (.+)$", fenced_out(path.read_text()), flags=re.M)
  return {slug(heading) for heading in headings}


def test_the_layout_names_every_module():
  text = (DOCS / "layout.md").read_text()
  named = set(re.findall(r"`([A-Za-z_]+)/?`", text))
  modules = {p.stem for p in (ROOT / "gelujax").rglob("*.py") if p.stem != "__init__"}
  missing = sorted(modules - named)
  assert not missing, f"docs/layout.md names no module {missing}"
  for package in ("engine", "study"):
    assert f"`{package}/`" in text or f"`gelujax/{package}/`" in text


def test_the_readme_links_every_docs_page():
  linked = {(ROOT / link.split("#")[0]).resolve() for link in links(README) if "#" != link[0]}
  unlinked = [p.name for p in pages() if p.resolve() not in linked]
  assert pages(), "docs/ holds no page"
  assert not unlinked, f"README.md links no docs page {unlinked}"


def test_every_relative_link_leads_to_a_file_and_a_heading():
  broken = []
  for path in [README, ROOT / "WORKSPACE.md", *pages()]:
    for link in links(path):
      target, _, anchor = link.partition("#")
      file = (path.parent / target).resolve() if target else path
      where = f"{path.relative_to(ROOT)}: {link}"
      if not file.exists():
        broken.append(f"{where} (no such file)")
      elif anchor and file.suffix == ".md" and anchor not in anchors(file):
        broken.append(f"{where} (no such heading)")
  assert not broken, "broken links:\n" + "\n".join(broken)


def test_the_readme_is_a_landing_page():
  lines = len(README.read_text().splitlines())
  assert lines <= README_MAX_LINES, (
    f"README.md has {lines} lines, more than {README_MAX_LINES}: move the detail to docs/"
  )


# How docs/extending.md's walk names its hops: the short names it uses, and their modules.
WALK_NAMES = {
  "_flags": "gelujax.cli._flags",
  "TaskSpec": "gelujax.tasks.TaskSpec",
  "tasks": "gelujax.tasks",
  "linen": "gelujax.linen",
  "specs": "gelujax.specs",
  "engine": "gelujax.engine",
  "Program": "gelujax.engine.mesh.Program",
  "mesh": "gelujax.engine.mesh",
  "step": "gelujax.engine.step",
  "Members": "gelujax.members.Members",
}


def walk_hops(flag: str) -> list[tuple[int, str]]:
  """The numbered hops ``N `name` `` of ``flag``'s walk in docs/extending.md."""
  text = (DOCS / "extending.md").read_text()
  section = text[text.index("## How a flag reaches the step") :]
  item = re.search(rf"^- `{flag}`.*?(?=^- |\Z)", section, flags=re.S | re.M)
  assert item, f"docs/extending.md walks no {flag}"
  return [(int(n), name) for n, name in re.findall(r"(\d+)\s+`([\w.]+)`", item[0])]


def test_the_walk_of_a_flag_names_public_functions_in_order():
  for flag in ("--activation", "--learning_rates"):
    hops = walk_hops(flag)
    assert [n for n, _ in hops] == list(range(1, len(hops) + 1)), (flag, hops)
    for _, name in hops:
      head, *rest = name.split(".")
      target = resolve(WALK_NAMES[head])
      for attr in rest:  # AttributeError: the walk names what is not there
        target = attribute(target, attr)
      # A field may hold a function (`Program`'s jitted programs).
      assert callable(target) or isinstance(target, dataclasses.Field), name
      public = rest[-1] if rest else head
      assert head == "_flags" or not public.startswith("_"), name
  assert (
    walk_hops("--activation")[-1][1] == walk_hops("--learning_rates")[-1][1] == "step.train_step"
  )


def test_the_package_cites_nothing_a_user_of_the_wheel_cannot_read():
  """The installed package's docstrings, help and generated READMEs cite no design notes,
  workspace pages or issue numbers: the wheel holds none of them."""
  cited = re.compile(r"DESIGN\.md|WORKSPACE\.md|STYLE\.md|\bissues? \d+")
  found = [
    f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
    for path in sorted((ROOT / "gelujax").rglob("*.py"))
    for number, line in enumerate(path.read_text().splitlines(), 1)
    if cited.search(line)
  ]
  assert found == []


# What a page or a docstring cites in backticks: a code name (`gelujax.study.forms.judge`, or
# `gelujax.data.load(name)`), a file (`gelujax/study/forms.py`) or a folder (`gelujax/study/`).
CITED = {
  "name": re.compile(r"`(gelujax(?:\.[A-Za-z_][A-Za-z0-9_]*)+)[`(]"),
  "file": re.compile(r"`(gelujax/[A-Za-z0-9_/]+\.py)`"),
  "folder": re.compile(r"`(gelujax(?:/[A-Za-z0-9_]+)+)/`"),
}


def resolve(dotted: str) -> object:
  """What a dotted name names: its longest importable module, then attributes down from it; a
  dataclass's field without a class attribute (no default) is its `dataclasses.Field`.

  Raises:
    AttributeError: the name names nothing.
    ModuleNotFoundError: a module it imports lacks a dependency (not a name that is gone).
  """
  parts = dotted.split(".")
  for cut in range(len(parts), 0, -1):
    module = ".".join(parts[:cut])
    try:
      target = importlib.import_module(module)
    except ModuleNotFoundError as e:
      if e.name is None or not module.startswith(e.name):
        raise
      continue
    for name in parts[cut:]:
      target = attribute(target, name)
    return target
  raise AttributeError(f"{dotted}: no module of it imports")


def attribute(target: object, name: str) -> object:
  """``target``'s attribute ``name``; a dataclass's field without a class attribute (no default)
  is its `dataclasses.Field`."""
  if dataclasses.is_dataclass(target) and not hasattr(target, name):
    fields = {f.name: f for f in dataclasses.fields(target)}
    if name in fields:
      return fields[name]
  return getattr(target, name)


def exists(kind: str, cited: str) -> bool:
  """Whether what a text cites (:data:`CITED`'s ``kind``) is there."""
  if kind != "name":
    return (ROOT / cited).is_file() if kind == "file" else (ROOT / cited).is_dir()
  try:
    resolve(cited)
  except AttributeError:
    return False
  return True


def test_every_cited_code_name_file_and_folder_exists():
  """A README, a page, a result or a docstring that cites `gelujax.study.forms.judge`,
  `gelujax/study/forms.py` or `gelujax/cli/` sends a reader to code: a refactor that moves or
  drops it leaves the text pointing at nothing."""
  texts = [
    README, ROOT / "WORKSPACE.md", *pages(), ROOT / "results" / "README.md",
    *sorted(ROOT.glob("results/*/*/README.md")), *sorted((ROOT / "gelujax").rglob("*.py")),
  ]  # fmt: skip
  count, gone = 0, {}
  for text in texts:
    for kind, pattern in CITED.items():
      for cited in set(pattern.findall(text.read_text())):
        count += 1
        if not exists(kind, cited):
          gone.setdefault(cited, []).append(str(text.relative_to(ROOT)))
  assert count > 500  # the texts do cite code
  assert not gone, gone
