"""The collectors' events buffer through an events-cluster outage: a publisher whose events bootstrap
does not answer takes the events of a synthetic cluster's snapshot (bench.synthetic: brokers, topics,
partitions) and holds them, as a collector's does while the events cluster is down. The process's
resident memory before and after, per event held; no Kafka is started."""
from __future__ import annotations

import gc
import os
import time
from typing import Callable

from bench.support.measure import rss_mb
from bench.synthetic import Shape, Zxids, healthy
from collectors.publisher import Publisher, PublisherConfig
from collectors.telemetry import Telemetry
from kmon.codec import encode
from stack.process import free_port


def run(partitions: int, log: Callable[[str], None]) -> dict:
    events = list(healthy(Shape(partitions), Zxids()))
    mean = sum(len(encode(e)) for e in events[:1000]) / min(len(events), 1000)
    publisher = Publisher(PublisherConfig(bootstrap_servers=f"127.0.0.1:{free_port()}", buffer_size=len(events) + 1),
                          Telemetry("bench"))
    publisher.start()
    try:
        time.sleep(1.0)   # the producer thread and its client up, before the baseline
        gc.collect()
        before, cpu = rss_mb(os.getpid()), time.process_time()
        for event in events:
            publisher.publish(event)
        took = time.process_time() - cpu
        time.sleep(2.0)   # the producer thread hands what it can to its client
        gc.collect()
        grown = (rss_mb(os.getpid()) - before) * 1024 * 1024
        held = publisher.buffered
    finally:
        publisher._closing.set()   # no flush: the events cluster never answered
    log(f"{len(events)} events published, {held} held, resident memory +{grown / 1e6:.0f} MB")
    return {"partitions": partitions, "events": len(events), "held": held, "event_bytes": round(mean),
            "resident_mb": round(grown / 1e6, 1), "bytes_per_event": round(grown / max(held, 1)),
            "publish_cpu_s": round(took, 2), "peak_rss_mb": round(rss_mb(os.getpid(), "VmHWM"))}
