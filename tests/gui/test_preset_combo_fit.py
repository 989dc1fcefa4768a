"""The Hardware tab's preset boxes show their presets' names whole.

Seen under Xvfb at 1366×768: the Node box read "NVIDIA DGX H100 (8 × H100" — it was a
compact box (:func:`gui.fields.fields.compact`, a size hint of eight characters) beside
its Apply button, so the layout gave it ~195 px. Now it is a
:class:`gui.fields.preset_combo.PresetCombo` (a size hint that holds its longest item)
across the row, the Apply buttons under it.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QApplication, QComboBox, QStyle, QStyleOptionComboBox

from engine import presets as hardware_presets
from gui.fields.fields import compact
from gui.fields.preset_combo import PresetCombo
from tests.gui.test_laptop_layout import LAPTOP


def _text_room(combo: QComboBox) -> int:
    """The width the style leaves for the current item's text (the edit field)."""
    opt = QStyleOptionComboBox()
    combo.initStyleOption(opt)
    field = combo.style().subControlRect(
        QStyle.ComplexControl.CC_ComboBox, opt, QStyle.SubControl.SC_ComboBoxEditField, combo
    )
    return field.width()


def _widest(combo: QComboBox) -> int:
    metrics = QFontMetrics(combo.font())
    return max(metrics.horizontalAdvance(combo.itemText(i)) for i in range(combo.count()))


def test_the_size_hint_holds_the_longest_item(qtbot: Any) -> None:
    names = [n.name for n in hardware_presets.nodes()]
    box, plain = PresetCombo(), QComboBox()
    qtbot.addWidget(box)
    qtbot.addWidget(plain)
    compact(plain)  # what the node box was
    for combo in (box, plain):
        combo.addItems(names)
    longest = max(names, key=QFontMetrics(box.font()).horizontalAdvance)
    assert longest == "AMD MI300X platform (8 × MI300X 192 GB)"
    assert plain.sizeHint().width() < _widest(plain)  # eight characters: the cut name
    assert box.sizeHint().width() > _widest(box)
    assert box.minimumSizeHint() == plain.minimumSizeHint()  # the panel still narrows
    box.resize(box.sizeHint())
    assert _text_room(box) >= _widest(box)
    box.setCurrentIndex(names.index(longest))
    assert box.toolTip() == longest


def test_preset_names_are_whole_on_a_laptop(qtbot: Any, window: Any) -> None:
    """At 1366×740 with the input panel at its opening width, each preset box leaves its
    longest name the room it needs (the node box had ~170 px for ~270 px of text)."""
    window.resize(LAPTOP)  # as tests/gui/test_laptop_layout.py sets the laptop size
    window._open_splitter()  # the input panel's opening width at this size
    qtbot.waitUntil(lambda: window.size() == LAPTOP)
    window.inputs.setCurrentIndex(list(window.tabs).index("hardware"))
    QApplication.processEvents()
    tab = window.tabs["hardware"]
    for combo in (tab.accel, tab.node):
        assert _text_room(combo) >= _widest(combo), (combo.objectName(), combo.width())
