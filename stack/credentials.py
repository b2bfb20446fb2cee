"""What a secured stack's cluster must hold before kmon reaches it: the SCRAM users (ZooKeeper mode)
and kmon's ACLs (KRaft), created as an operator creates them."""
from __future__ import annotations

import logging
import subprocess

from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                   ResourcePatternType, ResourceType)

from stack.secure import KMON_PRINCIPALS, SecureFiles
from stack.state import StackError

log = logging.getLogger("kmon.stack")


def add_scram_users(java: str, classpath: str, zk_connect: str, secure: SecureFiles) -> None:
    """SCRAM credentials live in ZooKeeper and the brokers need theirs to start."""
    users = secure.scram_users()
    for user, credential in users:
        done = subprocess.run([java, *secure.jvm_options(False), "-cp", classpath, "kafka.admin.ConfigCommand",
                               "--zookeeper", zk_connect, "--alter", "--add-config", credential,
                               "--entity-type", "users", "--entity-name", user],
                              capture_output=True, text=True, timeout=120)
        if done.returncode != 0:   # the output holds no password: ConfigCommand does not echo it
            raise StackError(f"creating the SCRAM user {user} failed: {done.stdout}{done.stderr}")
    log.info("SCRAM users %s created", ", ".join(u for u, _ in users))


def grant_kmon(bootstrap_servers: str, secure: SecureFiles) -> None:
    """kmon's ACLs on a secure KRaft cluster (again on a resume: the same binding twice is one)."""
    admin = AdminClient({"bootstrap.servers": bootstrap_servers, "log_level": 0, **secure.admin_client()})
    bindings = [AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, principal, "*",
                           operation, AclPermissionType.ALLOW)
                for principal in KMON_PRINCIPALS for operation in (AclOperation.DESCRIBE,
                                                                   AclOperation.CLUSTER_ACTION)]
    for future in admin.create_acls(bindings, request_timeout=30).values():
        future.result()
    log.info("granted %s DESCRIBE and CLUSTER_ACTION on the cluster", " and ".join(KMON_PRINCIPALS))
