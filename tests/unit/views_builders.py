"""Builders the views' tests share: entity records, scraped series, the driver's rows and batches."""
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from kmon.codec import encode
from kmon.events import BrokerState, ControllerState, Event, PartitionState, TopicState, ZnodeMeta
from streaming.fold.entity_step import fold, summarise
from streaming.fold.entity import EntityRecord
from streaming.history_log import HistoryLog
from streaming.published import LatestPublished

Series = dict[tuple[str, frozenset], float]


def rec(kind: str, entity: str, state, counters=None, cluster="c1", source="zk", **kw) -> EntityRecord:
    return EntityRecord(cluster=cluster, entity=entity, kind=kind, source=source, state=state,
                        position=1, counters=counters or {}, **kw)


def broker(b: int) -> EntityRecord:
    return rec("broker", f"broker:{b}", BrokerState(b, f"h{b}", 9092, None))


def topic(name: str, replicas: dict, **kw) -> EntityRecord:
    return rec("topic", f"topic:{name}", TopicState(name, None, replicas, **kw))


def part(t: str, p: int, leader: int, isr: tuple[int, ...], counters=None, **kw) -> EntityRecord:
    return rec("partition", f"partition:{t}:{p}", PartitionState(t, p, leader, 0, isr, 1), counters, **kw)


BROKERS = [broker(1), broker(2), broker(3)]


def keyed(records) -> dict[str, EntityRecord]:
    return {f"{r.cluster}/{r.entity}": r for r in records}


def parse(body: bytes) -> Series:
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(body.decode()) for s in family.samples}


def value(s: Series, name: str, cluster="c1", **labels) -> float | None:
    return s.get((name, frozenset({"cluster": cluster, **{k: str(v) for k, v in labels.items()}}.items())))


def scrape(holder: LatestPublished, now_ms: int = 10_000) -> Series:
    return parse(holder.get().exposition.body(now_ms))


def errors(series: Series) -> dict[str, float]:
    return {dict(labels)["family"]: v for (name, labels), v in series.items() if name == "kmon_view_errors_total"}


def history(directory: Path) -> HistoryLog:
    return HistoryLog(directory / "history", "test", 7)


def row(kind: str, entity: str, state, zxid: int) -> dict:
    event = Event(cluster="c1", source="zk", kind=kind, entity=entity, op="upsert", observed_ms=1_000 * zxid,
                  data=state, zxid=zxid, znode=ZnodeMeta("/x", zxid, 0, 0))
    return fold(f"c1/{entity}", None, [(0, zxid, encode(event).decode())])


def batch(rows: list[dict]) -> tuple[dict[str, str | None], list[dict]]:
    """fold()'s rows as the sink hands them to the driver: records by key, the bucket's summary."""
    return {row["key"]: row["record"] for row in rows}, [summarise(rows)]


def controller_row(broker: int, epoch: int, zxid: int) -> dict:
    return row("controller", "controller", ControllerState(broker, epoch), zxid)
