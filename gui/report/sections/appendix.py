"""The reference pages at the back: every input of the plan by section (defaults marked),
and the framework configurations generated from it."""

from __future__ import annotations

from collections.abc import Mapping

from engine.stacks.defaults import Derived, resolve_stack_defaults
from gui.report.content import ReportContent
from gui.report.html import esc, heading, table
from gui.report.inputs import InputLine, all_inputs, show


def value_text(ln: InputLine, derived: Mapping[str, Derived]) -> str:
    """The value as set, and for an input left at auto what the stack made of it."""
    d = derived.get(ln.path)
    if d is None:
        return ln.value_text
    return f"auto → {show(ln.path, d.value)} (stack {d.stack})"


def default_note(ln: InputLine) -> str:
    """What a set value replaced: its default, or that the field has none (a leaf of a
    section that is absent by default, such as a dense model's MoE block)."""
    return f"default {ln.default_text}" if ln.has_default else "no default"


def inputs_section(c: ReportContent) -> str:
    out = [heading(1, "Inputs", "inputs")]
    out.append(
        '<p class="small">Every input of the plan, by section. <i>default</i> marks a value '
        "equal to the field's built-in default (what the plan relied on without saying); "
        "values set in the plan are in bold with the default under them; <i>auto → x</i> is "
        "an input left to the training stack, and the value the stack gave it.</p>"
    )
    derived = resolve_stack_defaults(c.pf.plan).derived
    for section, lines in all_inputs(c.pf.plan).items():
        changed = sum(1 for ln in lines if not ln.is_default)
        rows = []
        for ln in lines:
            field = ln.path.split(".", 1)[1]
            value = (
                f'{esc(value_text(ln, derived))} <span class="default">default</span>'
                if ln.is_default
                else f'<span class="set">{esc(value_text(ln, derived))}</span><br>'
                f'<span class="default">{esc(default_note(ln))}</span>'
            )
            rows.append(
                [
                    f'<span class="mono">{esc(field)}</span>',
                    value,
                    f'<span class="small">{esc(ln.description)}</span>',
                ]
            )
        out.append(
            f"<h2>{esc(section.capitalize())} <span class='small'>({len(lines)} inputs, "
            f"{changed} set, {len(lines) - changed} default)</span></h2>"
        )
        out.append(table(["Field", "Value", "Meaning"], rows, [24, 30, 46]))
    return "".join(out)


CODE_COLUMNS = 118
"""Characters per line of a config listing at 7 pt mono on the text width."""


def code_block(text: str) -> str:
    """A listing as one table cell of ``<br>``-separated lines, long lines wrapped with
    a ↪ continuation mark (one block, so the page layout handles it like any table)."""
    lines: list[str] = []
    for line in text.rstrip().splitlines():
        indent = len(line) - len(line.lstrip(" "))
        while len(line) > CODE_COLUMNS:
            lines.append(line[:CODE_COLUMNS])
            line = " " * indent + "↪ " + line[CODE_COLUMNS:]
        lines.append(line)
    body = "<br>".join(esc(ln).replace(" ", "&nbsp;") for ln in lines)
    return (
        '<table width="100%" cellspacing="0" cellpadding="4" style="background-color: #f4f6f8">'
        f'<tr><td class="mono" style="font-size: 7pt">{body}</td></tr></table>'
    )


def appendix_section(c: ReportContent) -> str:
    """The config the plan's own stack reads (``gui.report.content.appendix_formats``),
    with its companion files listed after it — on paper nothing is "beside this file"."""
    out = [heading(1, "Appendix — generated framework configuration", "appendix")]
    if not c.exports:
        out.append(
            '<p class="small">The plan runs as a plain PyTorch script (stack pytorch), '
            "which reads no framework config file: none is generated. <span class='mono'>"
            "memplan export</span> writes DeepSpeed, accelerate, torchtitan and Megatron-LM "
            "configs on request.</p>"
        )
    for exp in c.exports:
        out.append(f"<h2>{esc(exp.format)} — <span class='mono'>{esc(exp.filename)}</span></h2>")
        notes = [n.replace("(beside this file)", "(listed below)") for n in exp.notes]
        out += [f'<p class="small">Note: {esc(n)}</p>' for n in notes]
        out.append(code_block(exp.text))
        for extra in exp.extras:
            out.append(f"<h3><span class='mono'>{esc(extra.filename)}</span></h3>")
            out.append(code_block(extra.text))
    return "".join(out)
