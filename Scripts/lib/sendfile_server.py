#!/usr/bin/env python3
"""A minimal HTTP server that answers every GET/POST with one file through sendfile(2): the
fastest an HTTP server can hand bytes to curl over loopback TCP on this machine. The
benchmark uses it as the ceiling the emulator is compared with. Prints its port, serves
`count` requests, exits."""
import os
import socket
import sys

path, count = sys.argv[1], int(sys.argv[2])
server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen(4)
print(server.getsockname()[1], flush=True)
size = os.path.getsize(path)
for _ in range(count):
    client, _ = server.accept()
    request = b""
    while b"\r\n\r\n" not in request:
        chunk = client.recv(65536)
        if not chunk:
            break
        request += chunk
    with open(path, "rb") as f:
        client.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % size)
        client.sendfile(f)
    client.close()
