"""The LMDB store's journal (PATH-journal) as tidemark reads it at start,
holding records it did not write itself: a file damaged in a way its
checksums cannot see, copied from elsewhere, or written by another
program. A record is replayed when its entries are ones the store could
have written; else tidemark does not start, names the file, and changes
no mark."""

import os
import struct
import subprocess

import pytest

from common import slow, wait_until
from test_store import lmdb_counter

# LMDB's longest key (mdb_env_get_maxkeysize): a longer name is stored
# under its digest and never journaled as it is.
LMDB_MAXKEY = 511

# Keys of every length class, and records cut anywhere: make
# test-sanitize runs these under ASan and UBSan too.
pytestmark = pytest.mark.lengths


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def entries(*pairs):
    """The entries of a record: u16 key length, i64 token, the key."""
    return b"".join(struct.pack("<Hq", len(k), t) + k for k, t in pairs)


def record(epoch, payload, count):
    """A journal record whose checksum passes (journal.c's layout)."""
    body = struct.pack("<QII", epoch, len(payload), count) + payload
    return b"TMJ1" + struct.pack("<I", crc32c(body)) + body


def lmdb_epoch(path):
    """The journal epoch the LMDB file holds, from mdb_dump's hex."""
    out = subprocess.run(["mdb_dump", "-n", path], check=True,
                         capture_output=True, text=True).stdout.splitlines()
    i = out.index(" " + b"\0journal-epoch".hex())
    return int(out[i + 1].strip(), 16)


def stopped_with_a_mark(tidemark):
    """A tidemark that raised documents/a to 5, checkpointed and
    stopped; the epoch its journal's next records must carry."""
    tm = tidemark()
    assert tm.put("a", token=5).status == 200
    wait_until(lambda: lmdb_counter(tm, "checkpoints") >= 1, 5 * slow(),
               "an idle checkpoint")
    assert tm.stop() == 0
    return tm, lmdb_epoch(tm.store_path)


def write_journal(tm, data):
    with open(tm.store_path + "-journal", "r+b") as f:
        f.write(data)


@pytest.mark.parametrize("name", [
    b"x",                                       # 1 byte
    b"documents/b",                             # tens
    b"documents/" + b"n" * 290,                 # hundreds
    b"documents/" + b"m" * (LMDB_MAXKEY - 10),  # the longest kept as is
], ids=["1", "11", "300", "511"])
def test_a_record_from_outside_is_replayed(tidemark, name):
    """A record in the store's own layout, under the stored epoch, is
    replayed at start as if the store had written it: the format the
    refusals below are checked against."""
    tm, epoch = stopped_with_a_mark(tidemark)
    write_journal(tm, record(epoch, entries((name, 9)), 1))
    tm.start()
    assert tm.mark(name.decode()) == 9
    assert tm.mark("documents/a") == 5
    tm.wait_log("replayed 1 ", "from the journal")


@pytest.mark.parametrize("bad,count", [
    (struct.pack("<Hq", 0, 7), 1),                         # a key of 0 bytes
    (entries((b"k" * (LMDB_MAXKEY + 1), 7)), 1),           # LMDB's max + 1
    (entries((b"k" * 1025, 7)), 1),                        # the journal's + 1
    (struct.pack("<Hq", 40, 7) + b"short", 1),             # a key cut short
    (struct.pack("<Hq", 3, 7)[:6], 1),                     # a header cut short
    (entries((b"c/d", 7)), 2),                             # more claimed
    (entries((b"c/d", 7)) + b"\x00\x01", 1),               # bytes left over
], ids=["key-0", "key-512", "key-1025", "key-short", "header-short",
        "count-over", "trailing"])
def test_a_record_the_store_cannot_have_written_stops_the_start(
        tidemark, bad, count):
    """A record whose checksum passes but whose entries do not parse (or
    name a key the store would have digested) is not half-applied: the
    start fails with the file named, and the good entry before the bad
    one in the same record raises nothing."""
    tm, epoch = stopped_with_a_mark(tidemark)
    good = entries((b"documents/b", 9))
    write_journal(tm, record(epoch, good + bad, count + 1))
    assert tm.start_fails() != 0
    assert tm.log_lines(tm.store_path + "-journal holds a record whose "
                        "checksum passes but whose entries this store "
                        "cannot have written")
    os.replace(tm.store_path + "-journal", tm.store_path + "-journal.bad")
    tm.start()
    assert tm.mark("documents/a") == 5
    assert tm.mark("documents/b") is None
