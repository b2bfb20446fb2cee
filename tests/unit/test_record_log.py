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


def test_small_batches_append_deltas_until_they_outweigh_the_full_file(tmp_path: Path) -> None:
    log = RecordLog(tmp_path)
    current = {f"c1/k{i}": record(1, i) for i in range(1, 4)}
    log.append(1, stored(current))                                             # nothing stored yet: a full file
    assert files(tmp_path) == ["full-1.jsonl"]
    log.append(2, stored({"c1/k1": record(2, 5)}))
    log.append(3, stored({"c1/k2": record(2, 6)}))
    assert files(tmp_path) == ["delta-2.jsonl", "delta-3.jsonl", "full-1.jsonl"]
    log.append(4, stored({"c1/k4": record(2, 7)}))                             # 3 delta rows >= 3 full rows
    assert files(tmp_path) == ["full-4.jsonl"]
    assert RecordLog(tmp_path).load().records == {"c1/k1": record(2, 5), "c1/k2": record(2, 6),
                                                  "c1/k3": record(1, 3), "c1/k4": record(2, 7)}
    log.append(5, stored({}))                                                  # nothing changed: nothing written
    assert files(tmp_path) == ["full-4.jsonl"]


def test_load_is_the_full_file_plus_later_deltas_and_removals(tmp_path: Path) -> None:
    log = RecordLog(tmp_path, max_deltas=2)
    a, b = record(1, 1), record(2, 2)
    log.append(1, stored({"c1/a": a, "c1/b": b, "c1/c": b}))
    log.append(2, stored({"c1/b": b}))
    log.append(3, stored({"c1/a": None}))                       # the second delta: max_deltas compacts
    assert files(tmp_path) == ["full-3.jsonl"]
    log.append(4, stored({"c1/c": a}))
    assert files(tmp_path) == ["delta-4.jsonl", "full-3.jsonl"]
    restarted = RecordLog(tmp_path, max_deltas=2)
    assert restarted.load().records == {"c1/b": b, "c1/c": a}
    restarted.append(5, stored({"c1/a": b}))                    # counts the loaded delta: compacts
    assert files(tmp_path) == ["full-5.jsonl"]
    assert RecordLog(tmp_path).load().records == {"c1/a": b, "c1/b": b, "c1/c": a}


def test_records_not_kept_at_load_leave_the_files(tmp_path: Path) -> None:
    a, b = record(1, 1), record(2, 2)
    RecordLog(tmp_path).append(1, stored({"c1/a": a, "c2/b": b}))
    RecordLog(tmp_path).append(2, stored({"c2/b": a}))
    assert RecordLog(tmp_path).load(keeps=lambda key: key.startswith("c1/")).records == {"c1/a": a}
    assert files(tmp_path) == ["full-2.jsonl"]
    assert RecordLog(tmp_path).load().records == {"c1/a": a}


def test_keys_of_any_text_survive_the_rewrite_from_the_files(tmp_path: Path) -> None:
    odd = ['c1/group:a","record":null}', "c1/group:back\\slash", "c1/group:ünï", "c1/group:plain"]
    log = RecordLog(tmp_path, max_deltas=3)
    log.append(1, stored({key: record(1, i) for i, key in enumerate(odd)}))
    log.append(2, stored({odd[0]: record(2, 9), odd[2]: None}))
    log.append(3, stored({odd[3]: record(2, 8)}))
    log.append(4, stored({odd[1]: None}))                      # the third delta: rewritten from the files
    assert files(tmp_path) == ["full-4.jsonl"]
    assert RecordLog(tmp_path).load().records == {odd[0]: record(2, 9), odd[3]: record(2, 8)}
