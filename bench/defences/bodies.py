# N clients each send all but the last byte of a POST /memberships body of SIZE bytes, then
# stall; prints the server's peak RSS growth while they hold. Usage: bodies.py PORT PID N SIZE
import socket, sys, time, threading
port, pid, n, size = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def rss():
    for l in open(f"/proc/{pid}/status"):
        if l.startswith("VmRSS"): return int(l.split()[1]) // 1024
before = rss()
body = b'{"contexts": [' + b'"' + b'a' * (size - 18) + b'"]}'
assert len(body) == size, len(body)
socks = []
def send(s):
    try:
        s.sendall(body[:-1])
    except OSError:
        pass
threads = []
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /memberships HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % size)
    socks.append(s)
    t = threading.Thread(target=send, args=(s,), daemon=True); t.start(); threads.append(t)
peak = before
end = time.time() + 6
while time.time() < end:
    peak = max(peak, rss()); time.sleep(0.05)
print(f"{n} stalled bodies of {size} bytes: RSS {before} MiB -> peak {peak} MiB (+{peak-before} MiB)")
