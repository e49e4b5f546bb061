"""README and docs/ agree with the code: the parameter table is the generated one, every relative
link resolves, and the README stays a one-page user guide."""
import re
from pathlib import Path

import pytest

from amg_fast.models import available_models, parameter_table_markdown

ROOT = Path(__file__).parents[1]
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]
BEGIN, END = "<!-- parameter-table:begin -->", "<!-- parameter-table:end -->"
README_MAX_LINES = 250
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    """GitHub's heading anchors of a Markdown page: lower case, punctuation dropped, spaces -> '-'."""
    headings = re.findall(r"^#+ (.+)$", page.read_text(), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def marked_block(text: str) -> str:
    assert text.count(BEGIN) == 1 and text.count(END) == 1, "expected one parameter-table marker pair"
    return text.split(BEGIN, 1)[1].split(END, 1)[0].lstrip("\n")


def test_parameter_table_in_docs_is_the_generated_one():
    """docs/models.md holds exactly the output of scripts/param_table.py (regenerate it after
    changing a model)."""
    block = marked_block((ROOT / "docs" / "models.md").read_text())
    assert block == parameter_table_markdown()


def test_parameter_table_lists_every_model():
    table = parameter_table_markdown()
    listed = re.findall(r"^\| `(\w+)` \| [\d,]+ \| [\d,]+ \| [\d,]+ \|$", table, flags=re.M)
    assert sorted(listed) == available_models()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    """Every relative link (and image) points to a file or folder inside the repository that
    exists, and an anchor into a Markdown page names one of its headings; web links are not checked."""
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page.resolve()
        if not dest.is_relative_to(ROOT.resolve()) or not dest.exists():
            broken.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(target)
    assert not broken, f"{page.name}: broken links {broken}"


def test_readme_is_one_page():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines (at most {README_MAX_LINES})"


TOP_LEVEL = ("amg_fast", "bench", "docs", "kernels", "results", "scripts", "tests", ".ci")
PATH = re.compile(r"(?<![\w./~-])((?:" + "|".join(re.escape(t) for t in TOP_LEVEL) + r")/[\w./<>*{}:+-]*)")


def named_paths(text: str) -> set[str]:
    """Repository paths a page names in its text (code spans included): anything starting with a
    top-level folder, e.g. `scripts/train.py`, bench/probe_ffn.py, results/gpu/x/; a test id's
    `::name` is dropped; placeholders (<op>, *, {a,b}) are skipped."""
    paths = set()
    for match in PATH.findall(text):
        path = match.split("::")[0].rstrip(".,:;")
        if not any(ch in path for ch in "<>*{}"):
            paths.add(path)
    return paths


def test_named_paths_finds_what_a_page_names():
    text = ("run `scripts/train.py`, see bench/probe_ffn.py. and `tests/train/test_x.py::test_y`; "
            "not amg_fast/ops/<op>.py, not fourierflow/modules/x.py, not ~/.cache/amg_fast/x.h5")
    assert named_paths(text) == {"scripts/train.py", "bench/probe_ffn.py", "tests/train/test_x.py"}


CURRENT_PAGES = [p for p in PAGES if p.name != "CHANGELOG.md" and "notes" not in p.relative_to(ROOT).parts]


@pytest.mark.parametrize("page", CURRENT_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_named_files_exist(page):
    """Every file or folder of the repository that README.md or a docs/ page names exists (the
    CHANGELOG and docs/notes/ are history: they name files as they were)."""
    missing = sorted(p for p in named_paths(page.read_text()) if not (ROOT / p).exists())
    assert not missing, f"{page.name} names files that do not exist: {missing}"
