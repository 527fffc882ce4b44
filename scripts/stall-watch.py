#!/usr/bin/env python3
"""Runs a `herald bench fanout --spawn ... --out DIR` command and watches what happens around it,
to tell Herald's own stalls from the machine's (issue 14 §6; docs/benchmarks.md, "Session 10").

    scripts/stall-watch.py DIR -- herald bench fanout --spawn --publishers 16 \
        --messages 300000 --subscribers 100 --out DIR

Every 100 ms it samples the machine's run queue (/proc/stat) and the spawned server's CPU per
thread group (/proc/PID/task/*/stat); every 500 ms the server's checkpoint histogram and WAL size
(/metrics), with the server's own publish-to-write lag histogram (`herald_delivery_lag_seconds`,
folded by the exporter once a second, so it lags by up to a second). An fsync probe appends 64 bytes and fdatasyncs them every 20 ms in DIR (put DIR on
the disk the server writes to). When the bench exits it joins everything per second of
DIR/fanout.csv, prints the table and the correlation of each column with that second's p99, and
writes DIR/stall-watch.csv. Linux only; reads /proc, nothing else."""
import csv, math, os, re, subprocess, sys, threading, time, urllib.request

GROUPS = {"tokio-rt-worker": "workers", "herald-fanout": "fanout", "herald-store-wr": "writer",
          "herald-store-ch": "checkpointer"}


def proc_stat():
    with open("/proc/stat") as f:
        lines = f.read().splitlines()
    return next(int(l.split()[1]) for l in lines if l.startswith("procs_running"))


def server_of(parent):
    """The `herald serve` process the bench started."""
    for p in filter(str.isdigit, os.listdir("/proc")):
        try:
            ppid = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[1]
            cmd = open(f"/proc/{p}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if ppid == str(parent) and b"serve" in cmd[1:2]:
            return int(p)
    return None


def listening_port(pid):
    try:
        inodes = {os.readlink(f"/proc/{pid}/fd/{fd}")[8:-1] for fd in os.listdir(f"/proc/{pid}/fd")}
    except OSError:
        return None
    for line in open("/proc/net/tcp").read().splitlines()[1:]:
        f = line.split()
        if f[3] == "0A" and f[9] in inodes:
            return int(f[1].split(":")[1], 16)
    return None


def sample(bench, rows, stop):
    tick_ms = 1000 / os.sysconf("SC_CLK_TCK")
    pid = port = None
    last = {}
    checkpoints = (None, None, [])
    n = 0
    while not stop.is_set():
        time.sleep(0.1)
        n += 1
        cpu = dict.fromkeys(list(GROUPS.values()) + ["other"], 0.0)
        pid = pid or server_of(bench)
        if pid:
            try:
                for tid in os.listdir(f"/proc/{pid}/task"):
                    s = open(f"/proc/{pid}/task/{tid}/stat").read()
                    comm, rest = s[s.index("(") + 1:s.rindex(")")], s[s.rindex(")") + 2:].split()
                    ticks = int(rest[11]) + int(rest[12])
                    cpu[GROUPS.get(comm[:15], "other")] += (ticks - last.get(tid, ticks)) * tick_ms
                    last[tid] = ticks
            except OSError:
                pass
            port = port or listening_port(pid)
            if port and n % 5 == 0:
                try:
                    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=0.3).read().decode()
                    def total(mode):
                        m = re.search(rf'^herald_store_checkpoint_seconds_sum\{{mode="{mode}"\}} (\S+)', body, re.M)
                        return float(m[1]) if m else 0.0
                    lag = [(float(le), float(n)) for le, n in re.findall(
                        r'^herald_delivery_lag_seconds_bucket\{le="([0-9.e+-]+)"\} (\S+)', body, re.M)]
                    checkpoints = (total("PASSIVE"), total("RESTART"), lag)
                except Exception:
                    pass
        rows.append((time.time(), proc_stat(), cpu, checkpoints))


def fsync_probe(path, rows, stop):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    while not stop.is_set():
        t = time.perf_counter()
        os.write(fd, b"x" * 64)
        os.fdatasync(fd)
        rows.append((time.time(), (time.perf_counter() - t) * 1000))
        time.sleep(0.02)
    os.close(fd)
    os.unlink(path)


def bucket_p99(before, after):
    """The upper bound (ms) of the histogram bucket holding the 99th percentile of what was
    recorded between two scrapes of cumulative buckets; NaN if nothing was."""
    if not before or not after or len(before) != len(after):
        return float("nan")
    total = after[-1][1] - before[-1][1] if after[-1][1] >= before[-1][1] else 0
    if total <= 0:
        return float("nan")
    for (le, n1), (_, n0) in zip(after, before):
        if n1 - n0 >= 0.99 * total:
            return le * 1000
    return float("inf")


def corr(a, b):
    pts = [(x, y) for x, y in zip(a, b) if x == x and y == y]
    if len(pts) < 3:
        return float("nan")
    mx, my = (sum(p[i] for p in pts) / len(pts) for i in (0, 1))
    sx = math.sqrt(sum((p[0] - mx) ** 2 for p in pts))
    sy = math.sqrt(sum((p[1] - my) ** 2 for p in pts))
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / (sx * sy) if sx and sy else float("nan")


def main():
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        sys.exit(__doc__)
    out, command = sys.argv[1], sys.argv[3:]
    os.makedirs(out, exist_ok=True)
    log = open(os.path.join(out, "bench.log"), "w")
    bench = subprocess.Popen(command, stdout=log, stderr=subprocess.PIPE, text=True)
    samples, fsyncs, stop = [], [], threading.Event()
    threads = [threading.Thread(target=sample, args=(bench.pid, samples, stop)),
               threading.Thread(target=fsync_probe, args=(os.path.join(out, "fsync-probe.dat"), fsyncs, stop))]
    for t in threads:
        t.start()
    t0 = None
    for line in bench.stderr:
        log.write(line)
        if t0 is None and "publishing" in line:
            t0 = time.time()
    bench.wait()
    stop.set()
    for t in threads:
        t.join()
    if t0 is None:
        sys.exit(f"the bench never started publishing (exit {bench.returncode}); see {out}/bench.log")
    table = []
    prev = None
    for r in csv.DictReader(open(os.path.join(out, "fanout.csv"))):
        s = int(r["second"])
        lo, hi = t0 + s - 1, t0 + s
        inside = [x for x in samples if lo <= x[0] < hi]
        runq = sum(x[1] for x in inside) / len(inside) if inside else float("nan")
        cpu = sum(sum(x[2].values()) for x in inside)
        ck = inside[-1][3] if inside else (None, None, [])
        passive = restart = 0.0
        lag_p99 = float("nan")
        if prev and ck[0] is not None and prev[0] is not None:
            passive, restart = (ck[0] - prev[0]) * 1000, (ck[1] - prev[1]) * 1000
            lag_p99 = bucket_p99(prev[2], ck[2])
        prev = ck if ck[0] is not None else prev
        worst = max((f[1] for f in fsyncs if lo <= f[0] < hi), default=float("nan"))
        table.append((s, float(r["p99_ms"]), int(r["published"]), runq, cpu, passive, restart, worst, lag_p99))
    names = ["second", "p99_ms", "published", "run_queue", "server_cpu_ms", "passive_checkpoint_ms",
             "restart_checkpoint_ms", "fsync_probe_max_ms", "server_write_lag_p99_ms"]
    with open(os.path.join(out, "stall-watch.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(names)
        w.writerows([[f"{v:.1f}" if isinstance(v, float) else v for v in row] for row in table])
    print(" ".join(names))
    for row in table:
        print(" ".join(f"{v:.1f}" if isinstance(v, float) else str(v) for v in row))
    p99 = [row[1] for row in table]
    for i in range(3, len(names)):
        print(f"correlation of p99 with {names[i]}: {corr(p99, [row[i] for row in table]):+.2f}")


if __name__ == "__main__":
    main()
