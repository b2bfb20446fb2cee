"""What a local stack's cluster says of itself: the brokers registered in ZooKeeper or in the KRaft
metadata, the controller, and the waits until a (re)started server serves."""
from __future__ import annotations

import contextlib
import json
import logging
import ssl
from typing import Iterator

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from stack import configs
from stack.probes import answers_api_versions, metadata_brokers, serves_metadata
from stack.process import wait_until
from stack.state import Component, StackError, StackState, kafka_node

log = logging.getLogger("kmon.stack")


@contextlib.contextmanager
def zookeeper(state: StackState) -> Iterator[KazooClient]:
    """A client on the stack's chroot, stopped and closed on leaving the block."""
    if state.kraft:   # and its controller is the quorum's leader, which no ZooKeeper names
        raise StackError(f"the stack in {state.dir} runs KRaft: it has no ZooKeeper")
    client = KazooClient(hosts=state.zk_connect, timeout=10, **state.zk_client())
    client.start(timeout=15)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def registered_brokers(state: StackState) -> list[int]:
    """The brokers registered in ZooKeeper; under KRaft, those registered and unfenced in the
    metadata (as the first broker that answers lists them)."""
    if state.kraft:
        client = state.kafka_client()
        for c in state.components.values():
            if c.name.startswith("broker-") and c.alive() and (found := metadata_brokers(c.port, client)):
                return sorted(found)
        return []
    with zookeeper(state) as client:
        try:
            return sorted(int(x) for x in client.get_children("/brokers/ids"))
        except NoNodeError:
            return []


def controller_id(state: StackState) -> int:
    """The controller broker (ZooKeeper mode only: under KRaft, DescribeCluster and Metadata
    name a random broker, and the active controller is the quorum's leader); -1 while none is."""
    with zookeeper(state) as client:
        try:
            data, _ = client.get("/controller")
        except NoNodeError:
            return -1
    return int(json.loads(data)["brokerid"])


def wait_broker(state: StackState, c: Component, timeout: float) -> None:
    """A ZooKeeper-mode broker registered, then serving metadata."""
    broker_id = int(c.name.split("-")[1])
    wait_until(lambda: broker_id in registered_brokers(state), timeout,
               f"broker {broker_id} (log: {c.log})", interval=0.5, alive=c.alive)
    # Registered is not ready: the broker opens its port and learns the cluster (the
    # controller's UpdateMetadata) after registering; an admin request sent before that
    # can go unanswered until it times out.
    client = state.kafka_client()
    wait_until(lambda: serves_metadata(c.port, broker_id, client), timeout,
               f"broker {broker_id} serving metadata (log: {c.log})", interval=0.5, alive=c.alive)
    log.info("broker %d registered and serving", broker_id)


def wait_kraft_cluster(state: StackState, timeout: float) -> None:
    """Every broker registered and unfenced, as each broker's own metadata shows it. Not
    DescribeCluster's controller: under KRaft a broker answers with a random broker there."""
    nodes = [c for n, c in state.components.items() if kafka_node(n)]

    def none_died() -> bool:   # a dead controller would leave the brokers waiting until the timeout
        if dead := [c for c in nodes if not c.alive()]:
            raise RuntimeError(f"{dead[0].name} exited before the cluster was ready (log: {dead[0].log})")
        return True
    brokers = [c for c in nodes if c.name.startswith("broker-")]
    ids = {int(c.name.split("-")[1]) for c in brokers}
    client = state.kafka_client()
    for c in sorted(brokers, key=lambda c: int(c.name.split("-")[1])):
        wait_until(lambda: ids <= metadata_brokers(c.port, client), timeout,
                   f"{c.name} serving metadata that lists every broker (log: {c.log})", interval=0.5,
                   alive=none_died)
    log.info("KRaft cluster %s: brokers %s registered and serving, controllers %s", state.cluster_id,
             ", ".join(map(str, sorted(ids))), state.controllers)


def wait_kraft_node(state: StackState, c: Component, timeout: float) -> None:
    """A (re)started KRaft node serves: a broker lists itself in its metadata (registered and
    unfenced: it caught up with the metadata log), a dedicated controller answers requests."""
    if c.name.startswith("broker-"):
        broker_id = int(c.name.split("-")[1])
        client = state.kafka_client()
        wait_until(lambda: broker_id in metadata_brokers(c.port, client), timeout,
                   f"{c.name} registered and serving (log: {c.log})", interval=0.5, alive=c.alive)
    else:
        secure = state.secure_files
        tls = ssl.create_default_context(cafile=str(secure.ca)) if secure else None
        wait_until(lambda: answers_api_versions(c.controller_port, tls), timeout,
                   f"{c.name} serving on 127.0.0.1:{c.controller_port} (log: {c.log})", interval=0.5,
                   alive=c.alive)
    log.info("%s serving", c.name)


def wait_events_node(c: Component, timeout: float) -> None:
    wait_until(lambda: serves_metadata(c.port, configs.EVENTS_NODE_ID), timeout,
               f"events cluster (log: {c.log})", interval=0.5, alive=c.alive)
    log.info("events cluster serving on 127.0.0.1:%d", c.port)
