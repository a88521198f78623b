"""Every fenced code block in README.md and docs/ is checked, or says it is not.

A block's info string says what it is (docs/src/installing.md, "Building
this guide"):

- `sh`: parsed by `bash -n`; every `tributary SUBCOMMAND --flag` shown must
  be in that subcommand's `--help` (the binary at TRIBUTARY_BIN, by default
  target/debug/tributary), and every `scripts/...` or `examples/...` it runs
  must exist and name the flags passed to it;
- `python`: parsed, and every keyword passed to `tributary.Loader`,
  `tributary.Source` or `tributary.torch.IterableDataset` must be a
  parameter of the stubs (python/tributary/__init__.pyi);
- `json`: parsed;
- `text`: program output or a diagram, nothing to run;
- any language with the `illustrative` attribute (`rust,illustrative`):
  shown, not checked;
- a block that another test reads and checks is listed in TESTED_ELSEWHERE.

Any other block, an unmarked one first of all, fails. Links between the
Markdown files (and mdbook's `{{#include}}`s) must point at files and
headings that exist.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"

# Blocks that another test reads and checks: (file, the block's first line)
# -> the test, which must name the file.
TESTED_ELSEWHERE = {
    ("docs/src/elastic.md", "use std::collections::HashMap;"): "worker/src/rank/tests.rs",
}

# Keyword arguments of these calls go to tributary.Loader.
LOADER_CALLS = {"tributary.Loader", "tributary.torch.IterableDataset"}
SOURCE_CALLS = {"tributary.Source"}


def markdown_files() -> list[Path]:
    return [REPO / "README.md", *sorted(DOCS.rglob("*.md"))]


@dataclass
class Block:
    path: Path
    line: int
    info: str
    body: str

    @property
    def lang(self) -> str:
        return re.split(r"[,\s]+", self.info.strip())[0] if self.info.strip() else ""

    @property
    def attrs(self) -> set[str]:
        return set(re.split(r"[,\s]+", self.info.strip())[1:])

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"


FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")


def blocks_of(path: Path) -> list[Block]:
    blocks, lines = [], path.read_text().split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, indent, start = m["fence"], len(m["indent"]), i
        body = []
        i += 1
        while i < len(lines):
            close = FENCE.match(lines[i])
            if close and close["fence"][0] == fence[0] and len(close["fence"]) >= len(fence) \
                    and not close["info"].strip():
                break
            line = lines[i]
            body.append(line[indent:] if line[:indent].strip() == "" else line.lstrip())
            i += 1
        else:
            raise AssertionError(f"{path.relative_to(REPO)}:{start + 1}: the block never ends")
        blocks.append(Block(path, start + 1, m["info"], "\n".join(body) + "\n"))
        i += 1
    return blocks


ALL_BLOCKS = [b for f in markdown_files() for b in blocks_of(f)]


def blocks(lang: str) -> list[Block]:
    return [b for b in ALL_BLOCKS if b.lang == lang and "illustrative" not in b.attrs]


def ids(blocks: list[Block]) -> list[str]:
    return [b.where for b in blocks]


def test_the_files_have_blocks():
    assert len(ALL_BLOCKS) > 20, "the parser finds the blocks"
    for lang in ("sh", "python", "json", "text"):
        assert blocks(lang), f"some {lang} block"


@pytest.mark.parametrize("block", ALL_BLOCKS, ids=ids(ALL_BLOCKS))
def test_every_block_is_checked_or_marked(block: Block):
    key = (str(block.path.relative_to(REPO)), block.body.split("\n")[0])
    if key in TESTED_ELSEWHERE:
        test = REPO / TESTED_ELSEWHERE[key]
        assert key[0] in test.read_text(), f"{test} reads {key[0]}"
        return
    checked = {"sh", "python", "json", "text"}
    assert block.lang in checked or "illustrative" in block.attrs, (
        f"{block.where}: a ```{block.info} block that nothing checks: give it one of "
        f"{sorted(checked)} (checked here), or mark it ```{block.lang or 'LANG'},illustrative, "
        "or list it in TESTED_ELSEWHERE with the test that checks it")


# ===================================================================== json


@pytest.mark.parametrize("block", blocks("json"), ids=ids(blocks("json")))
def test_json_blocks_parse(block: Block):
    json.loads(block.body)


# =================================================================== python


@lru_cache(maxsize=None)
def stub_parameters(cls: str) -> frozenset[str]:
    tree = ast.parse((REPO / "python" / "tributary" / "__init__.pyi").read_text())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    a = item.args
                    return frozenset(p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs])
    raise AssertionError(f"no {cls}.__init__ in the stubs")


def dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{dotted(node.value)}.{node.attr}"
    return ""


@pytest.mark.parametrize("block", blocks("python"), ids=ids(blocks("python")))
def test_python_blocks_parse_and_pass_known_arguments(block: Block):
    tree = ast.parse(block.body, filename=block.where)
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
        name = dotted(call.func)
        if name in LOADER_CALLS:
            known = stub_parameters("Loader")
        elif name in SOURCE_CALLS:
            known = stub_parameters("Source")
        else:
            continue
        unknown = {k.arg for k in call.keywords if k.arg} - known
        assert not unknown, f"{block.where}: {name} takes no {sorted(unknown)}"


def test_the_python_check_sees_a_bad_keyword():
    bad = Block(REPO / "README.md", 0, "python", "tributary.Loader('x', batchsize=4)\n")
    with pytest.raises(AssertionError, match="batchsize"):
        test_python_blocks_parse_and_pass_known_arguments(bad)


# ======================================================================= sh


def tributary_bin() -> Path:
    path = Path(os.environ.get("TRIBUTARY_BIN", REPO / "target" / "debug" / "tributary"))
    if not path.exists():
        pytest.fail(f"no tributary binary at {path}: run `cargo build -p tributary-cli` "
                    "or set TRIBUTARY_BIN")
    return path


@lru_cache(maxsize=None)
def tributary_help(command: tuple[str, ...]) -> str:
    proc = subprocess.run([str(tributary_bin()), *command, "--help"], capture_output=True,
                          text=True, timeout=30, env={"PATH": os.environ.get("PATH", "")})
    assert proc.returncode == 0, f"tributary {' '.join(command)} --help: {proc.stderr}"
    return proc.stdout


def subcommands(command: tuple[str, ...]) -> set[str]:
    """The subcommands `tributary COMMAND --help` lists under `Commands:`."""
    m = re.search(r"^Commands:\n(.*?)(?:\n\S|\Z)", tributary_help(command), re.M | re.S)
    return set(re.findall(r"^  ([a-z][a-z0-9-]*)", m[1], re.M)) if m else set()


def logical_lines(script: str) -> list[str]:
    """Lines with backslash continuations joined; a commented-out command
    (`#    tributary pack ...`) counts as a command."""
    kept = []
    for line in script.split("\n"):
        uncommented = re.sub(r"^\s*#\s*", "", line)
        if uncommented != line and not re.match(r"[A-Z_]+=|tributary |scripts/|examples/",
                                                uncommented):
            continue
        kept.append(uncommented)
    return re.sub(r"\\\n\s*", " ", "\n".join(kept)).split("\n")


def words(line: str) -> list[str]:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    return list(lexer)


OPERATORS = {"|", "||", "&", "&&", ";", ">", ">>", "<", "(", ")"}


def commands(line: str) -> list[list[str]]:
    out, current = [], []
    for word in words(line):
        if word in OPERATORS:
            out.append(current)
            current = []
        else:
            current.append(word)
    out.append(current)
    return [c for c in out if c]


def flags(args: list[str]) -> list[str]:
    return [a.split("=")[0] for a in args if a.startswith("--") and a != "--"]


def check_command(where: str, argv: list[str]) -> int:
    """Checks one simple command; returns how many tributary flags it checked."""
    while argv and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", argv[0]):
        argv = argv[1:]
    if not argv:
        return 0
    if argv[0] == "tributary":
        command: tuple[str, ...] = ()
        rest = argv[1:]
        while rest and rest[0] in subcommands(command):
            command, rest = (*command, rest[0]), rest[1:]
        help_text = tributary_help(command)
        for flag in flags(rest):
            assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", help_text), (
                f"{where}: `tributary {' '.join(command)}` has no {flag}")
        return len(flags(rest))
    for i, word in enumerate(argv):
        if re.match(r"^(scripts|examples|bench)/[\w./-]+$", word):
            script = REPO / word
            assert script.is_file(), f"{where}: no {word}"
            text = script.read_text()
            for flag in flags(argv[i + 1:]):
                assert flag in text, f"{where}: {word} takes no {flag}"
    return 0


@pytest.mark.parametrize("block", blocks("sh"), ids=ids(blocks("sh")))
def test_sh_blocks_parse_and_show_real_flags(block: Block):
    syntax = subprocess.run(["bash", "-n"], input=block.body, capture_output=True, text=True)
    assert syntax.returncode == 0, f"{block.where}: {syntax.stderr}"
    for line in logical_lines(block.body):
        for argv in commands(line):
            check_command(block.where, argv)


def test_the_sh_check_sees_flags():
    checked = sum(check_command("here", argv) for b in blocks("sh")
                  for line in logical_lines(b.body) for argv in commands(line))
    assert checked > 30, f"only {checked} tributary flags checked"
    with pytest.raises(AssertionError, match="--no-such-flag"):
        check_command("here", ["tributary", "pack", "a", "b", "--no-such-flag", "1"])
    with pytest.raises(AssertionError, match="--no-such-flag"):
        check_command("here", ["tributary", "job", "list", "--no-such-flag"])


# ==================================================================== links

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
INCLUDE = re.compile(r"\{\{#include ([^}:\s]+)(?::([\w-]+))?\}\}")


def expanded(path: Path) -> str:
    """The file as mdbook renders it: `{{#include}}`s replaced."""
    def include(m: re.Match) -> str:
        target = path.parent / m[1]
        assert target.is_file(), f"{path.relative_to(REPO)} includes {m[1]}: no such file"
        text = expanded(target)
        if m[2]:
            part = re.search(rf"ANCHOR: {m[2]}\b.*?\n(.*?)\n[^\n]*ANCHOR_END: {m[2]}\b", text, re.S)
            assert part, f"{path.relative_to(REPO)} includes {m[1]}:{m[2]}: no such anchor"
            text = part[1]
        return text
    return INCLUDE.sub(include, path.read_text())


def without_code(text: str) -> str:
    text = re.sub(r"^(\s*)(`{3,}|~{3,}).*?^\1\2\s*$", "", text, flags=re.M | re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def slug(heading: str) -> str:
    """mdbook's (and GitHub's) id of a heading."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", lambda m: m[1] or "", heading.strip()).lower()
    return "".join("-" if c.isspace() else c for c in text if c.isalnum() or c in "-_ "
                   or c.isspace())


def anchors(path: Path) -> set[str]:
    return {slug(h) for h in re.findall(r"^#{1,6}\s+(.*)$", without_code(expanded(path)), re.M)}


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_links_point_at_files_and_headings(path: Path):
    for target in LINK.findall(without_code(expanded(path))):
        if re.match(r"^[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file) if file else path
        assert dest.exists(), f"{path.relative_to(REPO)} links to {target}: no such file"
        if anchor and dest.suffix == ".md":
            assert anchor in anchors(dest), (
                f"{path.relative_to(REPO)} links to {target}: no such heading "
                f"(there: {sorted(anchors(dest))})")


def test_the_books_introduction_shows_the_readmes_commands():
    readme = blocks_of(REPO / "README.md")[0]
    intro = blocks_of(DOCS / "src" / "introduction.md")[0]
    assert readme.body == intro.body and "scripts/quickstart.sh" in readme.body


def test_every_chapter_is_in_the_summary():
    summary = (DOCS / "src" / "SUMMARY.md").read_text()
    listed = set(re.findall(r"\]\(([^)]+\.md)\)", summary))
    chapters = {p.name for p in (DOCS / "src").glob("*.md")} - {"SUMMARY.md"}
    assert listed == chapters
