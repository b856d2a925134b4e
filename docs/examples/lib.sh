# Shell functions the setup scripts of docs/examples/ share; each sources this file
# from the checkout (or an instance directory) before it changes directory.

free_port() {  # a loopback port nothing listens on now
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

wait_ready() {  # wait_ready PORT: until the serve on PORT answers GET /healthz (30 s at most)
  python3 - "$1" <<'PY'
import sys, time, urllib.request
for _ in range(300):
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/healthz", timeout=1)
        break
    except OSError:
        time.sleep(0.1)
PY
}
