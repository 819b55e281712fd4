#!/usr/bin/python3
"""Records for the formats suite, encoded by Confluent's own serializers
(python3-confluent-kafka's confluent_kafka.avro on python3-avro; its
SchemaRegistryClient registers the JSON schemas), written one per line as
"KEY_HEX VALUE_HEX" ("-" for none), and produced to Kafka from such lines.

  registry_records.py orders FORMAT --registry URL --topic T [--count N] [--seed S]
      FORMAT: json, connect, avro or json_schema. The same N orders whatever
      the format (the seed decides them).
  registry_records.py evolving --registry URL --topic T [--count N]
      records of three writer's schemas of one subject, interleaved.
  registry_records.py keyed --registry URL --topic T
      Avro keys and values, and tombstones of some of the keys.
  registry_records.py types --registry URL --topic T
      one record of every Avro type and logical type.
  registry_records.py bad --registry URL --topic T --unknown-id N
      a good record of the first evolving schema, then one of each bad
      input: no magic byte, a short header, id N (not registered yet: its
      record is encoded with LATER), bytes the schema does not decode,
      bytes left after the record, a string longer than the record.
  registry_records.py register-later --registry URL --topic T
      registers LATER under the topic's subject and prints its id.
  registry_records.py produce --bootstrap B --topic T [--partition P] < LINES
"""
import argparse
import base64
import datetime
import json
import random
import sys
from decimal import Context, Decimal

EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)

ORDER_AVRO = {
    "type": "record", "name": "Order", "namespace": "shop", "fields": [
        {"name": "order_id", "type": "long"},
        {"name": "amount", "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 9}],
         "default": None},
        {"name": "day", "type": ["null", {"type": "int", "logicalType": "date"}], "default": None},
        {"name": "placed_at", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}], "default": None},
        {"name": "customer", "type": ["null", {"type": "record", "name": "Customer", "fields": [
            {"name": "email", "type": ["null", "string"], "default": None}]}], "default": None},
        {"name": "lines", "type": {"type": "array", "items": {"type": "record", "name": "Line", "fields": [
            {"name": "sku", "type": "string"}, {"name": "qty", "type": "int"}]}}},
    ]}

ORDER_JSON_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
    "properties": {
        "order_id": {"type": "integer"}, "amount": {"type": ["number", "null"]},
        "day": {"type": ["string", "null"], "format": "date"},
        "placed_at": {"type": ["string", "null"], "format": "date-time"},
        "customer": {"type": ["object", "null"], "properties": {"email": {"type": ["string", "null"]}}},
        "lines": {"type": "array", "items": {"type": "object", "properties": {
            "sku": {"type": "string"}, "qty": {"type": "integer"}}}},
    },
    "required": ["order_id", "lines"]}

CONNECT_SCHEMA = {"type": "struct", "optional": False, "name": "orders", "fields": [
    {"type": "int64", "optional": False, "field": "order_id"},
    {"type": "bytes", "optional": True, "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
     "parameters": {"scale": "9", "connect.decimal.precision": "38"}, "field": "amount"},
    {"type": "int32", "optional": True, "name": "org.apache.kafka.connect.data.Date", "version": 1, "field": "day"},
    {"type": "int64", "optional": True, "name": "org.apache.kafka.connect.data.Timestamp", "version": 1,
     "field": "placed_at"},
    {"type": "struct", "optional": True, "field": "customer", "fields": [
        {"type": "string", "optional": True, "field": "email"}]},
    {"type": "array", "optional": False, "field": "lines", "items": {"type": "struct", "fields": [
        {"type": "string", "optional": False, "field": "sku"}, {"type": "int32", "optional": False, "field": "qty"}]}}]}


def avro_serializer(url):
    from confluent_kafka.avro import CachedSchemaRegistryClient, MessageSerializer
    return MessageSerializer(CachedSchemaRegistryClient({"url": url}))


def avro_schema(d):
    from confluent_kafka import avro
    return avro.loads(json.dumps(d))


def emit(key, value):
    print("%s %s" % (key.hex() if key is not None else "-", value.hex() if value is not None else "-"))


def orders(args):
    rng = random.Random(args.seed)
    if args.format == "avro":
        ser, schema = avro_serializer(args.registry), avro_schema(ORDER_AVRO)
    if args.format == "json_schema":
        from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
        schema_id = SchemaRegistryClient({"url": args.registry}).register_schema(
            args.topic + "-value", Schema(json.dumps(ORDER_JSON_SCHEMA), "JSON"))
    for i in range(args.count):
        unscaled = rng.choice([0, 5, -5, 10**37 + rng.randrange(10**37), -rng.randrange(10**38)])
        days = rng.randrange(-719162, 2932896)  # the years 1 to 9999 Python's dates hold
        ms = rng.randrange(-62135596800000, 253402300799999)
        email = rng.choice([None, "a@b.example", "c+%d@d.example" % i, "quote\"back\\slash\u00e9"])
        customer = {"email": email} if email or rng.random() < 0.5 else None
        lines = [{"sku": "S%d" % rng.randrange(100), "qty": rng.randrange(1, 9)} for _ in range(rng.randrange(3))]
        amount = Decimal(unscaled).scaleb(-9, Context(prec=50))  # every digit (the default keeps 28)
        day = datetime.date(1970, 1, 1) + datetime.timedelta(days=days)
        at = EPOCH + datetime.timedelta(milliseconds=ms)
        if args.format == "avro":
            record = {"order_id": i, "amount": amount, "day": day, "placed_at": at, "customer": customer,
                      "lines": lines}
            emit(None, ser.encode_record_with_schema(args.topic, schema, record))
            continue
        if args.format == "connect":
            as_bytes = unscaled.to_bytes((unscaled.bit_length() + 8) // 8, "big", signed=True)
            text = json.dumps({"schema": CONNECT_SCHEMA, "payload": {
                "order_id": i, "amount": base64.b64encode(as_bytes).decode(), "day": days, "placed_at": ms,
                "customer": customer, "lines": lines}})
            emit(None, text.encode())
            continue
        text = json.dumps({"order_id": i, "amount": "AMOUNT", "day": day.isoformat(),
                           "placed_at": "%04d-%s" % (at.year, at.strftime("%m-%dT%H:%M:%S.%f")[:-3] + "Z"),
                           "customer": customer, "lines": lines}).replace('"AMOUNT"', format(amount, "f"))
        if args.format == "json":
            emit(None, text.encode())
        else:  # the wire format of a JSON schema: magic byte, id, the JSON text
            emit(None, b"\0" + schema_id.to_bytes(4, "big") + text.encode())


EVOLVING = [
    {"type": "record", "name": "Item", "fields": [
        {"name": "id", "type": "long"}, {"name": "name", "type": "string"},
        {"name": "note", "type": ["null", "string"], "default": None}]},
    {"type": "record", "name": "Item", "fields": [
        {"name": "id", "type": "long"}, {"name": "name", "type": "string"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "score", "type": "int", "default": 0}]},
    {"type": "record", "name": "Item", "fields": [
        {"name": "id", "type": "long"}, {"name": "name", "type": "string"},
        {"name": "score", "type": "int", "default": 0}]},
]


def evolving(args):
    ser = avro_serializer(args.registry)
    schemas = [avro_schema(s) for s in EVOLVING]
    for i in range(args.count):
        v = i % 3
        record = {"id": i, "name": "item %d" % i}
        if v < 2:
            record["note"] = "note %d" % i
        if v > 0:
            record["score"] = i * 10
        emit(None, ser.encode_record_with_schema(args.topic, schemas[v], record))


LATER = {"type": "record", "name": "Item", "fields": [
    {"name": "id", "type": "long"}, {"name": "name", "type": "string"},
    {"name": "tags", "type": {"type": "array", "items": "string"}, "default": []}]}


def avro_body(schema, record):
    """The Avro binary encoding of record by python3-avro's writer."""
    import io
    import avro.io
    out = io.BytesIO()
    avro.io.DatumWriter(schema).write(record, avro.io.BinaryEncoder(out))
    return out.getvalue()


def bad(args):
    ser = avro_serializer(args.registry)
    v1 = avro_schema(EVOLVING[0])
    good = ser.encode_record_with_schema(args.topic, v1, {"id": 1, "name": "good", "note": None})
    emit(None, good)
    emit(None, b'{"id": 2, "name": "plain JSON"}')
    emit(None, b"\0\0\1")
    emit(None, b"\0" + args.unknown_id.to_bytes(4, "big") + avro_body(avro_schema(LATER),
                                                                      {"id": 4, "name": "later", "tags": ["a"]}))
    emit(None, good[:-3])
    emit(None, good + b"\0")
    # id 1, then a name of 2^30 bytes declared in a record of 11.
    emit(None, good[:5] + b"\x02\x80\x80\x80\x80\x08")


def register_later(args):
    from confluent_kafka.avro import CachedSchemaRegistryClient
    print(CachedSchemaRegistryClient({"url": args.registry}).register(args.topic + "-value", avro_schema(LATER)))


TYPES = {"type": "record", "name": "Everything", "namespace": "t", "fields": [
    {"name": "id", "type": "int"},
    {"name": "flag", "type": "boolean"},
    {"name": "ratio", "type": "double"},
    {"name": "small", "type": "float"},
    {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}},
    {"name": "raw", "type": "bytes"},
    {"name": "mac", "type": {"type": "fixed", "name": "Mac", "size": 6}},
    {"name": "price", "type": {"type": "fixed", "name": "Price", "size": 16, "logicalType": "decimal",
                               "precision": 38, "scale": 9}},
    {"name": "uid", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "at_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "local_ms", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
    {"name": "tick_us", "type": {"type": "long", "logicalType": "time-micros"}},
    {"name": "tick_ms", "type": {"type": "int", "logicalType": "time-millis"}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "attrs", "type": {"type": "map", "values": "long"}},
    {"name": "also", "type": ["null", "Color"], "default": None},
]}


def types(args):
    ser = avro_serializer(args.registry)
    record = {"id": 1, "flag": True, "ratio": 0.1, "small": 1.5, "color": "GREEN", "raw": b"\x00\x01\xff",
              "mac": b"\x00\x1b\x21\x3c\x4d\x5e",
              "price": Decimal("-12345678901234567890123456789.123456789"),
              "uid": "1b4e28ba-2fa1-11d2-883f-0016d3cca427",
              "at_us": datetime.datetime(2026, 12, 1, 10, 0, 0, 123456, tzinfo=datetime.timezone.utc),
              # python3-avro 1.11 writes local-timestamp-millis as the long it is
              "local_ms": (datetime.datetime(2026, 12, 1, 10, 0, 0, 123000) - datetime.datetime(1970, 1, 1))
              // datetime.timedelta(milliseconds=1),
              "tick_us": datetime.time(23, 59, 59, 999999), "tick_ms": datetime.time(0, 0, 1, 500000),
              "tags": ["a", "b,c", "d\"e"], "attrs": {"x": 1, "y": -2}, "also": "RED"}
    emit(None, ser.encode_record_with_schema(args.topic, avro_schema(TYPES), record))


def keyed(args):
    ser = avro_serializer(args.registry)
    key_schema = avro_schema({"type": "record", "name": "ItemKey", "fields": [
        {"name": "shop", "type": "string"}, {"name": "id", "type": "long"}]})
    value_schema = avro_schema({"type": "record", "name": "ItemValue", "fields": [
        {"name": "name", "type": "string"}]})
    for i in range(10):
        key = ser.encode_record_with_schema(args.topic, key_schema, {"shop": "s%d" % (i % 2), "id": i}, is_key=True)
        emit(key, ser.encode_record_with_schema(args.topic, value_schema, {"name": "item %d" % i}))
    for i in (1, 4, 7):  # deleted
        emit(ser.encode_record_with_schema(args.topic, key_schema, {"shop": "s%d" % (i % 2), "id": i}, is_key=True),
             None)


def produce(args):
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": args.bootstrap, "linger.ms": 5})
    failed = []

    def done(err, _msg):
        if err:
            failed.append(err)
    for line in sys.stdin:
        key, value = line.split()
        p.produce(args.topic, key=None if key == "-" else bytes.fromhex(key),
                  value=None if value == "-" else bytes.fromhex(value), partition=args.partition, on_delivery=done)
        p.poll(0)
    p.flush(60)
    if failed or len(p):
        sys.exit("produce: %d failed (%s), %d not delivered" % (len(failed), failed[:1], len(p)))


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    o = sub.add_parser("orders")
    o.add_argument("format", choices=["json", "connect", "avro", "json_schema"])
    b = sub.add_parser("bad")
    b.add_argument("--unknown-id", type=int, required=True)
    for s in (o, sub.add_parser("evolving"), sub.add_parser("keyed"), b, sub.add_parser("register-later"),
              sub.add_parser("types")):
        s.add_argument("--registry", default="")
        s.add_argument("--topic", required=True)
        s.add_argument("--count", type=int, default=200)
        s.add_argument("--seed", type=int, default=43)
    pr = sub.add_parser("produce")
    pr.add_argument("--bootstrap", required=True)
    pr.add_argument("--topic", required=True)
    pr.add_argument("--partition", type=int, default=0)
    args = ap.parse_args()
    {"orders": orders, "evolving": evolving, "keyed": keyed, "bad": bad, "types": types, "register-later": register_later,
     "produce": produce}[args.cmd](args)


if __name__ == "__main__":
    main()
