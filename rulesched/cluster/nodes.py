"""The store's nodes: their infos by name, in a stable order (the scheduler walks it
round-robin), each one's position in it, and how many nodes hold each image (ImageLocality).

The order, the positions and the image counts are copied on write while a snapshot holds them
(:mod:`rulesched.cluster.cow`), and so is a node info: :meth:`NodeTable.writable` gives the one
to change, cloned first if a snapshot holds it.
Next stage: :mod:`rulesched.cluster.store` places pods on them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from rulesched.cluster.cow import CopyOnWrite
from rulesched.cluster.nodeinfo import NodeInfo
from rulesched.model import Node


class NodeTable:
    __slots__ = ("_cow", "by_name", "order", "positions", "images")

    def __init__(self, cow: CopyOnWrite[Any]) -> None:
        self._cow = cow
        self.by_name: dict[str, NodeInfo] = {}  # (never held by a snapshot: its own, changed in place)
        self.order: list[NodeInfo] = []
        self.positions: dict[str, int] = {}  # node name -> index in order
        self.images: Counter[str] = Counter()  # image name -> nodes holding it

    def add(self, node: Node) -> NodeInfo:
        """A node not in the table yet."""
        info = NodeInfo(node, epoch=self._cow.epoch)
        self._copy_order()
        self.by_name[node.name] = info
        self.positions[node.name] = len(self.order)
        self.order.append(info)
        self._count_images(node.images.keys(), 1)
        return info

    def update(self, node: Node) -> NodeInfo:
        """A node in the table changed (labels, taints, allocatable, images...)."""
        images = self.by_name[node.name].images
        info = self.writable(node.name)
        info.set_node(node)
        if images is not node.images:
            self._count_images(images.keys(), -1)
            self._count_images(node.images.keys(), 1)
        return info

    def remove(self, name: str) -> NodeInfo | None:
        """Take a node out; its info (with its pods) is returned, None if it was not here."""
        info = self.by_name.pop(name, None)
        if info is None:
            return None
        self._copy_order()
        del self.order[self.positions.pop(name)]
        for i, later in enumerate(self.order):
            self.positions[later.name] = i
        self._count_images(info.images.keys(), -1)
        return info

    def writable(self, name: str) -> NodeInfo:
        """The node's info, cloned first if a snapshot holds it."""
        info = self.by_name[name]
        cow = self._cow
        if info.epoch <= cow.held():
            info = info.clone(cow.epoch)
            self.by_name[name] = info
            if cow.must_copy("order"):
                self.order = list(self.order)
            self.order[self.positions[name]] = info
        return info

    def _copy_order(self) -> None:
        if self._cow.must_copy("order"):
            self.order = list(self.order)
        if self._cow.must_copy("positions"):
            self.positions = dict(self.positions)

    def _count_images(self, names: Iterable[str], sign: int) -> None:
        if self._cow.must_copy("images"):
            self.images = Counter(self.images)
        images = self.images
        for name in names:
            left = images[name] + sign
            if left > 0:
                images[name] = left
            else:
                del images[name]
