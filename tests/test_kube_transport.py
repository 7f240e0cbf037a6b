"""rulesched/kube/transport.py's client certificate file: one certificate is given to OpenSSL
twice, so that it sends the certificate alone (not the CA it would chain from its trust store);
a file holding a chain already, or one it cannot read, is used as it is. (That the real
kube-apiserver takes the certificate so: every test on the test bed authenticates with one.)
"""

from __future__ import annotations

import os
from pathlib import Path

from rulesched.kube.transport import leaf_alone

LEAF = "-----BEGIN CERTIFICATE-----\nMIIBleaf\n-----END CERTIFICATE-----\n"
CA = "-----BEGIN CERTIFICATE-----\nMIIBca\n-----END CERTIFICATE-----\n"


def test_one_certificate_is_written_twice_and_the_original_left_alone(tmp_path: Path) -> None:
    given = tmp_path / "client.crt"
    given.write_text("a comment openssl skips\n" + LEAF)
    copies = tmp_path / "tmp"
    copies.mkdir()
    path = leaf_alone(str(given), str(copies))
    assert path != str(given)
    assert Path(path).read_text() == LEAF + LEAF
    assert given.read_text() == "a comment openssl skips\n" + LEAF
    assert os.stat(path).st_mode & 0o077 == 0  # (the user's alone)
    # a second process of the same certificate (or one restarted after a kill) shares the copy
    assert leaf_alone(str(given), str(copies)) == path
    assert os.listdir(copies) == [os.path.basename(path)]
    # another certificate, another copy; a copy changed since is written again
    other = tmp_path / "other.crt"
    other.write_text(LEAF.replace("leaf", "other"))
    assert leaf_alone(str(other), str(copies)) != path
    Path(path).write_text("garbled")
    assert leaf_alone(str(given), str(copies)) == path and Path(path).read_text() == LEAF + LEAF
    assert len(os.listdir(copies)) == 2


def test_a_link_in_the_copys_place_is_replaced_not_followed(tmp_path: Path) -> None:
    given = tmp_path / "client.crt"
    given.write_text(LEAF)
    copies = tmp_path / "tmp"
    copies.mkdir()
    path = Path(leaf_alone(str(given), str(copies)))
    target = tmp_path / "elsewhere"
    target.write_text(LEAF + LEAF)
    path.unlink()
    path.symlink_to(target)
    assert leaf_alone(str(given), str(copies)) == str(path)
    assert not path.is_symlink() and target.read_text() == LEAF + LEAF


def test_a_chain_or_an_unreadable_file_is_used_as_it_is(tmp_path: Path) -> None:
    chain = tmp_path / "chain.crt"
    chain.write_text(LEAF + CA)
    assert leaf_alone(str(chain)) == str(chain)
    missing = str(tmp_path / "missing.crt")
    assert leaf_alone(missing) == missing
    binary = tmp_path / "binary.crt"
    binary.write_bytes(b"\xff\xfe\x00")
    assert leaf_alone(str(binary)) == str(binary)
