#!/usr/bin/env python3
"""Waits until a JupyterLab kernel answers, as the browser's first connection does: opens the
kernel's channels websocket through the portal (with the portal's session cookie from a curl
cookie jar), sends kernel_info_request and returns when its reply arrives. A kernel's REST state
stays "starting" until a client connects, so this is what "kernel ready" means to a student.

    kernel_ready.py URL COOKIE_JAR [TIMEOUT_S]
URL is https://HOST:PORT/jupyter/NAME/api/kernels/ID/channels. Standard library only."""

import base64
import json
import os
import socket
import ssl
import struct
import sys
import time
import urllib.parse
import uuid


def cookies(jar_path):
    pairs = []
    with open(jar_path) as jar:
        for line in jar:
            if line.startswith("#HttpOnly_"):
                line = line[len("#HttpOnly_"):]
            elif line.startswith("#") or not line.strip():
                continue
            fields = line.rstrip("\n").split("\t")
            if len(fields) == 7:
                pairs.append((fields[5], fields[6]))
    return pairs


def send_text(sock, text):
    payload = text.encode()
    mask = os.urandom(4)
    header = bytes([0x81])
    if len(payload) < 126:
        header += bytes([0x80 | len(payload)])
    elif len(payload) < 65536:
        header += bytes([0x80 | 126]) + struct.pack(">H", len(payload))
    else:
        header += bytes([0x80 | 127]) + struct.pack(">Q", len(payload))
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    sock.sendall(header + mask + masked)


def read_exact(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("the websocket closed")
        data += chunk
    return data


def read_frame(sock):
    first, second = read_exact(sock, 2)
    length = second & 0x7F
    if length == 126:
        length = struct.unpack(">H", read_exact(sock, 2))[0]
    elif length == 127:
        length = struct.unpack(">Q", read_exact(sock, 8))[0]
    if second & 0x80:
        read_exact(sock, 4)  # a server never masks; read past it if one did
    return first & 0x0F, read_exact(sock, length)


def main():
    url, jar = sys.argv[1], sys.argv[2]
    timeout = float(sys.argv[3]) if len(sys.argv) > 3 else 60.0
    parts = urllib.parse.urlsplit(url)
    jar_cookies = cookies(jar)
    xsrf = next((v for k, v in jar_cookies if k == "_xsrf"), "")
    raw = socket.create_connection((parts.hostname, parts.port or 443), timeout=timeout)
    # The portal's certificate is the deployment's own CA's, as in jupyter.sh (curl -k).
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    sock = context.wrap_socket(raw, server_hostname=parts.hostname)
    key = base64.b64encode(os.urandom(16)).decode()
    path = parts.path + ("?" + parts.query if parts.query else "")
    request = (
        f"GET {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
        f"Origin: {parts.scheme}://{parts.netloc}\r\nX-XSRFToken: {xsrf}\r\n"
        f"Cookie: {'; '.join(f'{k}={v}' for k, v in jar_cookies)}\r\n\r\n"
    )
    sock.sendall(request.encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(4096)
        if not chunk:
            sys.exit("Error: the websocket upgrade was refused (connection closed)")
        head += chunk
    status = head.split(b"\r\n", 1)[0].decode(errors="replace")
    if " 101 " not in status + " ":
        sys.exit(f"Error: the websocket upgrade answered {status}")
    msg_id = uuid.uuid4().hex
    send_text(sock, json.dumps({
        "header": {"msg_id": msg_id, "username": "", "session": uuid.uuid4().hex,
                   "msg_type": "kernel_info_request", "version": "5.3"},
        "parent_header": {}, "metadata": {}, "content": {}, "channel": "shell",
    }))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        opcode, payload = read_frame(sock)
        if opcode == 0x8:
            sys.exit("Error: the kernel's websocket closed before it answered")
        if opcode != 0x1:
            continue
        message = json.loads(payload)
        if (message.get("msg_type") == "kernel_info_reply"
                and message.get("parent_header", {}).get("msg_id") == msg_id):
            return
    sys.exit(f"Error: no kernel_info_reply after {timeout} s")


if __name__ == "__main__":
    main()
