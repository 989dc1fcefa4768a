"""Crash recovery on start: offer every plan that crashed instances left, lose none.

Each orphaned autosave is claimed first (so an instance starting at the same moment
does not offer it too), listed with its name, time, size and config hash, and handled
as the user chooses: *restore* loads it into a window as unsaved changes, and the old
autosave is deleted only after that window has written its own; *save* writes it to a
file the user picks, then deletes it; *discard* deletes it; *later* (also closing the
dialog) keeps it for the next start. A failure at any step keeps the autosave.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from engine import planfile
from gui import dialogs
from gui.files import autosave
from gui.files.autosave import Orphan
from gui.files.instance import Claim
from gui.files.recovery_dialog import Choice
from gui.main_window import MainWindow
from gui.settings import autosave_dir


def is_pristine(window: MainWindow) -> bool:
    """A window still on the untouched default plan can take a restored plan."""
    return window.doc.path is None and not window.doc.dirty


def restore(orphan: Orphan, window: MainWindow) -> bool:
    """Load ``orphan`` into ``window``; delete it once the window's autosave holds it."""
    try:
        window.doc.recover(orphan.plan_path, orphan.original)
    except planfile.PlanFileError as exc:
        dialogs.show_error(window, "Cannot recover", f"{orphan.plan_path.name}: {exc}")
        return False
    if window.autosaver.tick():
        autosave.discard(orphan)
    else:
        dialogs.show_error(
            window,
            "Recovered plan not yet protected",
            f"The plan was restored but could not be autosaved again "
            f"({window.autosaver.error}); its previous autosave is kept. Save it now.",
        )
    return True


def save_elsewhere(orphan: Orphan, parent: MainWindow) -> bool:
    """Write the orphan's plan to a file the user picks, then delete the autosave."""
    suggestion = orphan.original or str(Path.home() / f"{orphan.name or 'Recovered plan'}.memplan")
    path = dialogs.save_path(parent, suggestion)
    if not path:
        return False
    try:
        planfile.save(planfile.load(orphan.plan_path), path)
    except (planfile.PlanFileError, OSError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        dialogs.show_error(
            parent, "Cannot save recovered plan", f"{path} was not written: {reason}"
        )
        return False
    autosave.discard(orphan)
    return True


def offer_recovery(
    window: MainWindow,
    open_window: Callable[[], MainWindow] | None = None,
    directory: Path | None = None,
) -> bool:
    """Offer every crashed instance's autosaves; True if any was restored in a window.

    The first restored plan goes into ``window`` when it is pristine; the others into
    new windows from ``open_window`` (without one, they are kept for the next start)."""
    folder = directory or autosave_dir()
    claims: list[tuple[Orphan, Claim]] = []
    for orphan in autosave.find_orphans(folder):
        claim = Claim(orphan.plan_path)
        if claim.take():
            claims.append((orphan, claim))
    if not claims:
        autosave.tidy(folder)
        return False
    restored = False
    try:
        choices = dialogs.ask_recovery(window, [o for o, _ in claims])
        for orphan, _claim in claims:
            choice: Choice = choices.get(orphan.plan_path, "later")
            if choice == "restore":
                target = window if is_pristine(window) else open_window() if open_window else None
                restored = bool(target and restore(orphan, target)) or restored
            elif choice == "save":
                save_elsewhere(orphan, window)
            elif choice == "discard":
                autosave.discard(orphan)
    finally:
        for orphan, claim in claims:
            claim.release(remove=not orphan.plan_path.exists())
        autosave.tidy(folder)
    return restored
