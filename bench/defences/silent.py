# An attacker keeps N silent connections open (reopening each one the server closes) while a
# good client makes lookups, each on a new connection; prints the good client's latencies.
# Usage: silent.py PORT N LOOKUPS
import socket, sys, time, threading, urllib.request
port, n, lookups = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
stop = False
def attacker():
    while not stop:
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            s.recv(1)  # silent: wait for the server to close it
        except OSError:
            pass
for _ in range(n):
    threading.Thread(target=attacker, daemon=True).start()
time.sleep(1)
lat = []
for i in range(lookups):
    t = time.time()
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/memberships/user-{i}", timeout=30).read()
        lat.append(time.time() - t)
    except Exception as e:
        print("failed:", e); lat.append(float("inf"))
stop = True
lat.sort()
print(f"{n} silent connections kept open: {lookups} lookups, median {lat[len(lat)//2]*1000:.0f} ms, max {lat[-1]*1000:.0f} ms")
