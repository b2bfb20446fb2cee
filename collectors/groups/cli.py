"""``kmon collect groups``: the consumer-group collector's own flags and its config.

The flags every collector shares (cluster, events topic, metrics port, buffer) and the
process around the collector (publisher, telemetry, signals) belong to ``cli.collect``.
"""
from __future__ import annotations

import argparse
import re
from typing import Mapping

from collectors.groups.config import GroupsConfig, NameFilter
from kmon import flags

_DEFAULTS = GroupsConfig(bootstrap_servers="-", cluster="-")


def add_groups_flags(parser: argparse.ArgumentParser) -> None:
    flags.flag(parser, "--bootstrap-servers", type=flags.host_port_list, metavar="HOST:PORT[,...]",
                help="the monitored cluster's brokers (required)")
    flags.flag(parser, "--command-config", type=flags.readable_file, metavar="FILE",
                help="Kafka client properties for the monitored cluster (security.protocol, sasl.*, ssl.*), "
                     "as the Kafka tools' --command-config; each can also be set as KMON_MONITORED_KAFKA_<KEY>")
    flags.flag(parser, "--poll-interval", default=_DEFAULTS.poll_interval_s, type=flags.positive_float,
                metavar="SECONDS", help="Admin API poll: live group state and end-offset samples")
    flags.flag(parser, "--lag-interval", default=_DEFAULTS.lag_interval_s, type=flags.positive_float,
                metavar="SECONDS", help="lag events per group at most this often")
    flags.flag(parser, "--stall-window", default=_DEFAULTS.stall_window_s, type=flags.positive_float,
                metavar="SECONDS", help="a partition whose committed offset has not moved this long while it has "
                                        "lag is stalled (new messages arrived) or stopped (none did); a consumer "
                                        "committing less often than this is reported so")
    for what in ("groups", "topics"):
        flags.flag(parser, f"--include-{what}", default=".*", type=regex, metavar="REGEX",
                    help=f"only {what} whose whole name matches")
        flags.flag(parser, f"--exclude-{what}", default="", type=regex, metavar="REGEX",
                    help=f"leave out {what} whose whole name matches (empty: none)")
    flags.flag(parser, "--describe-batch-size", default=_DEFAULTS.describe_batch_size, type=flags.positive_int,
                help="groups per describe_consumer_groups request")
    flags.flag(parser, "--admin-concurrency", default=_DEFAULTS.concurrency, type=flags.positive_int,
                help="Admin API requests in flight at once")
    flags.flag(parser, "--request-timeout", default=_DEFAULTS.request_timeout_s, type=flags.positive_float,
                metavar="SECONDS", help="per Admin API request; a late answer counts as failed")
    flags.flag(parser, "--offsets-start", default=_DEFAULTS.offsets_start, choices=["beginning", "end"],
                help="where the __consumer_offsets reader starts: the whole retained history, or now")
    flags.switch(parser, "--admin-only", help="do not read __consumer_offsets (no exact rebalance history)")
    flags.switch(parser, "--lag-from-samples",
                 help="lag in seconds interpolated from end-offset samples only; by default it is the age of the "
                      "oldest unread record, read from the topic where kmon may (READ on it)")


def groups_config(args: argparse.Namespace, client: Mapping[str, str]) -> GroupsConfig:
    return GroupsConfig(
        bootstrap_servers=args.bootstrap_servers, cluster=args.cluster,
        poll_interval_s=args.poll_interval, lag_interval_s=args.lag_interval, stall_window_s=args.stall_window,
        groups=NameFilter(args.include_groups, args.exclude_groups),
        topics=NameFilter(args.include_topics, args.exclude_topics),
        describe_batch_size=args.describe_batch_size, concurrency=args.admin_concurrency,
        request_timeout_s=args.request_timeout, offsets_start=args.offsets_start,
        read_offsets_topic=not args.admin_only, lag_from_records=not args.lag_from_samples, client_config=client)


def regex(text: str) -> str:
    try:
        re.compile(text)
    except re.error as e:
        raise argparse.ArgumentTypeError(f"{text!r} is not a regular expression: {e}") from None
    return text
