"""Load test of `attnkit serve` on loopback: a real server process, concurrent clients.

    python benchmarks/serve_load.py multi30k-en-de
    python benchmarks/serve_load.py multi30k-en-de --requests 200 --clients 8

1. Latency of one request at a time (the server's own ``server_ms`` and the client's
   round trip) for a 20-word sentence with beam 5 and every attention map returned,
   against a baseline in the same run: the same request with beam 1.
2. ``--requests`` requests from ``--clients`` concurrent clients, alternating translate
   (Multi30k dev sentences, beam 5, n-best 3, every map) and explain: p50 / p95 latency,
   errors, throughput and the server's resident memory: a warm-up round, then a measured
   round whose memory is compared with the warm-up's end.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

SENTENCE_20 = "A young man in a blue shirt is playing the guitar while two little girls dance on the busy street."


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url: str, body: dict) -> tuple[int, dict, float]:
    data = json.dumps(body).encode()
    start = time.perf_counter()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as r:
            status, answer = r.status, json.loads(r.read())
    except urllib.error.HTTPError as err:
        status, answer = err.code, json.loads(err.read() or b"{}")
    return status, answer, time.perf_counter() - start


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(q * (len(values) - 1)))]


def dev_sentences(n: int) -> list[str]:
    """The first ``n`` English sentences of Multi30k's val set (the studio is not tuned on them)."""
    from attnkit.data import multi30k, read_lines

    root = os.environ.get("ATTNKIT_MULTI30K")
    return read_lines(multi30k.locate("val", "en", root=root, variant="raw"))[:n]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="model to serve (an installed name or a model directory)")
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--single", type=int, default=20, help="one-at-a-time requests per setting")
    args = ap.parse_args()

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "attnkit", "serve", args.model, "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        if "attnkit studio:" not in line:
            raise SystemExit(f"server did not start: {line}{proc.stdout.read()}")
        name = json.loads(urllib.request.urlopen(url + "/api/models").read())["models"][0]["name"]
        print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; model {name}")

        # 1. one request at a time: 20 words, beam 5 (and beam 1 as the baseline), every map
        words = len(SENTENCE_20.split())
        for beam in (5, 1):
            server, client = [], []
            for i in range(args.single + 2):
                status, answer, seconds = post(
                    url + "/api/translate", {"model": name, "text": SENTENCE_20, "beam": beam}
                )
                assert status == 200, answer
                if i >= 2:  # two warm-up requests
                    server.append(answer["server_ms"])
                    client.append(1000 * seconds)
            kinds = ", ".join(answer["example"]["maps"])
            print(
                f"{words}-word sentence, beam {beam}, maps ({kinds}): server median {statistics.median(server):.0f} ms "
                f"(p95 {percentile(server, 0.95):.0f}), round trip median {statistics.median(client):.0f} ms"
            )
        print(f"  -> {answer['example']['output']}")

        # 2. concurrent clients
        sentences = dev_sentences(args.requests)
        warm = rss_mib(proc.pid)

        def one(i: int) -> tuple[int, float, str]:
            text = sentences[i % len(sentences)]
            if i % 2 == 0:
                status, _answer, seconds = post(
                    url + "/api/translate", {"model": name, "text": text, "beam": 5, "nbest": 3}
                )
                return status, seconds, "translate"
            status, _answer, seconds = post(
                url + "/api/explain", {"model": name, "text": text, "kind": "cross", "layer": -1, "head": 0, "query": 1}
            )
            return status, seconds, "explain"

        # round 1 warms the allocator and the caches; memory is compared from its end to round 2's end
        for label in ("warm-up round", "measured round"):
            start = time.perf_counter()
            with ThreadPoolExecutor(args.clients) as pool:
                results = list(pool.map(one, range(args.requests)))
            wall = time.perf_counter() - start
            now = rss_mib(proc.pid)
            errors = sum(status != 200 for status, _, _ in results)
            print(
                f"{label}: {args.requests} requests from {args.clients} clients in {wall:.1f} s "
                f"({args.requests / wall:.1f} req/s), {errors} errors; server memory {warm:.0f} -> {now:.0f} MiB "
                f"({100 * (now - warm) / warm:+.1f} %)"
            )
            for kind in ("translate", "explain"):
                lat = [1000 * s for status, s, k in results if k == kind and status == 200]
                print(
                    f"  {kind}: {len(lat)} requests, latency p50 {percentile(lat, 0.5):.0f} ms, "
                    f"p95 {percentile(lat, 0.95):.0f} ms"
                )
            warm = now
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)


if __name__ == "__main__":
    main()
