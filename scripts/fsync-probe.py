#!/usr/bin/env python3
"""How long a commit-sized sync takes on this disk: PAGES 4 KiB pages written and then synced
(fsync or fdatasync), 600 times, either appended to a growing file or written over a file that
already has its blocks (written and synced first). Prints p50, p90 and mean in microseconds.

Usage: scripts/fsync-probe.py [DIR=.] [PAGES=1,4]   (a scratch file in DIR, removed after)
"""
import os
import sys
import time


def probe(path, overwrite, pages, sync, n=600):
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        if overwrite:
            os.write(fd, b"\0" * (n * pages * 4096 + 4096))
            os.fsync(fd)
            os.lseek(fd, 0, os.SEEK_SET)
        page = b"x" * (4096 * pages)
        took = []
        for _ in range(n):
            os.write(fd, page)
            start = time.perf_counter()
            sync(fd)
            took.append(time.perf_counter() - start)
    finally:
        os.close(fd)
        os.unlink(path)
    took.sort()
    return [took[len(took) // 2] * 1e6, took[int(len(took) * 0.9)] * 1e6, sum(took) / n * 1e6]


def main():
    directory = sys.argv[1] if len(sys.argv) > 1 else "."
    sizes = [int(p) for p in (sys.argv[2] if len(sys.argv) > 2 else "1,4").split(",")]
    path = os.path.join(directory, f".fsync-probe-{os.getpid()}")
    print(f"{'pages':>5} {'sync':>9} {'file':>9} {'p50_us':>7} {'p90_us':>7} {'mean_us':>7}")
    for pages in sizes:
        for name, sync in (("fsync", os.fsync), ("fdatasync", os.fdatasync)):
            for overwrite in (False, True):
                p50, p90, mean = probe(path, overwrite, pages, sync)
                kind = "overwrite" if overwrite else "append"
                print(f"{pages:>5} {name:>9} {kind:>9} {p50:>7.0f} {p90:>7.0f} {mean:>7.0f}")


if __name__ == "__main__":
    main()
