"""The upstream DNS responder of the egress tests and benchmark: answers A queries for
the names below, NOERROR without records for their other types, NXDOMAIN for the rest.
usage: dns.py DIR (writes DIR/dns.ready once it serves)."""

import socket, struct, sys
names = {'echo.boxrt.test': '10.203.0.10', 'allowed.test': '10.203.0.20', 'other.allowed.test': '10.203.0.21',
         'denied.test': '10.203.0.22', 'rebind.allowed.test': '10.203.0.2', 'loop.allowed.test': '127.0.0.1',
         'meta.allowed.test': '169.254.169.254'}
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(('10.203.0.10', 53))
open(sys.argv[1] + '/dns.ready', 'w').close()
while True:
    q, peer = s.recvfrom(512)
    tid, flags, qd = struct.unpack('!HHH', q[:6])
    i, labels = 12, []
    while q[i]:
        labels.append(q[i + 1:i + 1 + q[i]].decode()); i += 1 + q[i]
    question = q[12:i + 5]
    qtype = struct.unpack('!H', q[i + 1:i + 3])[0]
    name = '.'.join(labels).lower()
    if name in names and qtype == 1:
        answer = b'\xc0\x0c' + struct.pack('!HHIH', 1, 1, 60, 4) + socket.inet_aton(names[name])
        s.sendto(struct.pack('!HHHHHH', tid, 0x8180, 1, 1, 0, 0) + question + answer, peer)
    elif name in names:
        s.sendto(struct.pack('!HHHHHH', tid, 0x8180, 1, 0, 0, 0) + question, peer)
    else:
        s.sendto(struct.pack('!HHHHHH', tid, 0x8183, 1, 0, 0, 0) + question, peer)
