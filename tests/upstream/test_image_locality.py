"""ImageLocality Score, ported from kube-scheduler's
pkg/scheduler/framework/plugins/imagelocality/image_locality_test.go (TestImageLocalityPriority,
TestNormalizedImageName) at v1.37.2. Every case is ported (the image volume cases of 1.36's
kubernetes PR #130231, with 1.37's #138951 counting the volume in the threshold). ImageLocality has no NormalizeScore, so the raw
scores upstream checks are the normalised ones.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from rulesched.model.decode import normalized_image_name
from tests.upstream.harness import node, normalized_scores, pod, state

MB = 1024 * 1024


def images_pod(*images: str, init: tuple[str, ...] = ()) -> Any:
    spec = {
        "containers": [{"name": f"c{i}", "image": im} for i, im in enumerate(images)],
        "initContainers": [{"name": f"i{i}", "image": im} for i, im in enumerate(init)],
    }
    return pod("p", spec=spec)


NODE_40_300_2000 = [
    (["gcr.io/40:latest", "gcr.io/40:v1", "gcr.io/40:v1"], 40 * MB),
    (["gcr.io/300:latest", "gcr.io/300:v1"], 300 * MB),
    (["gcr.io/2000:latest"], 2000 * MB),
]
NODE_250_10 = [(["gcr.io/250:latest"], 250 * MB), (["gcr.io/10:latest", "gcr.io/10:v1"], 10 * MB)]
NODE_600_40_900 = [
    (["gcr.io/600:latest"], 600 * MB),
    (["gcr.io/40:latest"], 40 * MB),
    (["gcr.io/900:latest"], 900 * MB),
]
NODE_300_600_900 = [
    (["gcr.io/300:latest"], 300 * MB),
    (["gcr.io/600:latest"], 600 * MB),
    (["gcr.io/900:latest"], 900 * MB),
]
NODE_4000_30 = [(["gcr.io/4000:latest"], 4000 * MB), (["gcr.io/30:latest"], 30 * MB)]
NODE_20_30_40 = [(["gcr.io/20:latest"], 20 * MB), (["gcr.io/30:latest"], 30 * MB), (["gcr.io/40:latest"], 40 * MB)]
NO_IMAGES: list[tuple[list[str], int]] = []

TEST_40_250 = images_pod("gcr.io/40", "gcr.io/250")
# testImageVolume: a container gcr.io/30 and an image volume gcr.io/300 (ImageVolume, #130231)
TEST_IMAGE_VOLUME = pod(
    "p",
    spec={
        "containers": [{"name": "c0", "image": "gcr.io/30"}],
        "volumes": [{"name": "imageVolume", "image": {"reference": "gcr.io/300"}}],
    },
)
TEST_MIN_MAX = images_pod("gcr.io/10", "gcr.io/4000")

CASES = [
    (
        "two images spread on two nodes, prefer the larger image one",
        TEST_40_250,
        [("node1", NODE_40_300_2000), ("node2", NODE_250_10)],
        {"node1": 0, "node2": 5},
    ),
    (
        "two images on one node, prefer this node",
        images_pod("gcr.io/40", "gcr.io/300"),
        [("node1", NODE_40_300_2000), ("node2", NODE_250_10)],
        {"node1": 7, "node2": 0},
    ),
    (
        "if exceed limit, use limit",
        TEST_MIN_MAX,
        [("node1", NODE_4000_30), ("node2", NODE_250_10)],
        {"node1": 100, "node2": 0},
    ),
    (
        "if exceed limit, use limit (with node which has no images present)",
        TEST_MIN_MAX,
        [("node1", NODE_4000_30), ("node2", NODE_250_10), ("node3", NO_IMAGES)],
        {"node1": 66, "node2": 0, "node3": 0},
    ),
    (
        "pod with multiple large images, node2 is preferred",
        images_pod("gcr.io/300", "gcr.io/600", "gcr.io/900"),
        [("node1", NODE_600_40_900), ("node2", NODE_300_600_900), ("node3", NO_IMAGES)],
        {"node1": 32, "node2": 36, "node3": 0},
    ),
    (
        "pod with multiple small images",
        images_pod("gcr.io/30", "gcr.io/40"),
        [("node1", NODE_20_30_40), ("node2", NODE_4000_30)],
        {"node1": 1, "node2": 0},
    ),
    (
        "pod with ImageVolume",
        TEST_IMAGE_VOLUME,
        [("node1", NODE_300_600_900), ("node2", NODE_4000_30)],
        {"node1": 6, "node2": 0},
    ),
    (
        "same images as ImageVolume pod but as regular container images",
        images_pod("gcr.io/30", "gcr.io/300"),
        [("node1", NODE_300_600_900), ("node2", NODE_4000_30)],
        {"node1": 6, "node2": 0},
    ),
    (
        "include InitContainers: two images spread on two nodes, prefer the larger image one",
        images_pod("gcr.io/30", init=("gcr.io/300",)),
        [("node1", NODE_40_300_2000), ("node2", NODE_20_30_40)],
        {"node1": 6, "node2": 0},
    ),
]


@pytest.mark.parametrize(("incoming", "nodes", "want"), [pytest.param(*c[1:], id=c[0]) for c in CASES])
def test_image_locality(
    incoming: Any, nodes: list[tuple[str, list[tuple[list[str], int]]]], want: dict[str, int]
) -> None:
    cluster = state([node(n, images=images) for n, images in nodes])
    assert normalized_scores(incoming, cluster, "ImageLocality") == want


DIGEST = "sha256:" + hashlib.sha256(b"root").hexdigest()


@pytest.mark.parametrize(
    ("image", "want"),
    [
        pytest.param("root", "root:latest", id="add :latest postfix 1"),
        pytest.param("gcr.io:5000/root", "gcr.io:5000/root:latest", id="add :latest postfix 2"),
        pytest.param("root:tag", "root:tag", id="keep it as is 1"),
        pytest.param("root@" + DIGEST, "root@" + DIGEST, id="keep it as is 2"),
    ],
)
def test_normalized_image_name(image: str, want: str) -> None:
    assert normalized_image_name(image) == want
    # and as the pod's image list that image_locality reads
    assert images_pod(image).images == (want,)
