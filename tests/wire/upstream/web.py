"""The upstream web servers of the egress tests and benchmark: HTTP on 80 and HTTPS on
443 (DIR/server.pem, a test CA's certificate for every name) answering
"<Host>@<the address it was reached on>", or N bytes for /bytes/N; a UDP echo on
10.203.0.22:9999. usage: web.py DIR (writes DIR/web.ready once it serves)."""

import os, socket, ssl, sys, threading
d = sys.argv[1]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); ctx.load_cert_chain(d + '/server.pem', d + '/server.key')
def handle(c, tls):
    try:
        if tls:
            c = ctx.wrap_socket(c, server_side=True)
        data = b''
        while b'\r\n\r\n' not in data:
            chunk = c.recv(4096)
            if not chunk:
                return
            data += chunk
        host = ''
        for line in data.split(b'\r\n')[1:]:
            if line.lower().startswith(b'host:'):
                host = line[5:].strip().decode()
        path = data.split(b' ')[1].decode()
        n = int(path[7:]) if path.startswith('/bytes/') else None
        body = None if n is not None else ('%s@%s' % (host, c.getsockname()[0])).encode()
        c.sendall(('HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n' % (len(body) if body else n)).encode())
        if body:
            c.sendall(body)
        else:
            block = b'x' * 65536
            while n > 0:
                c.sendall(block[:min(n, 65536)]); n -= min(n, 65536)
        c.close()
    except Exception:
        pass
def serve(port, tls):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('0.0.0.0', port)); s.listen(64)
    while True:
        c, _ = s.accept(); threading.Thread(target=handle, args=(c, tls), daemon=True).start()
def udp():
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(('10.203.0.22', 9999))
    while True:
        data, peer = u.recvfrom(2048); u.sendto(b'udp:' + data, peer)
for port, tls in ((80, False), (443, True)):
    threading.Thread(target=serve, args=(port, tls), daemon=True).start()
threading.Thread(target=udp, daemon=True).start()
open(d + '/web.ready', 'w').close()
threading.Event().wait()
