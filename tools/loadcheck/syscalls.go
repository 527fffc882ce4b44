package main

// Counting the server's system calls while it works, with `perf stat` on the kernel's syscall
// tracepoints (-syscalls; needs perf and the permission to trace the server). /proc/PID/io is no
// help here: it counts write() and writev() but not send() and sendto(), which Rust's sockets use.

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// syscallEvents are the calls that say how a server reads, writes and sleeps.
var syscallEvents = []string{
	"write", "writev", "sendto", "sendmsg", "read", "readv", "recvfrom", "recvmsg",
	"epoll_wait", "epoll_pwait", "futex",
}

// syscallCounter is a `perf stat` attached to a pid.
type syscallCounter struct {
	cmd *exec.Cmd
	out string
}

func startSyscallCounter(pid int) (*syscallCounter, error) {
	f, err := os.CreateTemp("", "loadcheck-perf-")
	if err != nil {
		return nil, err
	}
	f.Close()
	var ev []string
	for _, e := range syscallEvents {
		ev = append(ev, "syscalls:sys_enter_"+e)
	}
	cmd := exec.Command("perf", "stat", "-x,", "-o", f.Name(), "-e", strings.Join(ev, ","), "-p", fmt.Sprint(pid))
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	// perf attaches in a few milliseconds; counting from a little late loses nothing that matters.
	time.Sleep(300 * time.Millisecond)
	return &syscallCounter{cmd: cmd, out: f.Name()}, nil
}

// stop ends the count and returns calls by name.
func (c *syscallCounter) stop() map[string]uint64 {
	_ = c.cmd.Process.Signal(syscall.SIGINT)
	_ = c.cmd.Wait()
	defer os.Remove(c.out)
	counts := map[string]uint64{}
	f, err := os.Open(c.out)
	if err != nil {
		return counts
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ",")
		if len(fields) < 3 {
			continue
		}
		n, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil {
			continue
		}
		counts[strings.TrimPrefix(fields[2], "syscalls:sys_enter_")] = n
	}
	return counts
}

// perUnit divides each count by units and adds the sums of writes and reads.
func perUnit(counts map[string]uint64, units int) map[string]float64 {
	out := map[string]float64{}
	var writes, reads uint64
	for k, v := range counts {
		out[k] = round(float64(v)/float64(max(units, 1)), 4)
		switch k {
		case "write", "writev", "sendto", "sendmsg":
			writes += v
		case "read", "readv", "recvfrom", "recvmsg":
			reads += v
		}
	}
	out["all_writes"] = round(float64(writes)/float64(max(units, 1)), 4)
	out["all_reads"] = round(float64(reads)/float64(max(units, 1)), 4)
	return out
}
