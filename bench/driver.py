#!/usr/bin/env python3
"""Drives the batch benchmark; bench/run.sh builds the binaries, starts the fake server and calls
this. Measures each client process with os.wait4 (user + sys CPU, peak RSS of that process alone)
and checks the server's request counts, failing loudly when they are not what the workload implies.

Speed is measured here, never asserted: the only failures are wrong counts or failed delegations.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time
import urllib.request

# Every delegation takes exactly two attempts: the verifier requires `id`, which only the fake
# server's answer to a retry has.
VERIFIER = """\
def run(result):
    doc = json.decode(result["response"], default = None)
    if type(doc) != "dict" or "id" not in doc:
        return {"verified": False, "reason": "the response has no `id`"}
    return True
"""


def die(message):
    print(f"\nBENCHMARK FAILED: {message}", file=sys.stderr)
    sys.exit(1)


def stats(url):
    with urllib.request.urlopen(f"{url}/stats", timeout=10) as response:
        return json.load(response)


def delta(before, after):
    out = {}
    for key, value in after.items():
        if isinstance(value, (int, float)):
            out[key] = value - before.get(key, 0)
        elif isinstance(value, dict):
            old = before.get(key, {})
            out[key] = {k: v - old.get(k, 0) for k, v in value.items() if v - old.get(k, 0)}
    return out


def write_batch(path, count, url, hooks, workdir):
    with open(path, "w", encoding="utf-8") as f:
        for i in range(count):
            entry = {
                "task": f"Describe widget {i} as a JSON object with a string `name` and an integer `id`.",
                "delegate": {
                    "kind": "openai",
                    "model": "bench-model",
                    "base_url": f"{url}/v1",
                    # Never set: no Authorization header, and no real key can leak to the fake.
                    "api_key_env": "HARNESS_BENCH_UNSET_KEY",
                    "max_retries": 0,
                },
                "verify": VERIFIER,
                "max_verify_retries": 1,
                "hooks": [hooks],
                "workdir": workdir,
            }
            f.write(json.dumps(entry) + "\n")


def measure(argv, stdout_path, stderr_path):
    """Runs argv; returns wall seconds, CPU seconds (user + sys), peak RSS KiB and exit code."""
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        started = time.perf_counter()
        process = subprocess.Popen(argv, stdout=out, stderr=err)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    return {
        "wall_s": wall,
        "user_s": usage.ru_utime,
        "sys_s": usage.ru_stime,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_rss_kib": usage.ru_maxrss,
        "exit": process.returncode,
    }


def batch_rate(stderr_path):
    """The rate harness itself reports in its summary line (dispatch to last outcome)."""
    with open(stderr_path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    found = re.findall(r"in ([0-9.]+)s \(([0-9.]+)/s\)", text)
    return (float(found[-1][0]), float(found[-1][1])) if found else (None, None)


def tail(path, lines=15):
    with open(path, encoding="utf-8", errors="replace") as f:
        return "".join(f.readlines()[-lines:])


def run_harness(args, label, batch_file, count, concurrency, otlp, journal, repeat):
    argv = [args.harness]
    if otlp:
        argv += ["--otlp-endpoint", args.url]
    argv += ["batch", batch_file, "--concurrency", str(concurrency), "--json"]
    if journal:
        argv += ["--journal", os.path.join(args.work, f"runs-{label}-{repeat}.db")]
    before = stats(args.url)
    err = os.path.join(args.work, f"{label}-{repeat}.stderr")
    result = measure(argv, os.devnull, err)
    after = stats(args.url)
    d = delta(before, after)
    if result["exit"] != 0:
        die(f"{label}: harness exited {result['exit']} (expected 0: every delegation passes on "
            f"its second attempt)\n{' '.join(argv)}\n--- stderr tail ---\n{tail(err)}")
    expected = 2 * count
    if d["requests"] != expected or d["first_attempts"] != count or d["retries"] != count:
        die(f"{label}: the server counted {d['requests']} requests ({d['first_attempts']} first "
            f"attempts, {d['retries']} retries); expected {expected} ({count} + {count})")
    if otlp:
        # The exporter flushes at exit, so everything has arrived once the process is gone.
        if d["otlp_traces"] == 0:
            die(f"{label}: telemetry was on but the sink received no trace exports")
    result["batch_s"], result["batch_rate"] = batch_rate(err)
    result.update(label=label, kind="harness", delegations=count, concurrency=concurrency,
                  otlp=otlp, journal=journal, server=d, argv=argv)
    return result


def run_bare(args, count, concurrency, repeat):
    argv = [args.bare, args.url, "--delegations", str(count), "--concurrency", str(concurrency)]
    before = stats(args.url)
    out = os.path.join(args.work, f"bare-{repeat}.stdout")
    err = os.path.join(args.work, f"bare-{repeat}.stderr")
    result = measure(argv, out, err)
    d = delta(before, stats(args.url))
    if result["exit"] != 0:
        die(f"bare-reqwest exited {result['exit']}\n--- stderr tail ---\n{tail(err)}")
    if d["requests"] != 2 * count:
        die(f"bare-reqwest: the server counted {d['requests']} requests; expected {2 * count}")
    with open(out, encoding="utf-8") as f:
        own = json.loads(f.read().strip().splitlines()[-1])
    result["batch_s"], result["batch_rate"] = own["wall_s"], own["delegations_per_s"]
    result.update(label="bare-reqwest", kind="bare", delegations=count, concurrency=concurrency,
                  otlp=False, journal=False, server=d, argv=argv, own=own)
    return result


def median(values):
    values = sorted(values)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def summarise(runs):
    label = runs[0]["label"]
    n = runs[0]["delegations"]
    return {
        "label": label,
        "runs": len(runs),
        "delegations": n,
        "concurrency": runs[0]["concurrency"],
        "rate": median([n / r["wall_s"] for r in runs]),
        "batch_rate": median([r["batch_rate"] for r in runs if r["batch_rate"]] or [0]),
        "cpu_us": median([r["cpu_s"] * 1e6 / n for r in runs]),
        "cpu_us_min": min(r["cpu_s"] * 1e6 / n for r in runs),
        "cpu_us_max": max(r["cpu_s"] * 1e6 / n for r in runs),
        "user_us": median([r["user_s"] * 1e6 / n for r in runs]),
        "sys_us": median([r["sys_s"] * 1e6 / n for r in runs]),
        "rss_mb": max(r["peak_rss_kib"] for r in runs) / 1024,
        "requests": runs[-1]["server"]["requests"],
        "spans": runs[-1]["server"].get("spans", 0),
        "otlp_posts": runs[-1]["server"].get("otlp_traces", 0)
        + runs[-1]["server"].get("otlp_metrics", 0),
        "argv": runs[-1]["argv"],
        "server": runs[-1]["server"],
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True, help="the fake server's base URL")
    parser.add_argument("--harness", required=True)
    parser.add_argument("--bare", required=True)
    parser.add_argument("--hooks", required=True, help="the hook directory")
    parser.add_argument("--work", required=True, help="a scratch directory")
    parser.add_argument("--delegations", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--large", action="store_true",
                        help="also 10,000 delegations at concurrency 1,000")
    parser.add_argument("--journal", action="store_true",
                        help="pass --journal to harness batch (when it has the flag)")
    parser.add_argument("--results", help="write every run as JSON to this file")
    args = parser.parse_args()

    workdir = os.path.join(args.work, "workspace")
    os.makedirs(workdir, exist_ok=True)
    n, c = args.delegations, args.concurrency
    batch_file = os.path.join(args.work, "batch.jsonl")
    write_batch(batch_file, n, args.url, args.hooks, workdir)

    # One warm-up run so the page cache, the server's connection handling and the samples the
    # baseline replays are in place; it is checked but not reported.
    print(f"warm-up: {n} delegations ...", file=sys.stderr)
    run_harness(args, "warmup", batch_file, n, c, False, args.journal, 0)

    plans = [
        ("harness (telemetry off)", False),
        ("harness (OTLP export on)", True),
    ]
    results = {label: [] for label, _ in plans}
    results["bare-reqwest"] = []
    for repeat in range(1, args.repeat + 1):
        for label, otlp in plans:
            print(f"run {repeat}/{args.repeat}: {label} ...", file=sys.stderr)
            slug = "otlp" if otlp else "plain"
            r = run_harness(args, slug, batch_file, n, c, otlp, args.journal, repeat)
            r["label"] = label
            results[label].append(r)
        print(f"run {repeat}/{args.repeat}: bare-reqwest ...", file=sys.stderr)
        results["bare-reqwest"].append(run_bare(args, n, c, repeat))

    if args.large:
        big_n, big_c = 10_000, 1_000
        big_file = os.path.join(args.work, "batch-large.jsonl")
        write_batch(big_file, big_n, args.url, args.hooks, workdir)
        label = f"harness {big_n:,} @ concurrency {big_c:,} (telemetry off)"
        print(f"large: {label} ...", file=sys.stderr)
        r = run_harness(args, "large", big_file, big_n, big_c, False, args.journal, 1)
        r["label"] = label
        results[label] = [r]
        print("large: bare-reqwest ...", file=sys.stderr)
        b = run_bare(args, big_n, big_c, "large")
        b["label"] = f"bare-reqwest {big_n:,} @ concurrency {big_c:,}"
        results[b["label"]] = [b]

    if args.results:
        with open(args.results, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)

    rows = [summarise(runs) for runs in results.values()]
    print()
    print(f"{'workload':<48} {'deleg/s':>8} {'CPU µs/deleg':>13} {'(user+sys)':>15} "
          f"{'peak RSS MB':>11} {'requests':>8}")
    for row in rows:
        print(f"{row['label'] + ' ×' + str(row['delegations']):<48} {row['rate']:>8.0f} "
              f"{row['cpu_us']:>13.1f} {row['user_us']:>7.1f}+{row['sys_us']:<7.1f} "
              f"{row['rss_mb']:>11.1f} {row['requests']:>8}")
    print(f"\nmedian of {args.repeat} runs (CPU range shown below); deleg/s = delegations / wall "
          "time of the whole process, start-up and exit flush included")
    for row in rows:
        print(f"  {row['label']}: CPU µs/deleg min {row['cpu_us_min']:.1f} max "
              f"{row['cpu_us_max']:.1f}; in-batch rate {row['batch_rate']:.0f}/s")
    otlp = next((r for r in rows if "OTLP" in r["label"]), None)
    if otlp:
        s = otlp["server"]
        print(f"  OTLP sink (last run): {s.get('otlp_traces', 0)} trace posts with "
              f"{s.get('spans', 0)} spans, {s.get('otlp_metrics', 0)} metric posts with "
              f"{s.get('metric_points', 0)} points, {s.get('otlp_bytes', 0) / 1e6:.1f} MB; "
              f"undecodable {s.get('otlp_undecodable', 0)}")
        print(f"  spans by name: {json.dumps(s.get('span_names', {}))}")
    print(f"  journal: {'on' if args.journal else 'off (harness batch has no --journal flag)'}")

    floor = next(r for r in rows if r["label"] == "bare-reqwest")
    print("\ngoals (issue 6):")
    for row in rows:
        if row["label"].startswith("harness") and row["delegations"] == n:
            print(f"  {row['label']}: CPU {row['cpu_us']:.0f} µs/deleg (goal ≤ 150) "
                  f"{'met' if row['cpu_us'] <= 150 else 'MISSED'}; peak RSS {row['rss_mb']:.1f} MB "
                  f"(goal ≤ 25) {'met' if row['rss_mb'] <= 25 else 'MISSED'}; "
                  f"{row['cpu_us'] / floor['cpu_us']:.1f}× the floor's CPU and "
                  f"{floor['rate'] / row['rate']:.1f}× its wall time (goal ≤ 3×)")
    print(f"  floor (bare-reqwest): {floor['cpu_us']:.0f} µs/deleg, {floor['rate']:.0f} deleg/s, "
          f"{floor['rss_mb']:.1f} MB")


if __name__ == "__main__":
    main()
