#!/usr/bin/env python3
"""Decode speed through `hearth serve`, against `hearth bench` on the same
model in the same run: what an API client sees (time to first token, tokens
per second as the chunks arrive) and what the engine itself reaches.

Standard library only, so it runs on any machine with Python 3:

    hearth synth --preset llama-3.2-1b --quant Q4_K_M -o /tmp/models/m.gguf
    hearth serve --folder /tmp/models --addr 127.0.0.1:11435 &
    python3 serve_bench.py --url http://127.0.0.1:11435 --model m

The model has random weights, so a greedy reply never ends early by an end
token in practice; each reply is exactly --tokens long (the script checks).
"""

import argparse
import http.client
import json
import statistics
import threading
import time
import urllib.parse


def stream_chat(url, model, tokens, prompt):
    """One streamed /v1/chat/completions request: (ttft s, decode tokens/s,
    content chunks, usage)."""
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    body = json.dumps({
        "model": model, "stream": True, "max_tokens": tokens, "temperature": 0,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": prompt}],
    })
    start = time.perf_counter()
    conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"status {resp.status}: {resp.read()[:300]!r}")
    times, usage = [], None
    for raw in resp:
        line = raw.decode().strip()
        if not line.startswith("data: "):
            continue
        data = line[len("data: "):]
        if data == "[DONE]":
            break
        chunk = json.loads(data)
        if chunk.get("usage"):
            usage = chunk["usage"]
        for choice in chunk.get("choices", []):
            if choice.get("delta", {}).get("content"):
                times.append(time.perf_counter())
    conn.close()
    ttft = times[0] - start
    # Decode rate over the completion tokens after the first, as llama-bench
    # and hearth bench count it; chunks can carry no text (an unfinished
    # UTF-8 character), so the token count comes from usage.
    n = usage["completion_tokens"]
    rate = (n - 1) / (times[-1] - times[0]) if len(times) > 1 else 0.0
    return ttft, rate, len(times), usage


def ollama_generate(url, model, tokens, prompt):
    """One non-streamed /api/generate: the server's own eval counters."""
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    body = json.dumps({"model": model, "prompt": prompt, "stream": False,
                       "options": {"temperature": 0, "num_predict": tokens}})
    conn.request("POST", "/api/generate", body, {"Content-Type": "application/json"})
    r = json.loads(conn.getresponse().read())
    conn.close()
    return r["eval_count"] / (r["eval_duration"] / 1e9), r["prompt_eval_count"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:11435")
    ap.add_argument("--model", required=True)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--concurrent", type=int, default=8)
    a = ap.parse_args()
    prompt = "Write a long story about a lighthouse keeper."

    stream_chat(a.url, a.model, 8, prompt)  # load the model, warm up
    results = []
    for i in range(a.runs):
        # A different prompt each run, so the KV cache's prefix reuse does not
        # flatter the time to first token.
        results.append(stream_chat(a.url, a.model, a.tokens, f"{prompt} Number {i}."))
    for _, _, _, usage in results:
        if usage["completion_tokens"] != a.tokens:
            raise SystemExit(f"a reply ended early: {usage}")
    ttfts = [r[0] * 1000 for r in results]
    rates = [r[1] for r in results]
    ollama = [ollama_generate(a.url, a.model, a.tokens, f"{prompt} Run {i}.")[0] for i in range(a.runs)]

    # Concurrent clients: with hearth serve --parallel N, up to N are
    # decoded together and the rest wait for a slot; with 1, each is served
    # in turn at the single-client rate. None may fail.
    done, errors = [], []

    def client(i):
        try:
            done.append(stream_chat(a.url, a.model, a.tokens, f"{prompt} Client {i}."))
        except Exception as e:  # reported below
            errors.append(repr(e))
    threads = [threading.Thread(target=client, args=(i,)) for i in range(a.concurrent)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    total = sum(r[3]["completion_tokens"] for r in done)

    print(json.dumps({
        "stream_decode_tokens_per_s": {"mean": statistics.mean(rates), "min": min(rates), "max": max(rates)},
        "stream_ttft_ms": {"mean": statistics.mean(ttfts), "min": min(ttfts), "max": max(ttfts)},
        "ollama_generate_eval_tokens_per_s": statistics.mean(ollama),
        "concurrent": {"clients": a.concurrent, "completed": len(done), "errors": errors,
                       "wall_s": wall, "aggregate_tokens_per_s": total / wall},
    }, indent=2))


if __name__ == "__main__":
    main()
