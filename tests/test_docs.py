"""The documentation against the repository: docs/layout.md names every module, the README
links every docs page and stays a landing page, and every relative link leads somewhere."""

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
