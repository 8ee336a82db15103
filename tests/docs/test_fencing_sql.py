#!/usr/bin/env python3
# test_fencing_sql.py — runs the SQL of docs/fencing.md, as the page prints
# it, against SQLite (Python's sqlite3: no package beyond the Python that
# meson runs on), so the page stays true.
#
#   tests/docs/test_fencing_sql.py docs/fencing.md
#
# Each statement is the ```sql block right after a comment
# <!-- sql: NAME --> (schema, insert-if-absent, write, read). Checks: a
# first write, an equal fence, a lower one refused, a higher one, fences up
# to 2^53 exact, any bytes in keys and values, and two writers at once on
# two connections (the higher fence always ends in the table). Exit 0 when
# all hold, 1 with each failure named.
import re
import sqlite3
import sys
import tempfile
import threading
import os

TWO53 = 2**53


def statements(doc_path):
    text = open(doc_path, encoding="utf-8").read()
    found = dict(re.findall(r"<!-- sql: ([a-z-]+) -->\n```sql\n(.*?)```", text, re.S))
    missing = {"schema", "insert-if-absent", "write", "read"} - found.keys()
    if missing:
        sys.exit(f"{doc_path}: no <!-- sql: NAME --> block for {sorted(missing)}")
    return found


class Store:
    """One connection, autocommit: each statement is its own transaction, as the page says."""

    def __init__(self, sql, path):
        self.sql = sql
        self.db = sqlite3.connect(path, isolation_level=None, timeout=30, check_same_thread=False)

    def write(self, key, fence, value):
        args = {"key": key, "fence": fence, "value": value}
        self.db.execute(self.sql["insert-if-absent"], args)
        return self.db.execute(self.sql["write"], args).rowcount == 1

    def read(self, key):
        return self.db.execute(self.sql["read"], {"key": key}).fetchone()


failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: test_fencing_sql.py docs/fencing.md")
    sql = statements(sys.argv[1])
    with tempfile.TemporaryDirectory(prefix="redlock-fencing-sql-") as tmp:
        path = os.path.join(tmp, "fenced.db")
        setup = sqlite3.connect(path, isolation_level=None)
        setup.execute("PRAGMA journal_mode=WAL")  # readers and one writer at once
        setup.execute(sql["schema"])
        setup.close()
        store = Store(sql, path)

        check(store.read(b"report") is None, "a key never written has no row")
        check(store.write(b"report", 5, b"first"), "a first write is accepted")
        check(store.write(b"report", 5, b"again"), "an equal fence is accepted")
        check(not store.write(b"report", 4, b"stale"), "a lower fence is refused")
        check(store.read(b"report") == (5, b"again"), f"after a refusal: {store.read(b'report')}")
        check(store.write(b"report", 9, b"next"), "a higher fence is accepted")
        check(not store.write(b"report", 5, b"late"), "the old fence is refused after a higher one")
        check(store.read(b"report") == (9, b"next"), f"the higher fence stays: {store.read(b'report')}")

        check(store.write(b"edge", TWO53, b"max"), "2^53 is accepted")
        check(not store.write(b"edge", TWO53 - 1, b"below"), "2^53 - 1 is refused after 2^53 (exact, not rounded)")
        check(store.read(b"edge") == (TWO53, b"max"), f"2^53 is kept exactly: {store.read(b'edge')}")

        key, value = b"res\x00ource\r\n\xff", bytes(range(256))
        check(store.write(key, 3, value), "a binary key and value are written")
        check(store.read(key) == (3, value), "a binary value reads back whole")
        check(store.read(b"res") is None, "a key is not cut at its NUL byte")

        # Two writers, each on its own connection, fences 10 and 11, at once.
        for round_ in range(10):
            k = f"contended{round_}".encode()
            fences = (10, 11) if round_ % 2 == 0 else (11, 10)
            accepted = [0, 0]
            start = threading.Barrier(2)

            def writer(i):
                own = Store(sql, path)
                start.wait()
                for n in range(50):
                    accepted[i] += own.write(k, fences[i], f"writer{i}:{n}".encode())
                own.db.close()

            threads = [threading.Thread(target=writer, args=(i,)) for i in (0, 1)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            win = 0 if fences[0] > fences[1] else 1
            check(accepted[win] == 50, f"round {round_}: the higher fence had {accepted[win]} of 50 accepted")
            check(store.read(k) == (fences[win], f"writer{win}:49".encode()),
                  f"round {round_}: the table holds {store.read(k)}, not the higher fence's last write")
        store.db.close()

    for f in failures:
        print(f"FAIL: {f}")
    print(f"{'ok' if not failures else 'failed'}: the SQL of {sys.argv[1]} against SQLite {sqlite3.sqlite_version}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
