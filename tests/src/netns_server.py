#!/usr/bin/env python3
"""Test servers of warden-tests (see tests/src/netns.rs): one server per process.

Modes: http (optionally TLS), tcp-echo, udp-echo. After binding it prints `READY <port>` on
stdout. Every request or connection is appended to the log file as one JSON line, except the
harness's readiness probes (PROBE). The process exits when its stdin closes, so a test process
that dies without cleaning up takes its servers with it.

HTTP routes (GET/HEAD unless noted):
  /__warden_probe     200 "ready", not logged
  /echo               200, a JSON object of the request: method, path, headers
  /bytes/N            N bytes of deterministic data (SHAKE-128 of SEED), header X-Sha256;
                      logged with how many bytes were sent and whether the transfer completed
  /static/PATH        the file PATH below --static (404 when missing)
  anything else       200 "hello from warden-tests ..." naming the Host header and path
  POST/PUT anything   reads the body (Content-Length or chunked), 200 with JSON
                      {"sha256": ..., "length": ...}; logged with body_len and body_sha256
"""

import argparse
import functools
import hashlib
import json
import os
import resource
import socket
import socketserver
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

PROBE = b"warden-tests-probe"
SEED = b"warden-tests"
CHUNK = 1 << 16

ARGS = None
LOG = None


class Log:
    def __init__(self, path):
        self.file = open(path, "a", buffering=1, encoding="utf-8")
        self.lock = threading.Lock()

    def write(self, entry):
        entry["time"] = time.time()
        line = json.dumps(entry, sort_keys=True)
        with self.lock:
            self.file.write(line + "\n")
            self.file.flush()


@functools.lru_cache(maxsize=4)
def stream(n):
    data = hashlib.shake_128(SEED).digest(n) if n else b""
    return data, hashlib.sha256(data).hexdigest()


def raise_nofile():
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):
        pass


def watch_stdin():
    def run():
        try:
            while sys.stdin.buffer.read(4096):
                pass
        finally:
            os._exit(0)

    threading.Thread(target=run, daemon=True).start()


def peer(addr):
    """The client address, IPv4-mapped IPv6 written as plain IPv4."""
    host = addr[0]
    if host.startswith("::ffff:") and "." in host:
        return host[len("::ffff:"):]
    return host


def family(addr):
    return socket.AF_INET6 if ":" in addr else socket.AF_INET


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "warden-tests"
    sys_version = ""

    def log_message(self, *args):
        pass

    def setup(self):
        if isinstance(self.request, ssl.SSLSocket):
            self.request.settimeout(30)
            self.request.do_handshake()
            self.request.settimeout(None)
        super().setup()

    def entry(self, **extra):
        e = {
            "method": self.command,
            "path": self.path,
            "headers": [[k, v] for k, v in self.headers.items()],
            "client": peer(self.client_address),
            "tls": ARGS.tls_cert is not None,
        }
        e.update(extra)
        LOG.write(e)

    def reply(self, status, body, ctype="text/plain; charset=utf-8", extra=()):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def route(self):
        return unquote(urlsplit(self.path).path)

    def do_GET(self):
        path = self.route()
        if path == "/__warden_probe":
            self.reply(200, b"ready")
            return
        if path.startswith("/bytes/"):
            self.send_bytes(path)
            return
        if path.startswith("/static/") and ARGS.static:
            self.send_static(path[len("/static/"):])
            return
        if path == "/echo":
            body = json.dumps(
                {
                    "method": self.command,
                    "path": self.path,
                    "headers": [[k, v] for k, v in self.headers.items()],
                }
            ).encode()
            self.entry(status=200)
            self.reply(200, body, "application/json")
            return
        host = self.headers.get("Host", "")
        body = f"hello from warden-tests host={host} path={self.path}\n".encode()
        self.entry(status=200)
        self.reply(200, body)

    do_HEAD = do_GET

    def send_bytes(self, path):
        try:
            n = int(path[len("/bytes/"):])
        except ValueError:
            self.entry(status=400)
            self.reply(400, b"bad length\n")
            return
        data, digest = stream(n)
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(n))
        self.send_header("X-Sha256", digest)
        self.end_headers()
        sent = 0
        complete = True
        if self.command != "HEAD":
            view = memoryview(data)
            try:
                while sent < n:
                    k = self.wfile.write(view[sent:sent + CHUNK])
                    sent += k if k else min(CHUNK, n - sent)
                self.wfile.flush()
            except (OSError, ValueError):
                complete = False
                self.close_connection = True
        self.entry(status=200, sent=sent, complete=complete, length=n)

    def send_static(self, rel):
        root = os.path.realpath(ARGS.static)
        full = os.path.realpath(os.path.join(root, rel))
        if not (full == root or full.startswith(root + os.sep)) or not os.path.isfile(full):
            self.entry(status=404)
            self.reply(404, b"not found\n")
            return
        with open(full, "rb") as f:
            body = f.read()
        self.entry(status=200)
        self.reply(200, body, "application/octet-stream")

    def read_body(self):
        digest = hashlib.sha256()
        n = 0
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            while True:
                line = self.rfile.readline(1024)
                if not line:
                    raise ConnectionError("body ended early")
                size = int(line.split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                        pass
                    break
                n += self.read_exact(size, digest)
                self.rfile.readline(16)
        else:
            length = int(self.headers.get("Content-Length") or 0)
            n += self.read_exact(length, digest)
        return n, digest.hexdigest()

    def read_exact(self, size, digest):
        left = size
        while left:
            chunk = self.rfile.read(min(left, CHUNK))
            if not chunk:
                raise ConnectionError("body ended early")
            digest.update(chunk)
            left -= len(chunk)
        return size

    def do_POST(self):
        try:
            n, digest = self.read_body()
        except (OSError, ValueError) as e:
            self.entry(status=400, error=str(e))
            self.close_connection = True
            return
        self.entry(status=200, body_len=n, body_sha256=digest)
        body = json.dumps({"sha256": digest, "length": n}).encode()
        self.reply(200, body, "application/json")

    do_PUT = do_POST


class HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 4096
    allow_reuse_address = True

    def server_bind(self):
        if self.address_family == socket.AF_INET6:
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        super().server_bind()

    def handle_error(self, request, client_address):
        exc = sys.exc_info()[1]
        print(f"warden-tests server: {client_address}: {exc!r}", file=sys.stderr)


class TCPEcho(socketserver.BaseRequestHandler):
    def handle(self):
        total = 0
        head = b""
        try:
            while True:
                data = self.request.recv(CHUNK)
                if not data:
                    break
                if len(head) < 256:
                    head += data[: 256 - len(head)]
                total += len(data)
                self.request.sendall(data)
        except OSError:
            pass
        if head != PROBE:
            LOG.write(
                {
                    "client": peer(self.client_address),
                    "bytes": total,
                    "head": head.decode("latin-1"),
                }
            )


class UDPEcho(socketserver.BaseRequestHandler):
    def handle(self):
        data, sock = self.request
        if data != PROBE:
            LOG.write(
                {
                    "client": peer(self.client_address),
                    "bytes": len(data),
                    "head": data[:256].decode("latin-1"),
                }
            )
        sock.sendto(data, self.client_address)


def make_server(base, handler, bind, port):
    fam = family(bind)

    class Server(base):
        address_family = fam
        daemon_threads = True
        allow_reuse_address = True
        request_queue_size = 4096

        def server_bind(self):
            if fam == socket.AF_INET6:
                self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            super().server_bind()

    return Server((bind, port), handler)


def main():
    global ARGS, LOG
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=["http", "tcp-echo", "udp-echo"], required=True)
    p.add_argument("--bind", required=True)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--log", required=True)
    p.add_argument("--static")
    p.add_argument("--tls-cert")
    p.add_argument("--tls-key")
    ARGS = p.parse_args()
    LOG = Log(ARGS.log)
    raise_nofile()
    watch_stdin()

    if ARGS.mode == "http":
        HTTPServer.address_family = family(ARGS.bind)
        server = HTTPServer((ARGS.bind, ARGS.port), Handler)
        if ARGS.tls_cert:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(ARGS.tls_cert, ARGS.tls_key)
            # The handshake happens in the handler thread, not in accept().
            server.socket = ctx.wrap_socket(
                server.socket, server_side=True, do_handshake_on_connect=False
            )
    elif ARGS.mode == "tcp-echo":
        server = make_server(socketserver.ThreadingTCPServer, TCPEcho, ARGS.bind, ARGS.port)
    else:
        server = make_server(socketserver.ThreadingUDPServer, UDPEcho, ARGS.bind, ARGS.port)

    port = server.server_address[1]
    print(f"READY {port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
