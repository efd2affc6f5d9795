#!/usr/bin/python3
"""forestdns.py: the DNS forwarder of test/harness/samba/forest.sh.

Listens on UDP LISTEN_IP:53 and sends each query whose name lies in one of
the ZONE=IP zones to that IP (the zone's DC), relaying the answer; any other
name is answered REFUSED at once. Both DCs forward what they do not hold
here, so each finds the other domain's names, and a name outside both
domains (Kerberos asks for TXT _kerberos.COM) ends here instead of bouncing
between the DCs.

usage: forestdns.py LISTEN_IP PIDFILE ZONE=IP [ZONE=IP ...]
"""
import os
import socket
import sys
import threading


def qname(msg):
    """The first question's name, lower case, without the final dot."""
    labels, i = [], 12
    while i < len(msg):
        n = msg[i]
        if n == 0 or n & 0xC0:
            break
        labels.append(msg[i + 1:i + 1 + n].decode("ascii", "replace").lower())
        i += 1 + n
    return ".".join(labels)


def refused(msg):
    """msg answered REFUSED: QR set, opcode and RD kept, RCODE 5, no records."""
    flags = bytes([msg[2] | 0x80, (msg[3] & 0x70) | 5])
    return msg[:2] + flags + msg[4:6] + b"\0\0\0\0\0\0" + question(msg)


def question(msg):
    i = 12
    while i < len(msg) and msg[i] != 0 and not msg[i] & 0xC0:
        i += 1 + msg[i]
    return msg[12:i + 5]


def serve(sock, zones, msg, client):
    name = qname(msg)
    for zone, ip in zones:
        if name == zone or name.endswith("." + zone):
            up = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            up.settimeout(3)
            try:
                up.sendto(msg, (ip, 53))
                sock.sendto(up.recv(65535), client)
            except OSError:
                pass  # the client retries or gives up on its own
            finally:
                up.close()
            return
    sock.sendto(refused(msg), client)


def main():
    listen, pidfile = sys.argv[1], sys.argv[2]
    zones = [tuple(a.lower().split("=", 1)) for a in sys.argv[3:]]
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((listen, 53))
    with open(pidfile, "w") as f:
        f.write(str(os.getpid()))
    print("listening", flush=True)
    while True:
        msg, client = sock.recvfrom(65535)
        if len(msg) > 12:
            threading.Thread(target=serve, args=(sock, zones, msg, client), daemon=True).start()


if __name__ == "__main__":
    main()
