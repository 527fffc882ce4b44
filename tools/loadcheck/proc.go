package main

// Readings of a process from /proc: CPU time (all threads) and context switches (voluntary and
// involuntary, summed over its threads), and this process's own CPU profile.

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, 100 on every Linux this tool runs on.
const clockTicks = 100.0

// procMark is one reading of a process.
type procMark struct {
	cpuSeconds float64 // utime + stime of every thread
	volCtx     uint64  // voluntary context switches (a thread went to sleep: a wake-up follows)
	involCtx   uint64  // involuntary context switches (preempted)
}

// readProc reads pid's marks; a field it cannot read stays 0.
func readProc(pid int) procMark {
	var m procMark
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		s := string(b)
		// Fields after the command name, which is in parentheses and may hold spaces.
		if i := strings.LastIndexByte(s, ')'); i >= 0 {
			f := strings.Fields(s[i+1:])
			// f[0] is field 3 (state); utime is field 14, stime field 15.
			if len(f) > 12 {
				u, _ := strconv.ParseFloat(f[11], 64)
				st, _ := strconv.ParseFloat(f[12], 64)
				m.cpuSeconds = (u + st) / clockTicks
			}
		}
	}
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			switch k {
			case "voluntary_ctxt_switches":
				m.volCtx += n
			case "nonvoluntary_ctxt_switches":
				m.involCtx += n
			}
		}
	}
	return m
}

// delta is what pid did between two marks.
func (a procMark) delta(b procMark) procMark {
	return procMark{
		cpuSeconds: b.cpuSeconds - a.cpuSeconds,
		volCtx:     b.volCtx - a.volCtx,
		involCtx:   b.involCtx - a.involCtx,
	}
}

// startProfile starts this process's CPU profile into path (nothing when path is empty) and
// returns the function that stops it.
func startProfile(path string) func() {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadcheck: cpuprofile:", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintln(os.Stderr, "loadcheck: cpuprofile:", err)
		f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
