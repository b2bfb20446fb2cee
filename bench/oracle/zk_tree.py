"""ZooKeeper's tree replayed from its transactions: per transaction, each znode it touched as the
transaction left it. Ephemeral znodes go when their session closes, as ZooKeeper's DataTree.killSession
removes them: those the close listed, then any other the session still owned."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Iterator

from bench.oracle.zk_txnlog import CloseSession, Create, Delete, Op, SetData, Txn


@dataclass(frozen=True)
class ZnodeChange:
    path: str
    created: bool          # it did not exist before the transaction
    exists: bool           # it exists after it
    data: bytes | None     # its data after it (None: gone, or a znode without data)


def changes(txns: Iterable[Txn]) -> Iterator[tuple[Txn, list[ZnodeChange]]]:
    """Each transaction that changed a znode, with those changes in the order it first touched them.
    A znode created and deleted by one transaction was never seen: it is left out."""
    tree = _Tree()
    for txn in txns:
        existed: dict[str, bool] = {}
        for op in txn.ops:
            touched = tree.touched_by(op, txn.session)
            for path in touched:
                existed.setdefault(path, path in tree.nodes)
            tree.apply(op, txn.session, touched)
        out = [ZnodeChange(path, not before and path in tree.nodes, path in tree.nodes, tree.nodes.get(path))
               for path, before in existed.items() if before or path in tree.nodes]
        if out:
            yield txn, out


def versions(txns: Iterable[Txn]) -> Counter[str]:
    """Every version each znode had: its creation and each write of its data (a znode created again
    counts on from its earlier versions). A watcher that read fewer of a znode skipped the rest."""
    return Counter(op.path for txn in txns for op in txn.ops if isinstance(op, (Create, SetData)))


class _Tree:
    def __init__(self) -> None:
        self.nodes: dict[str, bytes | None] = {}
        self.owned: dict[int, dict[str, None]] = {}   # session -> its ephemeral znodes, in creation order
        self.owner: dict[str, int] = {}

    def touched_by(self, op: Op, session: int) -> list[str]:
        if isinstance(op, CloseSession):
            listed = dict.fromkeys([*(op.paths or ()), *self.owned.get(session, {})])
            return [p for p in listed if p in self.nodes]
        return [op.path]

    def apply(self, op: Op, session: int, touched: list[str]) -> None:
        match op:
            case Create(path, data, ephemeral):
                self.nodes[path] = data
                if ephemeral:
                    self.owned.setdefault(session, {})[path] = None
                    self.owner[path] = session
            case SetData(path, data):
                self.nodes[path] = data
            case Delete(path):
                self._delete(path)
            case CloseSession():
                self.owned.pop(session, None)
                for path in touched:
                    self._delete(path)

    def _delete(self, path: str) -> None:
        self.nodes.pop(path, None)
        session = self.owner.pop(path, None)
        if session is not None:
            self.owned.get(session, {}).pop(path, None)
