"""Tokenizer and parser for the subset of mksh (Android's ``/system/bin/sh``)
that tools send through ``adb shell``.

Supported: words with ``'...'``, ``"..."`` and ``\\`` quoting; ``$?``, ``$$``,
``$NAME``, ``${NAME}``; ``VAR=value`` prefixes; ``;``, ``&`` (run in order),
newlines, ``&&``, ``||``, ``|``; redirects ``>``, ``>>``, ``<``, ``N>``,
``N>>``, ``N>&M``, ``>&M``.

Why not :mod:`shlex`: it drops the quoting before we see it, but mksh expands
``$VAR`` inside double quotes and not inside single quotes, and globs only
unquoted text, so each word keeps its quoted segments here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

Segment = tuple[str, str]  # (text, quote) with quote "" (bare), "'" or '"'


class ShellSyntaxError(Exception):
    """The command line does not parse; ``token`` is what mksh reports as unexpected."""

    def __init__(self, token: str) -> None:
        self.token = token
        super().__init__(f"syntax error: unexpected '{token}'")


@dataclass
class Word:
    """One shell word as quoted segments."""

    segments: list[Segment] = field(default_factory=list)

    def literal(self) -> str:
        """The word's text with quotes removed and nothing expanded."""
        return "".join(text for text, _ in self.segments)

    @property
    def bare(self) -> bool:
        """Whether no part of the word was quoted."""
        return all(quote == "" for _, quote in self.segments)


@dataclass
class Redirect:
    """``fd op target``: op is ``>``, ``>>``, ``<``, ``>&`` or ``<&``."""

    fd: int
    op: str
    target: Word


@dataclass
class Simple:
    """A simple command: assignments, words and redirects."""

    assigns: list[tuple[str, Word]] = field(default_factory=list)
    words: list[Word] = field(default_factory=list)
    redirects: list[Redirect] = field(default_factory=list)


@dataclass
class Pipeline:
    """Commands joined by ``|``."""

    commands: list[Simple]


@dataclass
class AndOr:
    """A pipeline followed by ``&&``/``||`` pipelines."""

    first: Pipeline
    rest: list[tuple[str, Pipeline]] = field(default_factory=list)


_OPS = ("&&", "||", ">>", ">&", "<&", ";", "&", "|", ">", "<", "\n")


@dataclass
class _Tok:
    kind: str  # "word", "op", "redir"
    word: Word | None = None
    op: str = ""
    fd: int = -1


def tokenize(line: str) -> list[_Tok]:
    """Split a command line into words, operators and redirect operators.

    Raises:
        ShellSyntaxError: an unterminated quote.
    """
    toks: list[_Tok] = []
    i, n = 0, len(line)
    cur: Word | None = None

    def push(text: str, quote: str) -> None:
        nonlocal cur
        if cur is None:
            cur = Word()
        if cur.segments and cur.segments[-1][1] == quote:
            cur.segments[-1] = (cur.segments[-1][0] + text, quote)
        else:
            cur.segments.append((text, quote))

    def end_word() -> None:
        nonlocal cur
        if cur is not None:
            toks.append(_Tok("word", word=cur))
            cur = None

    while i < n:
        c = line[i]
        if c in " \t":
            end_word()
            i += 1
        elif c == "#" and cur is None:
            while i < n and line[i] != "\n":
                i += 1
        elif c == "'":
            j = line.find("'", i + 1)
            if j < 0:
                raise ShellSyntaxError("'")
            push(line[i + 1 : j], "'")
            i = j + 1
        elif c == '"':
            j, buf = i + 1, []
            while j < n and line[j] != '"':
                if line[j] == "\\" and j + 1 < n and line[j + 1] in '"\\$`\n':
                    buf.append(line[j + 1])
                    j += 2
                else:
                    buf.append(line[j])
                    j += 1
            if j >= n:
                raise ShellSyntaxError('"')
            push("".join(buf), '"')
            i = j + 1
        elif c == "\\":
            if i + 1 < n and line[i + 1] != "\n":
                push(line[i + 1], "'")
            i += 2
        elif any(line.startswith(op, i) for op in _OPS):
            op = next(op for op in _OPS if line.startswith(op, i))
            if op in (">", ">>", "<", ">&", "<&"):
                fd = 1 if op.startswith(">") else 0
                if cur is not None and cur.bare and cur.literal().isdigit():
                    fd = int(cur.literal())
                    cur = None
                else:
                    end_word()
                toks.append(_Tok("redir", op=op, fd=fd))
            else:
                end_word()
                toks.append(_Tok("op", op=op))
            i += len(op)
        else:
            push(c, "")
            i += 1
    end_word()
    return toks


def parse(line: str) -> list[AndOr]:
    """Parse a command line into a list of and-or lists, run in order.

    Raises:
        ShellSyntaxError: unexpected operator, or a redirect without target.
    """
    toks = tokenize(line)
    pos = 0
    script: list[AndOr] = []

    def peek() -> _Tok | None:
        return toks[pos] if pos < len(toks) else None

    def simple() -> Simple:
        nonlocal pos
        cmd = Simple()
        while (tok := peek()) is not None:
            if tok.kind == "word":
                assert tok.word is not None
                text = tok.word.literal()
                name, eq, _ = text.partition("=")
                first = tok.word.segments[0]
                if (
                    not cmd.words
                    and eq
                    and first[1] == ""
                    and "=" in first[0]
                    and name.replace("_", "a").isalnum()
                    and not name[0].isdigit()
                ):
                    value = Word(list(tok.word.segments))
                    head, _, tail = value.segments[0][0].partition("=")
                    value.segments[0] = (tail, "")
                    cmd.assigns.append((head, value))
                else:
                    cmd.words.append(tok.word)
                pos += 1
            elif tok.kind == "redir":
                pos += 1
                target = peek()
                if target is None:
                    raise ShellSyntaxError("newline")
                if target.kind != "word":
                    raise ShellSyntaxError(target.op)
                assert target.word is not None
                cmd.redirects.append(Redirect(tok.fd, tok.op, target.word))
                pos += 1
            else:
                break
        if not (cmd.words or cmd.assigns or cmd.redirects):
            tok = peek()
            raise ShellSyntaxError(tok.op if tok is not None else "EOF")
        return cmd

    def pipeline() -> Pipeline:
        nonlocal pos
        cmds = [simple()]
        while (tok := peek()) is not None and tok.kind == "op" and tok.op == "|":
            pos += 1
            cmds.append(simple())
        return Pipeline(cmds)

    while pos < len(toks):
        tok = peek()
        if tok is not None and tok.kind == "op" and tok.op in ("\n", ";"):
            if tok.op == ";" and not script:
                raise ShellSyntaxError(";")
            pos += 1
            continue
        and_or = AndOr(pipeline())
        while (tok := peek()) is not None and tok.kind == "op" and tok.op in ("&&", "||"):
            pos += 1
            while (nl := peek()) is not None and nl.kind == "op" and nl.op == "\n":
                pos += 1
            and_or.rest.append((tok.op, pipeline()))
        script.append(and_or)
        tok = peek()
        if tok is not None:
            if tok.kind == "op" and tok.op in (";", "&", "\n"):
                pos += 1
            else:
                raise ShellSyntaxError(tok.op)
    return script
