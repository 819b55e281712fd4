#!/usr/bin/python3
"""A seeded random stream of one key/value pipeline's records, produced to
Kafka, and the table the documented rules give for it (docs/OPERATIONS.md,
Tombstones; The members of a definition: on_conflict), applying the records
one by one in offset order. The model-based tests (tests/integration/model.sh,
the reliability suite's model scenario) compare the service's table with it,
key by key.

The table (created by the caller): k TEXT UNIQUE (the record's key),
v TEXT CHECK (v <> 'bad'), ver BIGINT (the version: the record's timestamp,
or the value's member "ver"), deleted_at TIMESTAMPTZ (the mark), and a child
table whose foreign key refuses the delete of the keys it holds.

  model.py stream --seed S --mode delete|mark|upsert [--member-version]
                  --topic T --bootstrap B --app PACKAGE --table TABLE
                  --out DIR [--records N] [--keys K] [--partitions P]

writes DIR/init.sql (the rows stored before the stream and the children),
produces the stream, and writes DIR/expected (one line per key,
"k|v|ver|mark in ms or -", sorted by k) and DIR/counts (records per
partition, one per line). Runs with Debian's python3-confluent-kafka."""

import argparse
import os
import random
import sys

BASE_MS = 1_767_225_600_000  # 2026-01-01: every version and mark near it
SPREAD_MS = 40               # few distinct versions: ties are common


class Model:
    """The table as the rules leave it, record after record."""

    def __init__(self, mode, comparable, protected):
        self.mode = mode              # delete | mark | upsert
        self.comparable = comparable  # the version is the record's timestamp
        self.protected = protected    # keys a child row points at
        self.rows = {}                # k -> [v, ver, mark or None]

    def value(self, k, v, ver):
        # A value the table refuses changes nothing: dead-lettered, or
        # skipped when the stored row is as new.
        if v == "bad":
            return
        row = self.rows.get(k)
        if row is None:
            self.rows[k] = [v, ver, None]
        elif ver > row[1]:
            # A newer value updates the row and clears its mark.
            self.rows[k] = [v, ver, None]
        # An older or equal one is skipped; the row stays marked.

    def tombstone(self, k, ts):
        if self.mode == "upsert":
            return  # an empty_payload dead letter
        if self.mode == "delete":
            if k not in self.protected:
                self.rows.pop(k, None)  # the child's foreign key refuses the others
            return
        row = self.rows.get(k)
        if row is None:
            return  # a mark on a key never stored changes nothing
        # Marks only a row not newer than itself when the version is the
        # record's timestamp; whatever the version otherwise.
        if not self.comparable or row[1] <= ts:
            row[2] = ts


def stream(args):
    rnd = random.Random(args.seed)
    keys = ["k%02d" % i for i in range(args.keys)]
    comparable = not args.member_version
    # One key a child row points at (stored before the stream: a delete of
    # it is refused), and a few more stored, some of them marked.
    protected = {keys[0]}
    model = Model(args.mode, comparable, protected)
    init = []
    app = "(SELECT id FROM apps_registry_application WHERE package_name = '%s')" % args.app
    for k in keys[: 1 + args.keys // 3]:
        ver = BASE_MS + rnd.randrange(SPREAD_MS)
        mark = None
        if args.mode == "mark" and rnd.random() < 0.5:
            mark = ver + rnd.randrange(5)
        model.rows[k] = ["init", ver, mark]
        init.append("INSERT INTO %s (application_id, k, v, ver, deleted_at) VALUES (%s, '%s', 'init', %d, %s);"
                    % (args.table, app, k, ver,
                       "to_timestamp(%d / 1000.0)" % mark if mark is not None else "NULL"))
    for k in protected:
        init.append("INSERT INTO %s_child (k) VALUES ('%s');" % (args.table, k))
    with open(os.path.join(args.out, "init.sql"), "w") as f:
        f.write("\n".join(init) + "\n")

    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": args.bootstrap, "linger.ms": 5, "compression.codec": "lz4"})
    failures = []

    def delivered(err, msg):
        if err is not None:
            failures.append(str(err))

    counts = [0] * args.partitions
    for _ in range(args.records):
        k = rnd.choice(keys)
        # A key's records in one partition: their offsets order them.
        p = keys.index(k) % args.partitions
        ts = BASE_MS + rnd.randrange(SPREAD_MS)
        if rnd.random() < 0.25:
            producer.produce(args.topic, value=None, key=k, partition=p, timestamp=ts, on_delivery=delivered)
            model.tombstone(k, ts)
        else:
            v = "bad" if rnd.random() < 0.12 else rnd.choice("abcdefgh")
            body = '{"package_name": "%s", "v": "%s", "ver": %d}' % (args.app, v, ts)
            producer.produce(args.topic, value=body, key=k, partition=p, timestamp=ts, on_delivery=delivered)
            model.value(k, v, ts)
        counts[p] += 1
        producer.poll(0)
    if producer.flush(30) != 0 or failures:
        sys.exit("not every record was produced: %s" % (failures[:3] or "flush timed out"))
    with open(os.path.join(args.out, "expected"), "w") as f:
        for k in sorted(model.rows):
            v, ver, mark = model.rows[k]
            f.write("%s|%s|%d|%s\n" % (k, v, ver, "-" if mark is None else mark))
    with open(os.path.join(args.out, "counts"), "w") as f:
        f.write("\n".join(str(c) for c in counts) + "\n")


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("stream")
    s.add_argument("--seed", type=int, required=True)
    s.add_argument("--mode", choices=["delete", "mark", "upsert"], required=True)
    s.add_argument("--member-version", action="store_true")
    s.add_argument("--topic", required=True)
    s.add_argument("--bootstrap", required=True)
    s.add_argument("--app", required=True)
    s.add_argument("--table", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--records", type=int, default=300)
    s.add_argument("--keys", type=int, default=6)
    s.add_argument("--partitions", type=int, default=2)
    args = ap.parse_args()
    stream(args)


if __name__ == "__main__":
    main()
