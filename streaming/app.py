"""The Spark Structured Streaming app: events topic -> per-entity state -> views -> /metrics.

Runs in-process on ``local[*]`` by default (``kmon stream``), or under spark-submit on a real
cluster (``streaming/submit.py``), where the master comes from spark-submit.
"""
from __future__ import annotations

import functools
import logging
import math
import os
import re
import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from py4j.protocol import Py4JError

from kmon import http
from kmon.codec import parse_json
from kmon.gc_tuning import collect_less_often
from kmon.reachability import EVENTS_BOOTSTRAP, PROBE_S, Reachability, keep_probing, tcp_probe, watch
from streaming import cluster_share, pydaemon
from streaming.api import PREFIX as API_PREFIX, Api
from streaming.driver import ViewDriver
from streaming.exporter import serve_metrics
from streaming.fold import entity_step
from streaming.fold.arrow import from_ipc
from streaming.fold.entity import RecordJson
from streaming.gc_tuning import ARROW_POOL_ENV, FrozenAfterUse, arrow_on_the_system_allocator
from streaming.history_log import HistoryLog, writer_id
from streaming.history_query import HistoryReader
from streaming.checkpoint_lock import CheckpointLock
from streaming.paths import history_dir
from streaming.published import LatestPublished
from streaming.record_log import RecordLog
from streaming.stall import BatchClock
from streaming.view_thread import ViewThread
from streaming.config import StreamConfig

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger("kmon.stream")
SIGNAL_GRACE_S = 2.0   # how long a failed query waits for the signal that may have caused it
# How long a stop waits for Spark. A signal to the whole process group mid-batch stops the JVM's
# context under the running batch, and stopping the query could then wait forever.
STOP_LIMIT_S = 30.0
# Spark's JVM exits once its gateway's stdin closes; its first exit on a new class path writes the
# class archive (kmon/class_archive.py), seconds more: "stopped" waits for it, this long at most
JVM_EXIT_S = 20.0


class StreamApp:
    """Owns the Spark session, the query and the exporter; start() then stop()."""

    def __init__(self, cfg: StreamConfig):
        self.cfg = cfg
        self.holder = LatestPublished()
        self._spark = None
        self._query = None
        self._server = None
        self.driver: ViewDriver | None = None
        self._views: ViewThread | None = None
        self._finished = 0   # batches through the sink
        self._batch_clock = BatchClock()
        self._lock = CheckpointLock(cfg.checkpoint)

    def start(self) -> None:
        cfg = self.cfg
        self._lock.acquire()
        collect_less_often()
        arrow_on_the_system_allocator()
        history = HistoryLog(history_dir(cfg.checkpoint, cfg.history_dir), writer_id(cfg.checkpoint),
                             cfg.history_retention_days)
        self.driver = ViewDriver(RecordLog(cfg.checkpoint / "kmon-views"), history, self.holder, cfg.views,
                                 cfg.events_topic, takes=cfg.cluster_share.takes)
        self._views = ViewThread(self.driver, around=FrozenAfterUse().paused)
        self._views.start()
        api = Api(self._views.ask, HistoryReader(history.dir))
        self._server = serve_metrics(cfg.metrics_host, cfg.metrics_port, self.holder, cfg.web, more=api.routes())
        log.info("exporter on %s://%s:%d/metrics, the API on %s/%s", cfg.web.scheme, cfg.metrics_host,
                 self.metrics_port, API_PREFIX, cfg.web.describe())
        started = time.monotonic()
        log.info("starting Spark (%s)...", cfg.master or "master from spark-submit")
        self._spark = _session(cfg)
        self._lock.hold_in_jvm(self._spark.sparkContext._jvm)
        self._query = _query(self._spark, cfg, self.on_batch)
        log.info("streaming %s from %s (checkpoint %s) after %.1fs",
                 cfg.events_topic, cfg.bootstrap_servers, cfg.checkpoint, time.monotonic() - started)
        if not cfg.cluster_share.everything:
            log.info("taking share %s of the clusters: those whose name's CRC-32 mod %d is %d",
                     cfg.cluster_share, cfg.cluster_share.count, cfg.cluster_share.index)

    @property
    def metrics_port(self) -> int:
        return self._server.server_address[1] if self._server else self.cfg.metrics_port

    def restart_query(self) -> None:
        """A new run of the query, from the checkpoint, in the same Spark session and exporter."""
        assert self._spark is not None
        self._query = _query(self._spark, self.cfg, self.on_batch)
        log.info("the query runs again from the checkpoint")

    def failure(self) -> str | None:
        """Why the query or the views stopped on their own, if they did."""
        if self._views is not None and (why := self._views.failure()) is not None:
            return why
        try:
            if self._query is not None and not self._query.isActive:
                exc = self._query.exception()
                return str(exc) if exc else "query stopped"
        except (Py4JError, ConnectionError) as e:
            proc = getattr(getattr(self._spark.sparkContext, "_gateway", None), "proc", None) if self._spark else None
            return jvm_gone(type(e).__name__, proc.poll() if proc is not None else None)
        return None

    def quiet(self) -> None:
        """Once kmon stops, each call a stopping JVM breaks is not told with a stack trace (py4j logs them,
        pyspark's accumulator server prints them): what is gone is said once, in kmon's words."""
        quiet_py4j()
        server = getattr(self._spark.sparkContext, "_accumulatorServer", None) if self._spark is not None else None
        if server is not None:
            server.handle_error = lambda request, client_address: None

    def stop(self, limit_s: float = STOP_LIMIT_S) -> None:
        # A signal to the whole process group (systemd's KillMode=control-group, `timeout`,
        # Kubernetes) stops Spark's JVM too, maybe before this runs: what is gone is said once.
        self.quiet()
        stopped = threading.Event()
        threading.Thread(target=self._leave_if_stuck, args=(stopped, limit_s), name="kmon-stream-stopping",
                         daemon=True).start()
        try:
            self._stop()
        finally:
            stopped.set()

    def _leave_if_stuck(self, stopped: threading.Event, limit_s: float) -> None:
        if not stopped.wait(limit_s):
            log.warning("Spark did not stop within %g s (its JVM was stopped under a running batch): exiting; the "
                        "checkpoint holds every completed batch", limit_s)
            self.abandon(0)

    def _stop(self) -> None:
        try:
            if self._query is not None:
                log.info("stopping the query (the running batch completes first)")
                self._query.stop()
            if self._spark is not None:
                # the state stores' maintenance thread outlives the context and logs a stack trace
                # for each of its runs after it ("SparkEnv not active")
                jvm = self._spark.sparkContext._jvm
                jvm.org.apache.spark.sql.execution.streaming.state.StateStore.stop()
                self._spark.stop()
                self._lock.release_in_jvm(jvm)
        except (Py4JError, ConnectionError) as e:
            log.info("Spark's JVM had already stopped (%s): the checkpoint holds every completed batch",
                     type(e).__name__)
        jvm_process = _let_jvm_go() if self._spark is not None else None   # its exit begins while the rest stops
        if self._views is not None:
            self._views.stop()
        if self._server is not None:
            http.stop(self._server)
        self._lock.release()
        if jvm_process is not None:
            _wait_for_jvm(jvm_process)
        log.info("stream stopped")


    def on_batch(self, batch_id: int, stored: Mapping[str, RecordJson | None], summaries: Iterable[Mapping[str, Any]],
                 started: float, history: Iterable[pa.Table]) -> None:
        """The sink's part: the batch persisted before Spark commits it, the views left to their thread."""
        assert self.driver is not None and self._views is not None
        self._views.submit(self.driver.persist(batch_id, stored, summaries, started, history))
        self._finished += 1

    def batch_running_for(self, counting: bool = True) -> float:
        """Seconds the running micro-batch has run, 0 between batches and while not ``counting``
        (the events cluster away: Spark's Kafka source then retries within a trigger)."""
        active = counting and bool(self.spark_status().get("isTriggerActive"))
        return self._batch_clock.running_for(active, self._finished, time.monotonic())

    def spark_status(self) -> dict[str, Any]:
        """The query's status as Spark reports it ({} without a query or a JVM: failure() says why)."""
        try:
            return self._query.status if self._query is not None else {}
        except (Py4JError, ConnectionError):
            return {}

    def abandon(self, code: int) -> None:
        """Exit at once with ``code``, the query left as it is: a stuck batch cannot be
        interrupted from here, and stopping the query would wait for it. Spark's JVM exits
        with this process (its gateway reads our pipe); the checkpoint holds every batch
        that completed."""
        if self._server is not None:
            http.stop(self._server)
        logging.shutdown()
        os._exit(code)


def _session(cfg: StreamConfig):
    from pyspark.sql import SparkSession

    # Python workers must import kmon and pandas/pyarrow from this interpreter's env.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    b = SparkSession.builder.appName("kmon-stream")
    if cfg.master:
        b = b.master(cfg.master)
    for k, v in {
        "spark.jars": ",".join(cfg.spark_jars),
        "spark.driver.memory": cfg.driver_memory,
        "spark.driver.extraJavaOptions": " ".join(cfg.driver_java_options),
        "spark.sql.shuffle.partitions": str(shuffle_partitions(cfg)),
        "spark.sql.streaming.stateStore.providerClass":
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
        # a commit writes the batch's changes, not a RocksDB checkpoint per task; snapshots are
        # made in the background (Spark reads checkpoints of either kind)
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        "spark.ui.enabled": "false",
        # Spark's status store keeps every job, stage and SQL execution it may show (1000 each by
        # default) whether or not the UI runs; one micro-batch a second filled the heap by ~10 MB a
        # minute for the first quarter hour of a soak. kmon exports its own progress: keep a few.
        "spark.sql.ui.retainedExecutions": "20",
        "spark.ui.retainedJobs": "20",
        "spark.ui.retainedStages": "20",
        "spark.ui.retainedTasks": "1000",
        "spark.ui.showConsoleProgress": "false",  # progress bars would fill the log file
        "spark.sql.session.timeZone": "UTC",
        # Spark's default hides passwords and tokens in logs and the UI, not sasl.jaas.config
        "spark.redaction.regex": "(?i)secret|password|token|access[.]key|jaas",
        # the workers are this interpreter, with kmon importable (see the module)
        "spark.python.daemon.module": pydaemon.MODULE if _in_process(cfg) else "",
        **{f"spark.executorEnv.{name}": value for name, value in ARROW_POOL_ENV.items()},
    }.items():
        if v:
            b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    # "Current batch is falling behind" on every batch longer than the trigger: with a short
    # trigger, that is any batch with events in it (a batch's duration is a metric instead)
    jvm = spark.sparkContext._jvm
    jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
        "org.apache.spark.sql.execution.streaming.ProcessingTimeExecutor", jvm.org.apache.logging.log4j.Level.ERROR)
    return spark


def quiet_py4j() -> None:
    """py4j's stack traces not logged from now on (some go through the root logger)."""
    logging.getLogger("py4j").setLevel(logging.CRITICAL)
    root = logging.getLogger()
    if not any(isinstance(f, NotFromPy4j) for f in root.filters):
        root.addFilter(NotFromPy4j())


class NotFromPy4j(logging.Filter):
    """Drops the records py4j logs through the root logger (``logging.exception`` in its gateway)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return f"{os.sep}py4j{os.sep}" not in record.pathname


def _in_process(cfg: StreamConfig) -> bool:
    """A local master: the Python workers run on this machine with this interpreter, so kmon
    is importable in them (``local-cluster`` included)."""
    return bool(cfg.master) and cfg.master.startswith("local")


def shuffle_partitions(cfg: StreamConfig) -> int:
    """One state partition per core of a local master: each costs every micro-batch a task
    (Python worker hand-off, state commit) however few events it holds."""
    if cfg.shuffle_partitions is not None:
        return cfg.shuffle_partitions
    local = re.fullmatch(r"local(?:\[(\d+|\*)(?:,\d+)?\])?", cfg.master or "")
    if not local:
        return 4
    cores = local.group(1) or "1"
    return (os.cpu_count() or 1) if cores == "*" else int(cores)


# Spark's default pause between two attempts of the source to read the end offsets
OFFSET_RETRY_INTERVAL_S = 1.0


def kafka_source_options(cfg: StreamConfig) -> dict[str, str]:
    """Options of Spark's Kafka source.

    Every batch, the source's driver asks an Admin client for the events topic's end
    offsets. When a broker leading one of its partitions dies, that call waits for the dead
    node until the API timeout, Kafka's default 60 s: every view froze for a minute after
    each broker death, though the controller moves leadership within the ZooKeeper session
    timeout. A failed attempt is retried with a new Admin client (fresh metadata), so a short
    timeout bounds the stall, and enough attempts keep a real outage survivable as long as
    ``kafka_outage_limit_s``.
    """
    timeout_ms = str(int(cfg.kafka_timeout_s * 1000))
    attempts = max(3, math.ceil(cfg.kafka_outage_limit_s / (cfg.kafka_timeout_s + OFFSET_RETRY_INTERVAL_S)))
    return {
        "kafka.bootstrap.servers": cfg.bootstrap_servers,
        "subscribe": cfg.events_topic,
        "startingOffsets": "earliest",
        # compaction and retention delete offsets by design
        "failOnDataLoss": "false",
        "maxOffsetsPerTrigger": str(cfg.max_offsets_per_trigger),
        # the Admin client refuses an API timeout shorter than its request timeout
        "kafka.request.timeout.ms": timeout_ms,
        "kafka.default.api.timeout.ms": timeout_ms,
        "fetchOffset.numRetries": str(attempts),
        "fetchOffset.retryIntervalMs": str(int(OFFSET_RETRY_INTERVAL_S * 1000)),
        # the executors' reads of a one-event range waited out the broker's default 500 ms
        "kafka.fetch.max.wait.ms": "10",
        **cfg.kafka_client.spark_options(),
    }


def _query(spark, cfg: StreamConfig, on_batch: Callable[..., None]):
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    raw = spark.readStream.format("kafka").options(**kafka_source_options(cfg)).load()
    key = F.coalesce(F.col("key").cast("string"), F.lit(""))
    if not cfg.cluster_share.everything:   # the other apps' clusters, left in the JVM
        raw = raw.where(cluster_share.spark_condition(cfg.cluster_share, key))
    rows = raw.select(key.alias("key"), F.col("value").cast("string").alias("value"), "partition", "offset",
                      F.pmod(F.hash(key), F.lit(entity_step.BUCKETS)).alias("bucket"))
    out = rows.groupBy("bucket").applyInPandasWithState(
        entity_step.step, entity_step.OUTPUT_SCHEMA, entity_step.STATE_SCHEMA, "update",
        GroupStateTimeout.NoTimeout)

    def sink(batch_df, batch_id: int) -> None:
        started = time.time()
        # as Arrow columns: collect() made a Row per changed key, a second of the driver per 100k
        out = batch_df.toArrow()
        stored = dict(zip(out.column("key").to_pylist(), out.column("record").to_pylist()))
        summaries = [parse_json(s) for s in out.column("summary").to_pylist() if s is not None]
        history = [from_ipc(data) for data in out.column("history").to_pylist() if data is not None]
        on_batch(batch_id, stored, summaries, started, history)

    # "spark-buckets": state per bucket (a checkpoint of the per-key layout of earlier kmon
    # versions, in "spark", is not read; the events topic is replayed into the new layout)
    return (out.writeStream.outputMode("update").foreachBatch(sink)
            .option("checkpointLocation", str(cfg.checkpoint / "spark-buckets"))
            .trigger(processingTime=f"{cfg.trigger_seconds} seconds")
            .start())


# Spark's own exit codes (SparkExitCode) of a JVM that ended itself, as an operator reads them
SPARK_EXITS = {
    50: "an uncaught exception in one of its threads",
    52: "out of memory",
}


def _let_jvm_go() -> subprocess.Popen | None:
    """pyspark's gateway closed and forgotten, so that a later session in this process launches a JVM
    of its own; the JVM exits once its stdin closes. Returns its process (None: not launched here)."""
    from pyspark import SparkContext
    gateway, SparkContext._gateway, SparkContext._jvm = SparkContext._gateway, None, None
    if gateway is None:
        return None
    process = getattr(gateway, "proc", None)
    if process is not None and process.stdin is not None:
        process.stdin.close()
    return process


def _wait_for_jvm(process: subprocess.Popen) -> None:
    """Spark's JVM gone before the stream says it stopped: a service manager or a test that sees the
    stream exit finds nothing of it left."""
    try:
        process.wait(1)
        return
    except subprocess.TimeoutExpired:
        log.info("waiting for Spark's JVM (pid %d) to exit: it writes its class archive on a first exit", process.pid)
    try:
        process.wait(JVM_EXIT_S)
    except subprocess.TimeoutExpired:
        log.warning("Spark's JVM (pid %d) did not exit within %g s: killed", process.pid, JVM_EXIT_S)
        process.kill()
        process.wait(5)


def jvm_gone(error: str, exit_code: int | None) -> str:
    """Why the query stopped when Spark's JVM no longer answers (``error``: what the call raised), with
    what its exit code says; where it ran out of memory, what to do about it."""
    if exit_code is None:
        return f"Spark's JVM is gone ({error})"
    said = SPARK_EXITS.get(exit_code, "its log above says why")
    advice = ("; where its log above names memory, give the next start a larger --driver-memory or split "
              "the clusters among stream apps (--cluster-share): the same batch runs again") if exit_code in SPARK_EXITS else ""
    return f"Spark's JVM is gone ({error}): it exited with {exit_code}, {said}{advice}"


def leave_if_stopped_while_starting(app: StreamApp, stop: threading.Event, started: threading.Event) -> None:
    """A stop while Spark starts (5-20 s, a blocking call that cannot be interrupted) exits at once
    instead of after it: no batch has run yet, so the checkpoint and the views lose nothing, as after
    a crash at that point, which the next start goes on from."""
    stop.wait()
    app.quiet()   # at once: a signal to the process group breaks the JVM's calls before app.stop() runs
    if not started.is_set():
        log.info("stopped while Spark was starting: exiting now (no batch had run)")
        app.abandon(0)


def run_until(app: StreamApp, stop: threading.Event, poll_seconds: float = 1.0) -> int:
    """Run until ``stop`` is set (SIGTERM) or the query fails; returns an exit code. A micro-batch
    stuck for ``stall_timeout_s`` ends the process at once with 1 (stall.py, StreamApp.abandon).

    Spark starts only once the events bootstrap answers: it costs ~20 s of CPU, and then its
    Kafka source would retry in its own words only. A probe of the events bootstrap goes on
    while the query runs, so kmon's log says when the events cluster is away, and why the
    query gave up when it does.
    """
    cfg = app.cfg
    reach = Reachability(EVENTS_BOOTSTRAP, cfg.bootstrap_servers,
                         f"Spark starts once it answers; retrying every {PROBE_S:g} s", log)
    probing = threading.Event()
    threading.Thread(target=keep_probing, args=(reach, functools.partial(tcp_probe, cfg.bootstrap_servers), probing),
                     name="kmon-stream-probe", daemon=True).start()
    try:
        if not watch(stop, [reach], cfg.startup_timeout_s, until=lambda: reach.ever_reached):
            return 1
        if stop.is_set():
            return 0
        limit = cfg.kafka_outage_limit_s
        reach.then = f"Spark's Kafka source retries; the query gives up after {limit:g} s"
        started = threading.Event()
        threading.Thread(target=leave_if_stopped_while_starting, args=(app, stop, started),
                         name="kmon-stream-starting", daemon=True).start()
        app.start()
        started.set()

        stuck = threading.Event()

        def stalled() -> bool:
            running = app.batch_running_for(counting=not reach.out_of_reach)
            if cfg.stall_timeout_s and running > cfg.stall_timeout_s:
                log.error("a micro-batch has run for %.0f s (--stall-timeout %g s; Spark: %s): exiting for "
                          "the service manager to start kmon again from its checkpoint",
                          running, cfg.stall_timeout_s, app.spark_status().get("message", "no status"))
                stuck.set()
            return stuck.is_set()

        while True:
            watch(stop, [reach], until=lambda: app.failure() is not None or stalled(), every=poll_seconds)
            if stuck.is_set():
                app.abandon(1)
            failure = app.failure()
            # a signal to the whole process group may stop Spark's JVM before our handler runs
            if failure is None or stop.wait(SIGNAL_GRACE_S):
                return 0
            if not reach.out_of_reach:
                log.error("the streaming query failed: %s", failure)
                return 1
            # A task reading the events topic gave up while the cluster is away (in local mode one
            # failed task fails the query), though the outage limit is not reached: sit through the
            # rest of it, then go on from the checkpoint (Spark's stack trace only at debug).
            log.debug("the streaming query failed: %s", failure)
            log.warning("the query stopped while the events bootstrap %s is away; it restarts from the "
                        "checkpoint once that answers (--kafka-outage-limit %g s)", cfg.bootstrap_servers, limit)
            watch(stop, [reach], until=lambda: not reach.out_of_reach or reach.down_for() > limit,
                  every=poll_seconds)
            if stop.is_set():
                return 0
            if reach.out_of_reach:
                reach.then = f"the query gave up (--kafka-outage-limit {limit:g} s); exiting"
                log.error("%s", reach.line())
                return 1
            app.restart_query()
    finally:
        probing.set()
        app.stop()
