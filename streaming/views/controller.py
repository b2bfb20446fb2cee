"""The controller family: which broker is the active controller, its epoch, how often it changed."""
from __future__ import annotations

from typing import Iterator

from kmon.events import ControllerState
from kmon.history import CONTROLLER_CHANGES
from streaming.fold.transitions import NO_LEADER
from streaming.views.cluster import ClusterModel
from streaming.views.exposition import Sample, Text, render

FAMILY = "controller"


def render_family(model: ClusterModel) -> list[Text]:
    return [render(model.name, _samples(model))]


def _samples(model: ClusterModel) -> Iterator[Sample]:
    for record in model.live("controller"):   # one entity: "controller"; none until the collector saw it
        state: ControllerState = record.state
        yield "kmon_controller_id", {}, state.broker_id
        if state.epoch is not None:
            yield "kmon_controller_epoch", {}, state.epoch
        yield "kmon_active_controller_count", {}, int(state.broker_id != NO_LEADER)
        yield "kmon_controller_changes_total", {}, record.counters.get(CONTROLLER_CHANGES, 0)
