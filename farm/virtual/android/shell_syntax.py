r"""Tokenizer and parser for the subset of mksh (Android's ``/system/bin/sh``) adb tools send.

Supported: words with ``'...'``, ``"..."`` and ``\`` quoting; ``$?``, ``$$``,
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
    return _Lexer(line).run()


class _Lexer:
    """Tokenizer state: the position in the line, the word being built, the tokens so far."""

    def __init__(self, line: str) -> None:
        self.line = line
        self.i = 0
        self.cur: Word | None = None
        self.toks: list[_Tok] = []

    def push(self, text: str, quote: str) -> None:
        """Add text to the current word, merging with its last segment of the same quote."""
        if self.cur is None:
            self.cur = Word()
        segments = self.cur.segments
        if segments and segments[-1][1] == quote:
            segments[-1] = (segments[-1][0] + text, quote)
        else:
            segments.append((text, quote))

    def end_word(self) -> None:
        """Emit the current word, if any."""
        if self.cur is not None:
            self.toks.append(_Tok("word", word=self.cur))
            self.cur = None

    def run(self) -> list[_Tok]:
        """Tokenize the whole line."""
        line, n = self.line, len(self.line)
        while self.i < n:
            c = line[self.i]
            if c in " \t":
                self.end_word()
                self.i += 1
            elif c == "#" and self.cur is None:
                end = line.find("\n", self.i)
                self.i = n if end < 0 else end
            elif c == "'":
                end = line.find("'", self.i + 1)
                if end < 0:
                    raise ShellSyntaxError("'")
                self.push(line[self.i + 1 : end], "'")
                self.i = end + 1
            elif c == '"':
                self._double_quoted()
            elif c == "\\":
                if self.i + 1 < n and line[self.i + 1] != "\n":
                    self.push(line[self.i + 1], "'")
                self.i += 2
            elif (op := next((op for op in _OPS if line.startswith(op, self.i)), None)) is not None:
                self._operator(op)
            else:
                self.push(c, "")
                self.i += 1
        self.end_word()
        return self.toks

    def _double_quoted(self) -> None:
        r"""A ``"..."`` segment at ``i``: backslash escapes only ``"``, ``\``, ``$``, backquote."""
        line, n = self.line, len(self.line)
        j, buf = self.i + 1, []
        while j < n and line[j] != '"':
            if line[j] == "\\" and j + 1 < n and line[j + 1] in '"\\$`\n':
                buf.append(line[j + 1])
                j += 2
            else:
                buf.append(line[j])
                j += 1
        if j >= n:
            raise ShellSyntaxError('"')
        self.push("".join(buf), '"')
        self.i = j + 1

    def _operator(self, op: str) -> None:
        """An operator at ``i``; a bare number word right before a redirect is its fd."""
        if op in (">", ">>", "<", ">&", "<&"):
            fd = 1 if op.startswith(">") else 0
            if self.cur is not None and self.cur.bare and self.cur.literal().isdigit():
                fd = int(self.cur.literal())
                self.cur = None
            else:
                self.end_word()
            self.toks.append(_Tok("redir", op=op, fd=fd))
        else:
            self.end_word()
            self.toks.append(_Tok("op", op=op))
        self.i += len(op)


def parse(line: str) -> list[AndOr]:
    """Parse a command line into a list of and-or lists, run in order.

    Raises:
        ShellSyntaxError: unexpected operator, or a redirect without target.
    """
    return _Parser(tokenize(line)).script()


def _assignment(cmd: Simple, word: Word) -> tuple[str, Word] | None:
    """``NAME=value`` as an assignment when it leads the command (bare name), else None."""
    name, eq, _ = word.literal().partition("=")
    first = word.segments[0]
    if (
        not cmd.words
        and eq
        and first[1] == ""
        and "=" in first[0]
        and name.replace("_", "a").isalnum()
        and not name[0].isdigit()
    ):
        value = Word(list(word.segments))
        head, _, tail = value.segments[0][0].partition("=")
        value.segments[0] = (tail, "")
        return head, value
    return None


class _Parser:
    """Recursive descent over the tokens: script, and-or list, pipeline, simple command."""

    def __init__(self, toks: list[_Tok]) -> None:
        self.toks = toks
        self.pos = 0

    def peek(self) -> _Tok | None:
        """The next token, or None at the end."""
        return self.toks[self.pos] if self.pos < len(self.toks) else None

    def peek_op(self, ops: tuple[str, ...]) -> _Tok | None:
        """The next token if it is one of the operators ``ops``, else None."""
        tok = self.peek()
        return tok if tok is not None and tok.kind == "op" and tok.op in ops else None

    def simple(self) -> Simple:
        """Assignments, words and redirects up to the next operator."""
        cmd = Simple()
        while (tok := self.peek()) is not None:
            if tok.word is not None:
                assign = _assignment(cmd, tok.word)
                if assign is not None:
                    cmd.assigns.append(assign)
                else:
                    cmd.words.append(tok.word)
                self.pos += 1
            elif tok.kind == "redir":
                self.pos += 1
                target = self.peek()
                if target is None:
                    raise ShellSyntaxError("newline")
                if target.word is None:
                    raise ShellSyntaxError(target.op)
                cmd.redirects.append(Redirect(tok.fd, tok.op, target.word))
                self.pos += 1
            else:
                break
        if not (cmd.words or cmd.assigns or cmd.redirects):
            tok = self.peek()
            raise ShellSyntaxError(tok.op if tok is not None else "EOF")
        return cmd

    def pipeline(self) -> Pipeline:
        """Simple commands joined by ``|``."""
        cmds = [self.simple()]
        while self.peek_op(("|",)) is not None:
            self.pos += 1
            cmds.append(self.simple())
        return Pipeline(cmds)

    def and_or(self) -> AndOr:
        """Pipelines joined by ``&&``/``||`` (newlines may follow the operator)."""
        and_or = AndOr(self.pipeline())
        while (tok := self.peek_op(("&&", "||"))) is not None:
            self.pos += 1
            while self.peek_op(("\n",)) is not None:
                self.pos += 1
            and_or.rest.append((tok.op, self.pipeline()))
        return and_or

    def script(self) -> list[AndOr]:
        """And-or lists separated by ``;``, ``&`` or newlines."""
        script: list[AndOr] = []
        while self.pos < len(self.toks):
            tok = self.peek_op(("\n", ";"))
            if tok is not None:
                if tok.op == ";" and not script:
                    raise ShellSyntaxError(";")
                self.pos += 1
                continue
            script.append(self.and_or())
            tok = self.peek()
            if tok is not None:
                if tok.kind == "op" and tok.op in (";", "&", "\n"):
                    self.pos += 1
                else:
                    raise ShellSyntaxError(tok.op)
        return script
