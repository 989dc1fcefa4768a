"""The command a bash launch script runs, read without running it.

Megatron-LM's own examples (``examples/gpt3``, ``examples/llama``, ``examples/mixtral``)
and slime's ``scripts/models/*.sh`` keep their flags in bash arrays (``ARGS=( … )``,
``ARGS+=( … )``) spliced in as ``${ARGS[@]}``, or in a quoted string (``ARGS=" … "``,
possibly over several lines), with sizes in variables (``TP=8``, ``${TP:-8}``,
``$((GPUS*NODES))``). This reads those shapes: simple assignments, arrays, defaults,
integer arithmetic and the first branch of an ``if`` (its ``else`` branches are skipped,
and the caller is told). Loops, functions and command substitutions are not run; a
value built by them stays ``$NAME`` and the importer warns for it.
"""

from __future__ import annotations

import ast
import re
import shlex
from dataclasses import dataclass, field

_ASSIGN = re.compile(
    r"^\s*(?:export\s+|local\s+|readonly\s+|declare\s+(?:-\w+\s+)?)?"
    r"([A-Za-z_][A-Za-z0-9_]*)(\+?)=(.*)$",
    re.S,
)
_VAR = re.compile(
    r"\$\{([A-Za-z_][A-Za-z0-9_]*|[0-9])(\[[@*]\])?(?::?-([^}]*))?\}"
    r"|\$([A-Za-z_][A-Za-z0-9_]*|[0-9])"
)
_ARITH = re.compile(r"^\$\(\((.*)\)\)$", re.S)
MAX_STATEMENT_CHARS = 65_536
"""The longest statement read (a real launch command is a few KB; shlex takes time
quadratic in a token's length, so a megabyte-long one is skipped, not split)."""
_IF_OPEN = ("if ", "if[", "case ")
_IF_ELSE = ("else", "elif ", "elif[")
_IF_CLOSE = ("fi", "esac")


def _integer(expr: str) -> int | None:
    """Bash integer arithmetic of literals (``8*2``, ``(64/8)``), or None."""
    if len(expr) > 200:
        return None
    try:
        node = ast.parse(expr.strip(), mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    return _int_node(node, 0)


def _int_node(node: ast.expr, depth: int) -> int | None:
    if depth > 20:
        return None
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if not isinstance(node, ast.BinOp):
        return None
    a, b = _int_node(node.left, depth + 1), _int_node(node.right, depth + 1)
    if a is None or b is None or abs(a) > 2**40 or abs(b) > 2**40:
        return None
    if isinstance(node.op, ast.Add):
        return a + b
    if isinstance(node.op, ast.Sub):
        return a - b
    if isinstance(node.op, ast.Mult):
        return a * b
    if isinstance(node.op, ast.Div | ast.FloorDiv) and b:
        return a // b
    return None


@dataclass
class Script:
    """What a launch script runs: the command's words, and what was filled in."""

    commands: list[tuple[list[str], set[str]]] = field(default_factory=list)
    arrays: dict[str, list[str]] = field(default_factory=dict)
    skipped_else: int = 0


def _scan(line: str, quote: str) -> tuple[str, int]:
    """(the quote still open after ``line``, given the one open before it; the net
    parentheses opened outside quotes) — one linear pass, so a script of many lines
    with a stray quote costs no more than reading it."""
    depth = 0
    i = 0
    while i < len(line):
        c = line[i]
        if quote == "'":
            quote = "" if c == "'" else quote
        elif c == "\\":
            i += 1
        elif quote == '"':
            quote = "" if c == '"' else quote
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or line[i - 1].isspace()):
            break
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        i += 1
    return quote, depth


def statements(text: str) -> list[str]:
    """The script's logical statements: continuation lines joined, a multi-line quoted
    string or array kept whole."""
    out: list[str] = []
    buf = ""
    quote, depth = "", 0
    for line in text.replace("\\\r\n", " ").replace("\\\n", " ").splitlines():
        buf = f"{buf}\n{line}" if buf else line
        quote, opened = _scan(line, quote)
        depth = max(0, depth + opened)
        if not quote and not depth:
            if buf.strip():
                out.append(buf)
            buf = ""
    if buf.strip():
        out.append(buf)
    return out


class _Reader:
    def __init__(self) -> None:
        self.env: dict[str, str] = {}
        self.used: set[str] = set()
        self.array_used: dict[str, set[str]] = {}
        self.origin: dict[str, str] = {}
        self.out = Script()

    def expand(self, word: str) -> list[str]:
        """``word`` with variables filled in; an array or a spaced value splits."""

        def one(m: re.Match[str]) -> str:
            name = m.group(1) or m.group(4)
            if m.group(2):  # ${NAME[@]}
                if name in self.out.arrays:
                    self.used |= self.array_used.get(name, set())
                    return "\x00".join(self.out.arrays[name])
                return m.group(0)
            if name in self.env:
                shown = " ".join(self.env[name].split())
                shown = shown if len(shown) <= 60 else shown[:57] + "..."
                self.used.add(f"{name}={shown}{self.origin.get(name, '')}")
                return self.env[name]
            if m.group(3) is not None:
                default = self.expand(m.group(3).strip("\"'"))
                value = " ".join(default)
                self.used.add(f"{name}={value} (its default)")
                return value
            return m.group(0)

        text = _VAR.sub(one, word)
        arith = _ARITH.match(text)
        if arith:
            text = self._arith(arith.group(1)) or text
        if text == word:
            return [word] if word else []
        return [w for part in text.split("\x00") for w in part.split()]

    def _arith(self, body: str) -> str | None:
        expr = " ".join(self.expand(body))
        expr = re.sub(r"\b[A-Za-z_]\w*\b", lambda m: self.env.get(m.group(0), m.group(0)), expr)
        value = _integer(expr)
        return None if value is None else str(value)

    def assign(self, name: str, append: bool, raw: str) -> None:
        raw = raw.strip()
        if raw.startswith("(") and not _ARITH.match(raw):
            inner = raw[1:].rstrip()
            inner = inner[:-1] if inner.endswith(")") else inner
            words = [w for ln in inner.splitlines() for w in shlex.split(ln, comments=True)]
            # an element is split when the array is spliced unquoted (${ARGS[@]})
            self.used = set()
            got = [x for w in words for e in self.expand(w) for x in e.split()]
            self.out.arrays[name] = (self.out.arrays.get(name, []) if append else []) + got
            self.array_used[name] = (self.array_used.get(name, set()) if append else set()) | (
                self.used
            )
            return
        arith = _ARITH.match(raw)
        if arith:
            value = self._arith(arith.group(1))
            if value is not None:
                self.env[name] = value
            return
        words = shlex.split(raw, comments=True)
        if len(words) > 1:
            return  # NAME=value command: an environment for one command
        self.used = set()
        value = " ".join(self.expand(words[0])) if words else ""
        defaulted = any(u.endswith("(its default)") for u in self.used)
        self.origin[name] = " (its default)" if defaulted else ""
        if "$" not in value and "`" not in value:
            self.env[name] = (self.env.get(name, "") + value) if append else value
        else:
            self.env.pop(name, None)

    def command(self, stmt: str) -> None:
        words = shlex.split(stmt, comments=True)
        self.used = set()
        tokens = [x for w in words for x in self.expand(w)]
        if tokens:
            self.out.commands.append((tokens, self.used))


def read_script(text: str) -> Script:
    """The commands of a launch script with its variables and arrays filled in."""
    r = _Reader()
    skipping: list[bool] = []  # per open if: inside a branch after the first
    for stmt in statements(text):
        if len(stmt) > MAX_STATEMENT_CHARS:  # shlex is quadratic in a token's length
            continue
        head = stmt.strip()
        if head.startswith(_IF_OPEN):
            skipping.append(False)
            continue
        if head.startswith(_IF_ELSE) and skipping:
            if not skipping[-1]:
                r.out.skipped_else += 1
            skipping[-1] = True
            continue
        if head in _IF_CLOSE or head.startswith(("fi ", "fi;", "done", "for ", "while ")):
            if head.startswith(("fi", "esac")) and skipping:
                skipping.pop()
            continue
        if any(skipping):
            continue
        head = head.removeprefix("then").removeprefix("do").strip()
        if not head:
            continue
        m = _ASSIGN.match(head)
        try:
            if m and " " not in m.group(1):
                r.assign(m.group(1), m.group(2) == "+", m.group(3))
            else:
                r.command(head)
        except ValueError:
            continue  # a statement shlex cannot split (a stray quote): not a command
    return r.out


def training_command(script: Script) -> tuple[list[str], list[str], set[str]]:
    """(Megatron's words, the launcher's words, variables filled) of the command that runs
    a training script (``pretrain_gpt.py``, ``train.py``) with the most ``--flags``; a file
    with no such command (a bare argument list, or slime's ``MODEL_ARGS=( … )`` model
    file) gives every ``--flag`` of its commands and arrays, in order."""
    best: tuple[int, list[str], list[str], set[str]] | None = None
    for tokens, used in script.commands:
        at = next((i for i, t in enumerate(tokens) if t.endswith(".py")), None)
        if at is None:
            continue
        flags = sum(1 for t in tokens[at + 1 :] if t.startswith("--"))
        if flags and (best is None or flags > best[0]):
            best = (flags, tokens[at + 1 :], tokens[:at], used)
    if best is not None:
        return best[1], best[2], best[3]
    words: list[str] = []
    used_all: set[str] = set()
    for tokens, used in script.commands:
        if any(t.startswith("--") for t in tokens):
            words += tokens
            used_all |= used
    for arr in script.arrays.values():
        if any(t.startswith("--") for t in arr):
            words += arr
    return words, [], used_all
