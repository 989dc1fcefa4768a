"""Parallelism tab: the TP × PP × CP × DP grid (EP folded over it), strategy and its knobs."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QWidget

from engine.sections.parallel import ParallelismSection, StrategyKnobs
from gui.document import PlanDocument
from gui.tabs.base import TabPage


class ParallelismTab(TabPage):
    def __init__(self, doc: PlanDocument, units: str, parent: QWidget | None = None) -> None:
        super().__init__(doc, units, parent)
        self.world = QLabel(self.widget())
        self.world.setObjectName("worldSize")
        self.column.addWidget(self.world)
        self.add_section(
            "Layout",
            ParallelismSection,
            "parallelism",
            include=("tp", "pp", "cp", "ep", "expert_tp", "dp", "ranks_per_node"),
        )
        self.add_section(
            "Sharding strategy",
            ParallelismSection,
            "parallelism",
            include=("strategy", "shard_group_size", "sequence_parallel", "tp_style", "cp_comm"),
        )
        self.add_section(
            "Pipeline",
            ParallelismSection,
            "parallelism",
            include=(
                "pp_schedule",
                "virtual_stages",
                "pp_layer_split",
                "pp_layout",
                "pp_split_policy",
            ),
        )
        self.add_section(
            "Framework knobs (code defaults)", StrategyKnobs, "parallelism.knobs", collapsed=True
        )
        doc.planChanged.connect(self._world)
        self._world()
        self.finish()

    def _world(self) -> None:
        par = self.doc.plan.parallelism
        self.world.setText(
            f"World size: <b>{par.world_size:,}</b> ranks = TP {par.tp} × PP {par.pp} × "
            f"CP {par.cp} × DP {par.dp}"
            + (f"; EP {par.ep} × expert TP {par.expert_tp} folded over them" if par.ep > 1 else "")
        )
