#!/usr/bin/python3
"""A schema registry for the tests: the documented REST subset the service
and Confluent's serializers use (docs/OPERATIONS.md: Formats and the schema
registry), no more. No registry server is installable here; this one keeps
its schemas in a JSON file, so a registry stopped and started again still
knows every id it gave.

  schema_registry.py --state FILE --port-file FILE [--port N] [--user-info user:password]

  POST /subjects/{subject}/versions   {"schema": "...", "schemaType"?}  -> {"id": N}
  GET  /schemas/ids/{id}              -> {"schema": "...", "schemaType"?}; 404 40403
  GET  /subjects/{subject}/versions/latest -> {"subject", "version", "id", "schema", "schemaType"?}
  GET  /subjects                      -> ["subject", ...]
"""
import argparse
import base64
import http.server
import json
import os
import re
import sys

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--state", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--user-info", default="")
    args = ap.parse_args()

    def load():
        if not os.path.exists(args.state):
            return {"schemas": [], "subjects": {}}
        with open(args.state) as f:
            return json.load(f)

    def save(state):
        tmp = args.state + ".tmp"
        with open(tmp, "w") as f:
            json.dump(state, f)
        os.replace(tmp, args.state)

    expected_auth = "Basic " + base64.b64encode(args.user_info.encode()).decode() if args.user_info else None

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *a):
            sys.stderr.write("registry: " + (fmt % a) + "\n")

        def answer(self, status, body):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def authorized(self):
            if expected_auth and self.headers.get("Authorization") != expected_auth:
                self.answer(401, {"error_code": 401, "message": "Unauthorized"})
                return False
            return True

        def do_GET(self):
            if not self.authorized():
                return
            state = load()
            m = re.fullmatch(r"/schemas/ids/(\d+)", self.path)
            if m:
                sid = int(m.group(1))
                if 1 <= sid <= len(state["schemas"]):
                    s = state["schemas"][sid - 1]
                    body = {"schema": s["schema"]}
                    if s.get("schemaType", "AVRO") != "AVRO":
                        body["schemaType"] = s["schemaType"]
                    return self.answer(200, body)
                return self.answer(404, {"error_code": 40403, "message": "Schema %d not found" % sid})
            m = re.fullmatch(r"/subjects/([^/]+)/versions/latest", self.path)
            if m:
                versions = state["subjects"].get(m.group(1))
                if not versions:
                    return self.answer(404, {"error_code": 40401, "message": "Subject '%s' not found." % m.group(1)})
                sid = versions[-1]
                s = state["schemas"][sid - 1]
                body = {"subject": m.group(1), "version": len(versions), "id": sid, "schema": s["schema"]}
                if s.get("schemaType", "AVRO") != "AVRO":
                    body["schemaType"] = s["schemaType"]
                return self.answer(200, body)
            if self.path == "/subjects":
                return self.answer(200, sorted(state["subjects"]))
            self.answer(404, {"error_code": 404, "message": "HTTP 404 Not Found"})

        def do_POST(self):
            if not self.authorized():
                return
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
            m = re.fullmatch(r"/subjects/([^/]+)/versions", self.path)
            if not m or "schema" not in body:
                return self.answer(404, {"error_code": 404, "message": "HTTP 404 Not Found"})
            state = load()
            kind = body.get("schemaType", "AVRO")
            entry = {"schema": body["schema"], "schemaType": kind}
            if entry in state["schemas"]:
                sid = state["schemas"].index(entry) + 1
            else:
                state["schemas"].append(entry)
                sid = len(state["schemas"])
            versions = state["subjects"].setdefault(m.group(1), [])
            if sid not in versions:
                versions.append(sid)
            save(state)
            self.answer(200, {"id": sid})

    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % server.server_address[1])
    os.replace(tmp, args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
