"""Issue 5: the same app under spark-submit, on a local-cluster master (separate executor JVMs)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kmon.events import BrokerState, ControllerState, TopicState
from stack.local import LocalStack
from stack.process import free_port
from tests.support import Events, eventually, value

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


def test_spark_submit_on_local_cluster_serves_the_views(stack: LocalStack, tmp_path: Path) -> None:
    assert stack.state
    topic, cluster, port = "kmon-events-submit", "submitted", free_port()
    ev = Events(stack, topic, cluster)
    ev.send("controller", "controller", ControllerState(2, 7))
    ev.send("broker", "broker:1", BrokerState(1, "127.0.0.1", 9001, None))
    ev.send("topic", "topic:t", TopicState("t", None, {0: (1, 2)}))
    ev.partition(0, 1, (1,), 0)  # only the topic "orders" gets partitions from Events.partition
    spark_submit = Path(sys.executable).parent / "spark-submit"
    log = open(tmp_path / "spark-submit.log", "wb")
    proc = subprocess.Popen(
        [str(spark_submit), "--master", "local-cluster[2,1,1024]",
         "--jars", ",".join(stack.tools.spark_jar_list()),
         "--conf", "spark.ui.enabled=false",
         str(REPO / "streaming" / "submit.py"),
         "--bootstrap-servers", stack.state.bootstrap_servers, "--events-topic", topic,
         "--checkpoint", str(tmp_path / "checkpoint"), "--metrics-host", "127.0.0.1",
         "--metrics-port", str(port), "--trigger-interval", "0.5"],
        stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    try:
        eventually(lambda: value(port, "kmon_controller_id", cluster) == 2, 240,
                   f"controller exported (log: {tmp_path / 'spark-submit.log'})")
        assert value(port, "kmon_controller_epoch", cluster) == 7
        assert value(port, "kmon_brokers", cluster) == 1
        assert proc.poll() is None
        # SIGTERM reaches spark-submit's JVM, which stops the context and exits 128+15;
        # the checkpoint makes that stop safe (see test_stream's restart)
        proc.terminate()
        assert proc.wait(timeout=120) in (0, 143)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
