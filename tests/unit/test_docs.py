"""The user's documents point at what exists: links, farmctl commands, bench commands.

README.md, docs/*.md and bench/README.md are read as a user reads them: every
relative link must reach a file (and a heading, where it names one), every
``farmctl ...`` a command and options ``farmctl --help`` knows, every
``python bench/X.py ...`` a script and flags its argparse takes. The README
must start with the two commands that work on a fresh machine.
"""

from __future__ import annotations

import importlib
import re
import shlex
import tomllib
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).resolve().parents[2]

#: The documents a user reads, relative to the repository's root.
DOCS = sorted(
    [Path("README.md"), Path("bench/README.md")]
    + [p.relative_to(ROOT) for p in (ROOT / "docs").glob("*.md")]
)

#: Documents whose farmctl, farmd, farm-phones and farm-boards calls are checked.
COMMAND_DOCS = [Path("README.md"), Path("docs/commands.md"), Path("docs/guide.md")]

#: Documents whose ``python bench/...`` commands are checked against the scripts.
BENCH_DOCS = [Path("docs/benchmarks.md"), Path("bench/README.md")]

#: The README's first two commands, as on a fresh machine (set up, then run).
FIRST_COMMANDS = (
    "./setup.sh && .venv/bin/farmctl demo",
    "./setup.sh && .venv/bin/python -m pytest -q -n 2 --dist loadfile",
)


def programs() -> dict[str, click.Command]:
    """farm's click commands by program name, as ``[project.scripts]`` installs them.

    An entry point that is a plain function (``farmctl``'s ``main`` wraps its group) stands
    for the one click command its module defines.
    """
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    found = {}
    for name, target in scripts.items():
        module_name, _, attribute = target.partition(":")
        module = importlib.import_module(module_name)
        command = getattr(module, attribute)
        if not isinstance(command, click.Command):
            [command] = [
                value for value in vars(module).values()
                if isinstance(value, click.Command)
                and getattr(value.callback, "__module__", None) == module_name
            ]
        found[name] = command
    return found


_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_CODE_SPAN = re.compile(r"`([^`\n]+)`")
_FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to ``-``."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown file (a repeated heading gets ``-1``, ``-2``...)."""
    seen: dict[str, int] = {}
    found = set()
    text = _FENCE.sub("", path.read_text())
    for line in text.splitlines():
        match = re.match(r"#{1,6} (.+)", line)
        if not match:
            continue
        base = slug(match.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def code_lines(path: Path) -> Iterator[str]:
    """Each command-like line of a document: fenced lines (``\\`` continuations joined),
    indented code lines, and inline code spans."""
    text = path.read_text()
    for block in _FENCE.findall(text):
        yield from re.sub(r"\\\n\s*", " ", block).splitlines()[1:-1]
    prose = _FENCE.sub("", text)
    for line in re.sub(r"\\\n\s*", " ", prose).splitlines():
        if line.startswith("    "):
            yield line.strip()
    yield from _CODE_SPAN.findall(prose.replace("\\|", "|"))


def words(command: str) -> list[str]:
    """A command line's words up to a comment or ``&&``, markup brackets dropped."""
    command = re.split(r" # |&&|;| \(or ", command, maxsplit=1)[0]
    try:
        parts = shlex.split(command)
    except ValueError:
        parts = command.split()
    return [w.strip("[]()") for w in parts if w.strip("[]()|") and w != "..."]


def program_calls(path: Path, names: list[str]) -> Iterator[tuple[str, str, list[str]]]:
    """Each call of one of ``names`` in a document: its text, the program, the words after it."""
    call = re.compile(r"(?:^|[\s/])(" + "|".join(map(re.escape, names)) + r")(?=\s|$)((?:\s+\S+)*)")
    for line in code_lines(path):
        for piece in re.split(r"&&|\|\||;", line):
            found = call.search(piece)
            if found:
                yield piece.strip(), found.group(1), words(found.group(2))


def option_names(command: click.Command) -> set[str]:
    """Every option spelling a command takes, ``--help`` and ``-h`` included."""
    names = {"--help", "-h"}
    for param in command.params:
        names.update(param.opts)
        names.update(param.secondary_opts)
    return names


def value_options(command: click.Command) -> set[str]:
    """The options of a command that take a value (the word after them is not a command)."""
    return {
        opt for param in command.params
        if isinstance(param, click.Option) and not param.is_flag for opt in param.opts
    }


def unknown_in(root: click.Command, call: list[str]) -> list[str]:
    """What of one call of a program the CLI does not know: a command or an option.

    ``model|tune`` names two commands: an option must be known to both.
    """
    if not isinstance(root, click.Group):
        return [w for w in call if w.startswith("--") and w.split("=")[0] not in option_names(root)]
    ctx = click.Context(root)
    rest = list(call)
    while rest and rest[0].startswith("-"):
        option = rest.pop(0).split("=")[0]
        if option not in option_names(root):
            return [option]
        if option in value_options(root) and rest and root.get_command(ctx, rest[0]) is None:
            rest.pop(0)
    commands: list[click.Command] = [root]
    while rest and re.fullmatch(r"[a-z]+(\|[a-z]+)*", rest[0]):
        groups = [c for c in commands if isinstance(c, click.Group)]
        if not groups:
            break
        commands = []
        for name in rest.pop(0).split("|"):
            found = [c for g in groups if (c := g.get_command(ctx, name)) is not None]
            if not found:
                return [name]
            commands += found
    if commands == [root]:
        return []
    return [
        word for word in rest
        if word.startswith("--")
        and any(word.split("=")[0] not in option_names(c) for c in commands)
    ]


def bench_calls(path: Path) -> Iterator[tuple[str, str, list[str]]]:
    """Each ``python bench/X.py ...`` of a document: its text, script and flags."""
    for line in code_lines(path):
        found = re.search(r"python (bench/\w+\.py)((?:\s+\S+)*)", line)
        if found:
            flags = [w.split("=")[0] for w in words(found.group(2)) if w.startswith("--")]
            yield line.strip(), found.group(1), flags


def broken_links(doc: Path) -> list[str]:
    """The relative links of a Markdown file that reach no file, or no heading in it."""
    broken = []
    for target in _LINK.findall(_FENCE.sub("", doc.read_text())):
        if re.match(r"[a-z]+:", target):
            continue
        file_part, _, anchor = target.partition("#")
        file = doc.parent / file_part if file_part else doc
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no such heading")
    return broken


#: A revision named as the point a figure was measured against: "`main` at db97fa2",
#: "--before aab601a". The figures file holds the current figures; their history is in git.
_REVISION_MARK = re.compile(
    r"\b(?:main|master|HEAD)`?\s+(?:at|@)\s+`?[0-9a-f]{7,40}\b"
    r"|--(?:before|after)\s+[0-9a-f]{7,40}\b"
)


def revision_marks(text: str) -> list[str]:
    """The places a document names a commit as a figure's "before" (:data:`_REVISION_MARK`)."""
    return [found.group(0) for found in _REVISION_MARK.finditer(text)]


def unknown_flags(script: Path, flags: list[str]) -> list[str]:
    """The flags a bench script's argparse does not declare (``--no-X`` of a boolean ``--X``)."""
    code = script.read_text()
    return [
        flag for flag in flags
        if f'"{flag}"' not in code
        and not (flag.startswith("--no-") and f'"--{flag[5:]}"' in code)
    ]


@pytest.mark.parametrize("doc", DOCS, ids=str)
def test_every_relative_link_reaches_a_file_and_heading(doc: Path) -> None:
    """A link in a user's document names a file of the repository, and a heading in it."""
    assert not (broken := broken_links(ROOT / doc)), f"{doc}: {broken}"


@pytest.mark.parametrize("doc", COMMAND_DOCS, ids=str)
def test_every_command_and_option_shown_exists(doc: Path) -> None:
    """Each farmctl (farmd, farm-phones...) call a document shows is one the CLI has, with
    options it takes."""
    found = programs()
    wrong = {
        text: bad
        for text, name, call in program_calls(ROOT / doc, list(found))
        if (bad := unknown_in(found[name], call))
    }
    assert not wrong, f"{doc}: {wrong}"


@pytest.mark.parametrize("doc", BENCH_DOCS, ids=str)
def test_every_bench_command_names_a_script_and_its_flags(doc: Path) -> None:
    """Each ``python bench/X.py --flag`` a document shows runs: the script has those flags."""
    wrong = {}
    for text, script, flags in bench_calls(ROOT / doc):
        if not (ROOT / script).exists():
            wrong[text] = [script]
        elif missing := unknown_flags(ROOT / script, flags):
            wrong[text] = missing
    assert not wrong, f"{doc}: {wrong}"


def test_readme_starts_with_the_two_commands_of_a_fresh_machine() -> None:
    """The README's first code block is set up + the demo, then set up + the tests."""
    block = _FENCE.search((ROOT / "README.md").read_text())
    assert block is not None
    lines = [line.split("#")[0].strip() for line in block.group(0).splitlines()[1:-1]]
    assert tuple(lines) == FIRST_COMMANDS


def test_readme_fits_a_first_afternoon() -> None:
    """The README stays under 250 lines: the reference lives in docs/commands.md."""
    assert len((ROOT / "README.md").read_text().splitlines()) < 250


def test_benchmarks_hold_the_current_figures_only() -> None:
    """docs/benchmarks.md stays under 600 lines and names no commit as a figure's "before"."""
    text = (ROOT / "docs/benchmarks.md").read_text()
    assert len(text.splitlines()) < 600
    assert not (marks := revision_marks(text)), marks


def test_the_checks_catch_what_they_look_for(tmp_path: Path) -> None:
    """A wrong command, option, flag, file or heading is reported, not passed over."""
    doc = tmp_path / "doc.md"
    doc.write_text(
        "# Title\n\n[ok](#title) [gone](#nope) [file](missing.md)\n\n"
        "```sh\nfarmctl enqueue gemm --n 256 --nope\nfarmctl frobnicate\n"
        "farmd --config f.toml --nope\npython bench/bench_cv.py --n 256 --nope\n```\n"
        "Inline `farmctl --config f.toml results --job 1 --format csv` is right.\n"
    )
    found = programs()
    assert set(found) == {"farmctl", "farmd", "farm-phones", "farm-boards"}
    calls = {text: found[name] for text, name, _ in program_calls(doc, list(found))}
    words_of = {text: call for text, _, call in program_calls(doc, list(found))}
    for text, wrong in [
        ("farmctl enqueue gemm --n 256 --nope", ["--nope"]),
        ("farmctl frobnicate", ["frobnicate"]),
        ("farmd --config f.toml --nope", ["--nope"]),
        ("farmctl --config f.toml results --job 1 --format csv", []),
    ]:
        assert unknown_in(calls[text], words_of[text]) == wrong, text
    [(_, script, flags)] = bench_calls(doc)
    assert (script, flags) == ("bench/bench_cv.py", ["--n", "--nope"])
    assert unknown_flags(ROOT / script, [*flags, "--no-quiet"]) == ["--nope"]
    assert broken_links(doc) == ["#nope: no such heading", "missing.md: no such file"]
    assert revision_marks(
        "Before: `main` at db97fa2; main at d7900ba; bench_ab_untuned.py --before aab601a"
        " --after REV; mean of 10, at 1e-3"
    ) == ["main` at db97fa2", "main at d7900ba", "--before aab601a"]
