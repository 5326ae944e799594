"""The README and docs/ are part of the product: the README's first screen, its two opening commands and its
length; the code map in docs/architecture.md; the schema tables and command reference in docs/ must match the
code; every link lands."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from orchestrator.cli import build_parser
from orchestrator.core.measured.records import Kind
from orchestrator.core.planning.spec import schema_markdown

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()
DOCS = {p.name: p.read_text() for p in (REPO / "docs").glob("*.md")}
COMMANDS = DOCS["commands.md"]
ARCHITECTURE = DOCS["architecture.md"]
README_MAX_LINES = 150      # read in under five minutes; the rest lives in docs/
PROSE_MAX_CHARS = 120       # a prose line; tables and code blocks are exempt
# CI (.ci/run) and scripts/ run these two, so they stay the README's first two commands, word for word.
SETUP_AND_SWEEP = "bash scripts/setup.sh && .venv/bin/orch sweep sweeps/retinanet.yaml"
SETUP_AND_TEST = "bash scripts/setup.sh --dev && .venv/bin/python -m pytest -m \"not slow\""
DURATION = re.compile(r"\d+\s*(?:to\s*\d+\s*)?(?:s|seconds?|min|minutes?|h|hours?)\b")


def prose_lines(markdown: str) -> list[tuple[int, str]]:
    """(line number, text) of every line outside fenced code blocks that is not a table row."""
    lines, fenced = [], False
    for number, line in enumerate(markdown.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced and not line.lstrip().startswith("|"):
            lines.append((number, line))
    return lines


def test_readme_opens_with_exactly_the_two_commands_and_ci_runs_the_test_one():
    blocks = re.findall(r"```bash\n(.*?)\n```", README, flags=re.S)
    assert blocks[:2] == [SETUP_AND_SWEEP, SETUP_AND_TEST]
    before_first = README.split("```bash\n" + SETUP_AND_SWEEP)[0]
    assert "```" not in before_first, "a code block comes before the README's first command"
    ci = (REPO / ".ci" / "run").read_text()
    assert blocks[1] in ci and "\n.venv/bin/python -m pytest -m slow\n" in ci     # the two tiers: every test


def test_readme_first_screen_says_what_who_and_not_for_before_the_commands():
    """A one-line tagline under the title, then what orch does, who it is for and what it is not for (CPU-only,
    data-parallel; evidence from small machines; the cluster recipes checked against stand-ins), all before
    the first command."""
    first_screen = README.split("```bash")[0]
    lines = [line for line in first_screen.splitlines() if line.strip()]
    assert lines[0] == "# orch"
    assert lines[1].startswith("**") and lines[1].endswith("**") and len(lines[1]) <= PROSE_MAX_CHARS, \
        "the line under the title is the tagline: one bold line"
    bullets = " ".join(first_screen.split("\n- ")[1:])
    for label in ("**What it does:**", "**Who it is for:**", "**What it is not for:**"):
        assert label in first_screen, f"the first screen has no {label} line"
    words = " ".join(bullets.split())
    for said in ("CPU-only", "data-parallel", "small machines", "stand-ins", "schemas"):
        assert said in words, f"the not-for line does not say {said!r}"


def test_readme_labels_its_two_commands_with_what_they_do_and_how_long():
    for command, does in ((SETUP_AND_SWEEP, "default sweep"), (SETUP_AND_TEST, "tests")):
        label = README.split("```bash\n" + command)[0].rstrip().split("\n\n")[-1]
        label = " ".join(label.split())
        assert does in label, f"the paragraph before {command!r} does not say what it does: {label!r}"
        assert DURATION.search(label), f"the paragraph before {command!r} does not say how long it takes: {label!r}"


def test_readme_is_short_and_its_prose_lines_are_narrow():
    assert README.count("\n") < README_MAX_LINES
    wide = [f"README.md:{n}: {len(line)} chars" for n, line in prose_lines(README) if len(line) > PROSE_MAX_CHARS]
    assert wide == []


def test_schema_tables_are_generated_from_the_spec_dataclasses():
    page = DOCS["sweep-files.md"]
    block = page.split("<!-- schema:begin")[1].split("-->", 1)[1].split("<!-- schema:end -->")[0]
    assert block.strip() == schema_markdown().strip(), \
        "docs/sweep-files.md schema is stale: paste orchestrator.core.planning.spec.schema_markdown() between the markers"


def test_every_subcommand_and_option_is_documented():
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    every = COMMANDS.split("\n## Every command\n")[1].split("\n## ")[0]   # -v, -q: the options of every command
    for name, command in sub.choices.items():
        assert f"## `orch {name}" in COMMANDS, f"no docs/commands.md section for orch {name}"
        section = COMMANDS.split(f"## `orch {name}")[1].split("\n## ")[0]
        for action in command._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help"):
                    assert f"`{flag}" in section or f"[{flag}" in section or f"`{flag}`" in every, \
                        f"orch {name} {flag} is not documented"


def test_every_shipped_sweep_and_topology_is_mentioned():
    everything = README + "".join(DOCS.values())
    for path in list((REPO / "sweeps").glob("*.yaml")) + list((REPO / "sweeps" / "topologies").glob("*.yaml")):
        assert path.name in everything, f"{path.name} is mentioned neither in the README nor in docs/"


def code_map_names(text: str) -> set[str]:
    """Every module a Code map line names: a backticked path ending in .py, or a backticked file name resolved
    against the backticked folders (ending in /) on the same line."""
    names = set()
    for line in text.splitlines():
        tokens = re.findall(r"`([^`]+)`", line)
        folders = [t for t in tokens if t.endswith("/")]
        for token in (t for t in tokens if t.endswith(".py")):
            if "/" in token:
                names.add(token)
                continue
            found = [f + token for f in folders if (REPO / f / token).is_file()]
            assert found, f"Code map: {token!r} is in none of the folders on its line: {line[:100]}"
            names.update(found)
    return names


def test_code_map_names_every_module_and_nothing_else():
    code_map = ARCHITECTURE.split("\n## Code map\n")[1].split("\n## ")[0]
    named = code_map_names(code_map)
    # One line names the trial kinds' modules by their rule (`orchestrator/run/driver/kinds/<kind>.py`, one per
    # records.Kind value), so that a new kind is a new module and a new value, and no third edit here.
    rule = "orchestrator/run/driver/kinds/<kind>.py"
    if rule in named:
        named = (named - {rule}) | {f"orchestrator/run/driver/kinds/{kind}.py" for kind in Kind}
    modules = {str(p.relative_to(REPO)) for top in ("orch", "orchestrator", "workloads") for p in (REPO / top).rglob("*.py")
               if p.stat().st_size > 0 and "__pycache__" not in p.parts}
    assert sorted(modules - named) == [], "modules docs/architecture.md's Code map does not name"
    assert sorted(n for n in named if not (REPO / n).is_file()) == [], "Code map names that are not in the tree"


def test_links_between_pages_resolve():
    pages = {"README.md": README, **{f"docs/{name}": text for name, text in DOCS.items()}}
    for page, text in pages.items():
        for target in re.findall(r"\]\(([^)#\s]+\.md)(?:#[^)]*)?\)", text):
            if target.startswith("http"):
                continue
            assert (REPO / page).parent.joinpath(target).resolve().is_file(), f"{page}: broken link to {target}"


def github_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped but for '-' and '_', spaces
    as '-', a repeated slug numbered -1, -2, … (code spans keep their text, fenced code is not a heading)."""
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        match = None if fenced else re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", match.group(2))          # a link's text only
        slug = re.sub(r"[^\w\- ]", "", text.replace("`", "").lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors | set(re.findall(r'<a (?:id|name)="([^"]+)"', markdown))     # anchors set by hand


def markdown_pages() -> dict[Path, str]:
    """Every Markdown page a reader follows links through: the README, the changelog, docs/, the READMEs under
    results/, examples/, clusters/ and benchmarks/, and the ledger's history."""
    pages = [REPO / "README.md", REPO / "CHANGELOG.md", *(REPO / "docs").glob("*.md")]
    for top in ("results", "examples", "clusters", "benchmarks"):
        pages += [p for p in (REPO / top).rglob("*.md") if p.name == "README.md"]
    pages += [p for p in [REPO / "benchmarks" / "ledger" / "history.md"] if p.is_file()]
    return {p: p.read_text(encoding="utf-8") for p in pages}


def test_every_link_lands_on_a_file_and_an_anchor_that_exist():
    """A link made from an older heading (`#orch-profile-sweep---layout-rxtxb---out-dir`) lands on no anchor:
    every relative link's file must exist, and its #anchor must be one of the target page's headings."""
    broken = []
    for page, text in markdown_pages().items():
        for target, anchor in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)", text):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            path = (page.parent / target).resolve() if target else page
            where = f"{page.relative_to(REPO)} → {target}{'#' + anchor if anchor else ''}"
            if not path.exists():
                broken.append(f"{where}: no such file")
            elif anchor and path.suffix == ".md" and anchor not in github_anchors(path.read_text(encoding="utf-8")):
                broken.append(f"{where}: no such heading")
    assert broken == [], "\n".join(broken)
