"""``kmon collect kraft``: the KRaft collector's own flags, for both of its modes (following the
metadata log, or sampling the brokers).

The flags every collector shares and the process around the collector belong to ``cli.collect``.
"""
from __future__ import annotations

import argparse

from collectors.kraft.config import KraftCollectorConfig, SampledConfig
from kmon import flags


def add_kraft_flags(parser: argparse.ArgumentParser) -> None:
    flags.flag(parser, "--controllers", type=flags.host_port_list, metavar="HOST:PORT[,...]",
               help="controller listeners of the quorum (controller.quorum.bootstrap.servers; required unless "
                    "--sampled)")
    flags.switch(parser, "--sampled",
                 help="where the controllers cannot be reached: poll the brokers' metadata (--bootstrap-servers) "
                      "instead; each event is marked sampled and the changes between two samples that the leader "
                      "epochs prove are counted, not seen (README: The collectors)")
    flags.flag(parser, "--bootstrap-servers", type=flags.host_port_list, metavar="HOST:PORT[,...]",
               help="with --sampled: the cluster's brokers")
    flags.flag(parser, "--sample-interval", default=SampledConfig.interval_s, type=flags.positive_float,
               metavar="SECONDS", help="with --sampled: seconds between two samples")
    flags.flag(parser, "--command-config", type=flags.readable_file, metavar="FILE",
               help="Kafka client properties of the controller listener (security.protocol, sasl.*, ssl.*), as "
                    "the Kafka tools' --command-config; each can also be set as KMON_MONITORED_KAFKA_<KEY>")
    flags.flag(parser, "--quorum-interval", default=KraftCollectorConfig.quorum_interval_s,
               type=flags.positive_float, metavar="SECONDS", help="how often to describe the quorum")
    flags.flag(parser, "--quorum-progress-interval", default=KraftCollectorConfig.quorum_progress_interval_s,
               type=flags.positive_float, metavar="SECONDS",
               help="how often a quorum whose metadata log only went on (its high watermark, no other change) "
                    "is sent: each event is a micro-batch of the stream app; other changes are sent at once")
