"""Why a plan about to be saved may not be what the user thinks: said before saving.

Two things make a save surprising. A field showing a refused value (typed ``1e15`` in
Layers) is not in the plan: the file keeps the last valid value. And a plan the engine
cannot compute (TP 3 with 64 attention heads) is saved as it is — it can be fixed
later — but a report or an estimate of it will fail. :func:`save_problems` lists both in
sentences the save prompt shows (it asks; it never refuses).
"""

from __future__ import annotations

from gui.document import PlanDocument
from gui.fields.undo_text import field_noun, value_words


def save_problems(doc: PlanDocument) -> list[str]:
    """Sentences saying what is wrong with saving the plan as it is now ([] = nothing)."""
    out = []
    for path, message in doc.invalid.items():
        if path in doc.typing:
            kept = value_words(path, doc.value(path))
            out.append(
                f"{field_noun(path).capitalize()} shows a value the plan refused "
                f"({message}); the file keeps {kept}."
            )
    if doc.estimate_error:
        out.append(
            f"The engine cannot compute this plan: {doc.estimate_error}. It is saved as it "
            "is, but its estimate and report fail until it is fixed."
        )
    return out
