"""The driver's record log: what a restarted app loads, and how often it rewrites everything."""
from pathlib import Path

from streaming.fold.entity import EntityRecord, RecordJson, record_from_json, record_to_json
from streaming.record_log import RecordLog
from tests.unit.views_builders import controller_row


def record(broker: int, zxid: int) -> EntityRecord:
    return record_from_json(str(controller_row(broker, zxid, zxid)["record"]))


def stored(changed: dict[str, EntityRecord | None]) -> dict[str, RecordJson | None]:
    """The changes as the executor sends them."""
    return {key: None if r is None else record_to_json(r) for key, r in changed.items()}


def files(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir())


def test_small_batches_append_deltas_until_they_outweigh_a_full_file(tmp_path: Path) -> None:
    log = RecordLog(tmp_path)
    current = {f"c1/k{i}": record(1, i) for i in range(1, 4)}   # 3 records held
    log.append(1, stored({"c1/k1": current["c1/k1"]}), stored(current))
    log.append(2, stored({"c1/k2": current["c1/k2"]}), stored(current))
    assert files(tmp_path) == ["delta-1.jsonl", "delta-2.jsonl"]
    log.append(3, stored({"c1/k3": current["c1/k3"]}), stored(current))      # 3 delta rows >= 3 records: compact
    assert files(tmp_path) == ["full-3.jsonl"]
    log.append(4, stored({}), stored(current))                                # nothing changed: nothing written
    assert files(tmp_path) == ["full-3.jsonl"]


def test_load_is_the_full_file_plus_later_deltas_and_removals(tmp_path: Path) -> None:
    log = RecordLog(tmp_path, max_deltas=2)
    a, b = record(1, 1), record(2, 2)
    log.append(1, stored({"c1/a": a}), stored({"c1/a": a, "c1/b": b, "c1/c": b}))
    log.append(2, stored({"c1/b": b}), stored({"c1/a": a, "c1/b": b, "c1/c": b}))   # second delta: max_deltas compacts
    log.append(3, stored({"c1/a": None}), stored({"c1/b": b, "c1/c": b}))
    assert files(tmp_path) == ["delta-3.jsonl", "full-2.jsonl"]
    restarted = RecordLog(tmp_path, max_deltas=2)
    assert restarted.load().records == {"c1/b": b, "c1/c": b}
    restarted.append(4, stored({"c1/c": a}), stored({"c1/b": b, "c1/c": a}))         # counts the loaded delta: compacts
    assert files(tmp_path) == ["full-4.jsonl"]
    assert RecordLog(tmp_path).load().records == {"c1/b": b, "c1/c": a}
