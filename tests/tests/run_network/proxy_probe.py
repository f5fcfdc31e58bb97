#!/usr/bin/env python3
"""Raw clients for run_network.rs, run inside the sandbox: each probe talks to warden's HTTP
proxy (127.0.0.1:3128), its SOCKS5 proxy (127.0.0.1:1080) or directly to an address, byte for
byte as written (no client-side normalisation of host spellings), and reports what came back.

usage: proxy_probe.py PROBES.json   (a JSON list; prints a JSON list of results, same order)

  {"kind": "http", "url": U, "host": H?, "method": M?, "headers": {..}?, "body": B?}
      `M U HTTP/1.1` to the HTTP proxy -> {"status", "headers", "body"}
  {"kind": "connect", "target": "HOST:PORT", "send": S?}
      CONNECT, then S through the tunnel when it opened -> {"status", "headers", "body", "data"}
  {"kind": "socks", "host": H, "port": P, "atyp": "domain"|"ipv4"|"ipv6", "send": S?}
      SOCKS5 CONNECT -> {"method", "reply", "data"}
  {"kind": "tcp"|"udp", "host": H, "port": P, "send": S}
      direct, bypassing the proxies -> {"connected", "data"}
Every result also has "error" (null or the exception) and "probe" (the input).
"""

import json
import socket
import struct
import sys

HTTP_PROXY = ("127.0.0.1", 3128)
SOCKS_PROXY = ("127.0.0.1", 1080)
TIMEOUT = 20


def recv_until_eof(sock, limit=1 << 20):
    data = b""
    try:
        while len(data) < limit:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    except socket.timeout:
        pass
    return data


def read_head(sock):
    data = b""
    while b"\r\n\r\n" not in data and len(data) < 1 << 20:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
    headers = []
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers.append([k.strip(), v.strip()])
    return status, headers, rest


def header(headers, name):
    for k, v in headers:
        if k.lower() == name.lower():
            return v
    return None


def read_body(sock, headers, rest, method):
    if method == "HEAD":
        return rest
    length = header(headers, "content-length")
    if length is not None and length.isdigit():
        n = int(length)
        body = rest
        while len(body) < n:
            chunk = sock.recv(65536)
            if not chunk:
                break
            body += chunk
        return body[:n]
    body = rest + recv_until_eof(sock)
    if (header(headers, "transfer-encoding") or "").lower() == "chunked":
        out, pos = b"", 0
        while True:
            end = body.find(b"\r\n", pos)
            if end < 0:
                break
            size = int(body[pos:end].split(b";")[0] or b"0", 16)
            if size == 0:
                break
            out += body[end + 2:end + 2 + size]
            pos = end + 2 + size + 2
        body = out
    return body


def http(p):
    url = p["url"]
    host = p.get("host") or url.split("://", 1)[1].split("/", 1)[0]
    method = p.get("method", "GET")
    body = p.get("body", "").encode()
    lines = [f"{method} {url} HTTP/1.1", f"Host: {host}", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in p.get("headers", {}).items()]
    if body or method in ("POST", "PUT"):
        lines.append(f"Content-Length: {len(body)}")
    s = socket.create_connection(HTTP_PROXY, timeout=TIMEOUT)
    s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
    status, headers, rest = read_head(s)
    return {
        "status": status,
        "headers": headers,
        "body": read_body(s, headers, rest, method).decode("latin-1"),
    }


def connect(p):
    target = p["target"]
    s = socket.create_connection(HTTP_PROXY, timeout=TIMEOUT)
    s.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    status, headers, rest = read_head(s)
    out = {"status": status, "headers": headers, "body": "", "data": None}
    if status == 200:
        if "send" in p:
            s.sendall(p["send"].encode())
            out["data"] = (rest + recv_until_eof(s)).decode("latin-1")
    else:
        out["body"] = read_body(s, headers, rest, "GET").decode("latin-1")
    return out


def socks(p):
    host, port, atyp = p["host"], int(p["port"]), p.get("atyp", "domain")
    s = socket.create_connection(SOCKS_PROXY, timeout=TIMEOUT)
    s.sendall(b"\x05\x01\x00")
    greeting = s.recv(2)
    out = {"method": greeting[1] if len(greeting) == 2 else None, "reply": None, "data": None}
    if len(greeting) != 2 or greeting[1] != 0:
        return out
    if atyp == "ipv4":
        addr = b"\x01" + socket.inet_pton(socket.AF_INET, host)
    elif atyp == "ipv6":
        addr = b"\x04" + socket.inet_pton(socket.AF_INET6, host)
    else:
        name = host.encode()
        addr = b"\x03" + bytes([len(name)]) + name
    s.sendall(b"\x05\x01\x00" + addr + struct.pack(">H", port))
    reply = s.recv(4)
    if len(reply) < 2:
        return out
    out["reply"] = reply[1]
    if out["reply"] == 0 and "send" in p:
        # Skip the bound address, then use the tunnel.
        kind = reply[3] if len(reply) == 4 else 1
        skip = {1: 4, 4: 16}.get(kind)
        if skip is None:
            skip = s.recv(1)[0]
        rest = b""
        while len(rest) < skip + 2:
            chunk = s.recv(skip + 2 - len(rest))
            if not chunk:
                break
            rest += chunk
        s.sendall(p["send"].encode())
        out["data"] = recv_until_eof(s).decode("latin-1")
    return out


def direct_tcp(p):
    out = {"connected": False, "data": None}
    s = socket.create_connection((p["host"], int(p["port"])), timeout=5)
    out["connected"] = True
    s.sendall(p.get("send", "x").encode())
    s.shutdown(socket.SHUT_WR)
    out["data"] = recv_until_eof(s).decode("latin-1")
    return out


def direct_udp(p):
    out = {"connected": False, "data": None}
    fam = socket.AF_INET6 if ":" in p["host"] else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.settimeout(2)
    s.sendto(p.get("send", "x").encode(), (p["host"], int(p["port"])))
    out["connected"] = True
    out["data"] = s.recvfrom(65536)[0].decode("latin-1")
    return out


KINDS = {"http": http, "connect": connect, "socks": socks, "tcp": direct_tcp, "udp": direct_udp}


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        probes = json.load(f)
    results = []
    for p in probes:
        try:
            r = KINDS[p["kind"]](p)
            r["error"] = None
        except Exception as e:  # noqa: BLE001 - every failure is a result
            r = {"error": repr(e)}
        r["probe"] = p
        results.append(r)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
