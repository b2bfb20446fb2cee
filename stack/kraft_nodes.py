"""A KRaft stack's nodes: which ones it has, and the storage each needs formatted before its first start."""
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Callable

from stack import configs
from stack.probes import formatted_cluster_id, java_error, kraft_cluster_id
from stack.secure import MTLS_LISTENER
from stack.state import StackError

FIRST_CONTROLLER_ID = 1001   # node id of a KRaft stack's first dedicated controller (brokers are 1..B)


def kraft_layout(brokers: int, controllers: int,
                 port: Callable[[str, str], int]) -> list[tuple[str, configs.KraftNode]]:
    """A KRaft stack's nodes by component name, ``port(name, listener)`` giving each listener's port.
    ``controllers`` 0: brokers 1..B are controllers too; else brokers 1..B are brokers only and the
    controllers are FIRST_CONTROLLER_ID and up."""
    def node(name: str, node_id: int, broker: bool, controller: bool) -> tuple[str, configs.KraftNode]:
        return name, configs.KraftNode(node_id, broker_port=port(name, "PLAINTEXT") if broker else 0,
                                       controller_port=port(name, "CONTROLLER") if controller else 0,
                                       mtls_port=port(name, MTLS_LISTENER) if controller else 0)
    return ([node(f"broker-{i}", i, True, not controllers) for i in range(1, brokers + 1)] +
            [node(f"controller-{i}", i, False, True)
             for i in range(FIRST_CONTROLLER_ID, FIRST_CONTROLLER_ID + controllers)])


def format_storage(java: str, classpath: str, cluster_id: str, nodes: dict[str, tuple[Path, Path]],
                   features: dict[str, int], extra: list[str]) -> None:
    """Format the storage of these KRaft nodes (name -> (properties, log directory)) with the cluster
    id, all at once (a JVM each). The static ``controller.quorum.voters`` in their properties is all
    the tool needs."""
    argv = [java, "-cp", classpath, "kafka.tools.StorageTool", "format", "-t", cluster_id,
            *(arg for name, level in features.items() for arg in ("--feature", f"{name}={level}")), *extra]
    running = {name: subprocess.Popen([*argv, "-c", str(cfg)], text=True, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT) for name, (cfg, _) in nodes.items()}
    failed = []
    for name, p in running.items():
        said, _ = p.communicate(timeout=120)
        if p.returncode != 0:
            failed.append(f"{nodes[name][1]}: {java_error(said) or f'exit status {p.returncode}'}")
    if failed:
        raise StackError(f"formatting the KRaft storage failed: {'; '.join(failed)}")


def format_events_node(java: str, classpath: str, cfg: Path, data: Path) -> None:
    """The events node's storage. A directory formatted before (a resumed stack, or a start that died
    after formatting) keeps its id, which the storage tool checks even with --ignore-formatted."""
    cluster_id = formatted_cluster_id(data) or kraft_cluster_id()
    fmt = subprocess.run([java, "-cp", classpath, "kafka.tools.StorageTool", "format", "-t", cluster_id,
                          "-c", str(cfg), "--ignore-formatted"], capture_output=True, text=True, timeout=120)
    if fmt.returncode != 0:
        raise StackError(f"formatting the events node's storage {data} failed: "
                         f"{java_error(fmt.stdout + fmt.stderr) or f'exit status {fmt.returncode}'}")
