"""Benchmark: signed webhooks fired at `ribbit serve` on loopback, side by side with a bare
Flask endpoint (same WSGI server, same signature check, no store) in the same run.

Prints requests/s, p50/p99 latency, the ratio to the bare endpoint, and events lost
(deliveries answered 202 but missing from the store; must be 0).

    python -m tests.benchmarks.bench_webhooks [--events N] [--clients C]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import requests

from bot.signatures import sign_github
from tests.conftest import load_payload

SECRET = "bench-secret"

BARE_APP = textwrap.dedent(f"""
    import hmac, hashlib, json, sys
    from flask import Flask, request, jsonify
    from waitress import serve
    app = Flask("bare")
    @app.post("/webhooks/github")
    def hook():
        body = request.get_data()
        sig = "sha256=" + hmac.new({SECRET!r}.encode(), body, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(sig, request.headers.get("X-Hub-Signature-256", "")):
            return jsonify(status="error"), 401
        json.loads(body)
        return jsonify(status="accepted"), 202
    @app.get("/healthz")
    def health():
        return "ok"
    serve(app, host="127.0.0.1", port=int(sys.argv[1]), threads=8, _quiet=True)
""")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_up(url: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if requests.get(url, timeout=1).status_code < 500:
                return
        except requests.ConnectionError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not come up")


def bodies(n: int, first: int = 1) -> list[bytes]:
    base = load_payload("github", "issues.labeled")
    base["label"]["name"] = "ribbit"
    out = []
    for i in range(n):
        base["issue"]["number"] = first + i
        out.append(json.dumps(base).encode())
    return out


def fire(url: str, payloads: list[bytes], clients: int, prefix: str) -> tuple[float, list[float],
                                                                               dict[int, int]]:
    latencies: list[float] = []
    codes: dict[int, int] = {}
    lock = threading.Lock()
    chunks = [payloads[i::clients] for i in range(clients)]

    def worker(k: int, chunk: list[bytes]) -> None:
        session = requests.Session()
        for j, body in enumerate(chunk):
            headers = {"X-GitHub-Event": "issues", "X-GitHub-Delivery": f"{prefix}-{k}-{j}",
                       "X-Hub-Signature-256": sign_github(SECRET, body),
                       "Content-Type": "application/json"}
            start = time.perf_counter()
            resp = session.post(url, data=body, headers=headers, timeout=30)
            elapsed = time.perf_counter() - start
            with lock:
                latencies.append(elapsed)
                codes[resp.status_code] = codes.get(resp.status_code, 0) + 1

    threads = [threading.Thread(target=worker, args=(k, c)) for k, c in enumerate(chunks)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - start, latencies, codes


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] * 1000


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=2000)
    ap.add_argument("--clients", type=int, default=8)
    args = ap.parse_args(argv)
    payloads = bodies(args.events)
    warmup = bodies(50, first=10**6)
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        ribbit_port, bare_port = free_port(), free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("RIBBIT_")}
        env.update(RIBBIT_DATA_DIR=str(data), RIBBIT_GITHUB__WEBHOOK_SECRET=SECRET,
                   RIBBIT_PORT=str(ribbit_port), RIBBIT_LOG_LEVEL="WARNING",
                   RIBBIT_ADMISSION__DAILY_JOBS_PER_REPO="1000000")
        ribbit = subprocess.Popen([sys.executable, "-m", "bot", "serve", "--no-worker"],
                                  env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        bare = subprocess.Popen([sys.executable, "-c", BARE_APP, str(bare_port)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_up(f"http://127.0.0.1:{ribbit_port}/healthz")
            wait_up(f"http://127.0.0.1:{bare_port}/healthz")
            results = {}
            for name, port in (("bare flask", bare_port), ("ribbit serve", ribbit_port)):
                url = f"http://127.0.0.1:{port}/webhooks/github"
                fire(url, warmup, 2, f"warm-{name}")  # excluded from the figures
                results[name] = fire(url, payloads, args.clients, f"run-{name}")
        finally:
            ribbit.terminate()
            bare.terminate()
            ribbit.wait(30)
            bare.wait(30)
        from sqlalchemy import create_engine, text

        engine = create_engine(f"sqlite:///{data / 'ribbit.db'}")
        with engine.connect() as conn:
            stored = conn.execute(text(
                "SELECT count(*) FROM deliveries WHERE delivery_id LIKE 'run-%'")).scalar_one()
            jobs = conn.execute(text("SELECT count(*) FROM jobs")).scalar_one()
        engine.dispose()
    print(f"{args.events} signed issues.labeled webhooks, {args.clients} keep-alive clients, "
          "loopback, same waitress server")
    print(f"{'endpoint':14} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8}  answers")
    for name, (elapsed, lat, codes) in results.items():
        print(f"{name:14} {len(lat) / elapsed:8.0f} {pct(lat, 50):8.2f} {pct(lat, 99):8.2f}  "
              f"{dict(sorted(codes.items()))}")
    (re, rl, rc), (be, bl, _) = results["ribbit serve"], results["bare flask"]
    print(f"ratio ribbit/bare: throughput {(len(rl) / re) / (len(bl) / be):.2f}x, "
          f"p50 latency {pct(rl, 50) / pct(bl, 50):.1f}x")
    accepted = rc.get(202, 0)
    print(f"accepted {accepted}, deliveries stored {stored}, jobs created {jobs - len(warmup)}, "
          f"events lost {accepted - stored}")


if __name__ == "__main__":
    main()
