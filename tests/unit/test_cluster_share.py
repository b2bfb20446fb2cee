"""A fleet's clusters split among stream apps (`kmon stream --cluster-share I/N`), without Spark: which
share takes which cluster, the flag (tests/unit/test_stream_config.py), and a checkpoint restarted with a share. Spark's own filter (its
crc32 of the key's cluster) is checked against this one in tests/integration/test_stream.py."""
from __future__ import annotations

from pathlib import Path

import pytest

from kmon.codec import encode
from kmon.events import EVENTS_TOPIC, ControllerState, Event, ZnodeMeta
from streaming.cluster_share import ClusterShare, parse_cluster_share
from streaming.driver import ViewDriver
from streaming.fold.entity_step import fold
from streaming.published import LatestPublished
from streaming.record_log import RecordLog
from streaming.views import ViewOptions
from tests.unit.views_builders import batch, history, scrape, value


def test_each_cluster_belongs_to_exactly_one_share_of_a_fleet_and_every_share_gets_some() -> None:
    names = [f"cluster-{i}" for i in range(200)] + ["unknown", "prod.eu-west-1", "a"]
    for count in (1, 2, 3, 7):
        shares = [ClusterShare(i, count) for i in range(count)]
        assert all(sum(share.takes(name) for share in shares) == 1 for name in names)
        assert all(sum(share.takes(name) for name in names) > 200 / count / 2 for share in shares)


@pytest.mark.parametrize("text, share", [("0/1", ClusterShare()), ("2/3", ClusterShare(2, 3)), (" 0/2 ", ClusterShare(0, 2))])
def test_a_share_is_written_i_of_n(text: str, share: ClusterShare) -> None:
    assert parse_cluster_share(text) == share
    assert parse_cluster_share(str(share)) == share


@pytest.mark.parametrize("text", ["3/3", "1/0", "-1/2", "1", "a/b", "", "1/2/3"])
def test_a_bad_share_is_refused_naming_it(text: str) -> None:
    with pytest.raises(ValueError, match="cluster share"):
        parse_cluster_share(text)


def controller_of(cluster: str, broker: int, zxid: int) -> dict:
    event = Event(cluster=cluster, source="zk", kind="controller", entity="controller", op="upsert",
                  observed_ms=1_000 * zxid, data=ControllerState(broker, zxid), zxid=zxid, znode=ZnodeMeta("/x", zxid, 0, 0))
    return fold(f"{cluster}/controller", None, [(0, zxid, encode(event).decode())])


def test_a_checkpoint_restarted_with_a_share_drops_the_other_clusters_records_and_counters(tmp_path: Path) -> None:
    kept, left = "c1", next(c for c in (f"c{i}" for i in range(2, 50)) if ClusterShare(0, 2).takes(c))
    share = ClusterShare(1, 2)
    assert share.takes(kept) and not share.takes(left)
    whole = LatestPublished()
    driver = ViewDriver(RecordLog(tmp_path), history(tmp_path), whole, ViewOptions(), EVENTS_TOPIC)
    driver.on_batch(1, *batch([controller_of(kept, 1, 1), controller_of(left, 2, 1)]), started=0.0)
    assert [value(scrape(whole), "kmon_controller_id", cluster=c) for c in (kept, left)] == [1, 2]

    shared = LatestPublished()
    ViewDriver(RecordLog(tmp_path), history(tmp_path), shared, ViewOptions(), EVENTS_TOPIC, takes=share.takes)
    series = scrape(shared)
    assert value(series, "kmon_controller_id", cluster=kept) == 1
    assert value(series, "kmon_stream_input_rows_total", cluster=kept) == 1
    assert not [key for key in series if ("cluster", left) in key[1]]
