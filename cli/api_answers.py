"""What `kmon mcp`'s tools say: the API's JSON (streaming/api.py) as text an on-call person reads, the
ids and times exact (ISO 8601 UTC to the millisecond, with how long ago). Pure: the JSON in, the text out."""
from __future__ import annotations

from collections import Counter
from datetime import datetime, timezone
from typing import Any, Iterable, Mapping

# what an entity id names, by its kind (kmon.events.entity_key's prefixes)
ENTITY_KINDS = {
    "controller": "the cluster's active controller (under KRaft, the metadata quorum's leader)",
    "broker": "a broker's registration",
    "topic": "a topic: its partitions' replica assignment and its config",
    "partition": "one partition's leader, ISR and epochs",
    "reassignment": "the partition reassignments in progress",
    "preferred_election": "a preferred-replica election in progress",
    "topic_deletion": "a topic queued for deletion",
    "isr_change": "an ISR change notification",
    "group": "a consumer group: its state, members, lag and the verdict on its consumers",
    "quorum": "KRaft's metadata quorum: leader, epoch, voters and observers",
    "snapshot": "a collector's resync snapshot",
}


def ago(ms: int, now_ms: int) -> str:
    s = max(0, (now_ms - ms) // 1000)
    if s < 60:
        return f"{s}s ago"
    if s < 3600:
        return f"{s // 60}m {s % 60}s ago"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60}m ago"
    return f"{s // 86400}d {s % 86400 // 3600}h ago"


def when(ms: int | None, now_ms: int) -> str:
    if ms is None:
        return "since before kmon saw it"
    stamp = datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat(timespec="milliseconds")
    return f"since {stamp.replace('+00:00', 'Z')} ({ago(ms, now_ms)})"


def _ids(ids: Iterable[int]) -> str:
    return ", ".join(map(str, ids)) or "none"


def problem_line(p: Mapping[str, Any], now_ms: int) -> str:
    kind, since = p["kind"], when(p.get("since_ms"), now_ms)
    if kind == "broker_down":
        return f"broker {p['broker']} down{' (fenced)' if p.get('fenced') else ''} {since}"
    if kind in ("offline_partition", "under_min_isr_partition", "under_replicated_partition"):
        what = {"offline_partition": "offline", "under_min_isr_partition": "under min ISR",
                "under_replicated_partition": "under-replicated"}[kind]
        leader = "no leader" if p.get("leader") is None else f"leader {p['leader']}"
        return (f"{p['topic']}:{p['partition']} {what}: ISR [{_ids(p['isr'])}] of replicas [{_ids(p['replicas'])}], "
                f"{leader}, min ISR {p['min_isr']}, {since}")
    if kind == "group_not_ok":
        where = ", ".join(f"{tp} {status}" for tp, status in sorted(p.get("partitions", {}).items()))
        return f"group {p['group']} ({p['type']}) {p['status']}{f' ({where})' if where else ''} {since}"
    if kind == "no_controller":
        return f"no active controller {since}"
    if kind == "no_quorum_leader":
        return f"the metadata quorum has no leader {since}"
    return f"{kind} {since}"


def health_text(health: Mapping[str, Any], now_ms: int) -> str:
    clusters = health["clusters"]
    if not clusters:
        return "kmon's views hold no cluster yet: no collector's events have arrived."
    out = []
    for c in clusters:
        mode = "KRaft" if c["mode"] == "kraft" else "ZooKeeper mode"
        controller = c.get("controller")
        said = [f"Cluster {c['cluster']} ({mode}), as of {health['time']}:"]
        if controller is None:
            said.append("  controller: not seen yet")
        else:
            said.append(f"  controller: {'none' if controller['id'] is None else 'broker ' + str(controller['id'])}"
                        + (f" (epoch {controller['epoch']})" if controller.get("epoch") is not None else ""))
        if "quorum" in c:
            q = c["quorum"]
            said.append(f"  metadata quorum: leader {q['leader'] if q['leader'] is not None else 'none'}, "
                        f"epoch {q['epoch']}, voters {_ids(q['voters'])}")
        b = c["brokers"]
        said.append(f"  brokers: up {_ids(b['up'])}; down {_ids(b['down'])}"
                    + (f"; fenced {_ids(b['fenced'])}" if b["fenced"] else ""))
        p = c["partitions"]
        said.append(f"  partitions: {p['total']}, {p['under_replicated']} under-replicated, "
                    f"{p['under_min_isr']} under min ISR, {p['offline']} offline")
        g = c["groups"]
        not_ok = ", ".join(f"{x['group']} ({x['status']})" for x in g["not_ok"])
        said.append(f"  consumer groups: {g['total']}, not ok: {not_ok or 'none'}")
        if c["problems"]:
            said.append(f"  problems ({c['problems_total']}):")
            said += [f"    - {problem_line(x, now_ms)}" for x in c["problems"]]
            if c["problems_total"] > len(c["problems"]):
                said.append(f"    ... and {c['problems_total'] - len(c['problems'])} more")
        else:
            said.append("  problems: none")
        out.append("\n".join(said))
    return "\n\n".join(out)


def row_line(r: Mapping[str, Any]) -> str:
    """One transition, as `kmon history`'s table says it."""
    if r.get("topic") is not None:
        where = r["topic"] if r.get("partition") is None else f"{r['topic']}:{r['partition']}"
    elif r.get("group") is not None:
        where = f"group {r['group']}"
    elif r["kind"] == "controller_change":
        where = "controller"
    else:
        where = f"broker {r['broker']}" if r.get("broker") is not None else r["entity"]
    parts = [r["time"], r["cluster"], r["kind"], where]
    if r.get("broker") is not None:
        parts.append(f"broker {r['broker']}")
    if r.get("old") is not None or r.get("new") is not None:
        parts.append(f"{r.get('old') or '-'} -> {r.get('new') or '-'}")
    step = r.get("generation") if r.get("generation") is not None else r.get("epoch")
    if step is not None:
        parts.append(f"{'generation' if r.get('generation') is not None else 'epoch'} {step}")
    if r.get("detail"):
        parts.append(r["detail"])
    return "  ".join(str(x) for x in parts)


def changes_text(rows: list[Mapping[str, Any]], more: bool, asked: str) -> str:
    if not rows:
        return f"No transition {asked}."
    kinds = Counter(r["kind"] for r in rows)
    head = (f"{len(rows)}{'+' if more else ''} transitions {asked}, oldest first "
            f"({', '.join(f'{n} {k}' for k, n in kinds.most_common())}):")
    tail = ["(more: narrow the range or the filters)"] if more else []
    return "\n".join([head, *(row_line(r) for r in rows), *tail])


def state_lines(record: Mapping[str, Any]) -> list[str]:
    """An entity's record as a few lines of what matters in it."""
    if record.get("deleted"):
        return ["gone: its last event deleted it (the record is kept as a tombstone)"]
    s, kind = record["state"], record["kind"]
    if kind == "partition":
        lines = [f"leader {s['leader']}, ISR [{_ids(s['isr'])}], leader epoch {s['leader_epoch']}"]
        if s.get("elr"):
            lines.append(f"eligible leader replicas [{_ids(s['elr'])}]")
        return lines
    if kind == "broker":
        where = f"{s.get('host')}:{s.get('port')}" if s.get("host") else ", ".join(
            f"{e['host']}:{e['port']}" for e in s.get("endpoints", ()))
        flags = [f for f, on in (("fenced", s.get("fenced")), ("in controlled shutdown", s.get("in_controlled_shutdown")))
                 if on]
        return [f"registered at {where or 'no listener'}, rack {s.get('rack') or 'none'}"
                + (f"; {', '.join(flags)}" if flags else "")]
    if kind == "controller":
        return [f"broker {s['broker_id']}" + (f", epoch {s['epoch']}" if s.get("epoch") is not None else "")]
    if kind == "topic":
        return [f"{len(s['replicas'])} partitions, replicas {s['replicas']}"]
    if kind == "group":
        lag = ", ".join(f"{t}: {v['lag']} behind" for t, v in sorted(s.get("lag", {}).items()))
        return [f"{s['group_type']} group, state {s['state']}, generation {s['generation']}, "
                f"{len(s.get('members', ()))} members, consumers {s.get('status') or 'not judged yet'}"
                + (f"; lag {lag}" if lag else "")]
    if kind == "quorum":
        return [f"leader {s['leader_id']}, epoch {s['epoch']}, high watermark {s['high_watermark']}, "
                f"voters {_ids(v['replica_id'] for v in s.get('voters', ()))}"]
    return [", ".join(f"{k} {v}" for k, v in s.items())]


def explain_text(entity: Mapping[str, Any], around: list[Mapping[str, Any]], around_asked: str,
                 now_ms: int) -> str:
    kind = entity["entity"].split(":", 1)[0]
    record = entity.get("record")
    said = [f"{entity['entity']} in cluster {entity['cluster']}: {ENTITY_KINDS.get(kind, 'an entity kmon follows')}."]
    if record is None:
        said.append("Now: kmon's views hold no record of it (deleted, and swept by a resync since).")
    else:
        said += [f"Now: {line}" for line in state_lines(record)]
        counted = ", ".join(f"{k} {v}" for k, v in sorted(record.get("counters", {}).items()))
        if counted:
            said.append(f"Counted: {counted}")
        said.append(f"Last observed {entity['last_observed']} ({ago(record['last_observed_ms'], now_ms)}).")
    rows = entity["transitions"]
    if rows:
        said.append(f"How it got there (its last {len(rows)} transitions):")
        said += [f"  {row_line(r)}" for r in rows]
    else:
        said.append("How it got there: no transition of it in the history (it has been as it is since kmon "
                    "first saw it, or the history's retention has passed).")
    if around:
        kinds = Counter(r["kind"] for r in around)
        said.append(f"What else changed {around_asked} ({', '.join(f'{n} {k}' for k, n in kinds.most_common())}):")
        said += [f"  {row_line(r)}" for r in around]
    else:
        said.append(f"Nothing else changed {around_asked}.")
    return "\n".join(said)
