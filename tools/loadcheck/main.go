// Command loadcheck is an independent load client for Herald and NATS: one Go process holds every
// connection (a goroutine per connection), and it measures a burst to one channel's subscribers
// and a subscribe storm to new channels, reading the server's CPU time, write syscalls and
// context switches from /proc. It cross-checks `herald bench` with a client that is not
// Herald's; see README.md.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

type options struct {
	server           string
	bin              string
	addr             string
	pid              int
	apiKey           string
	scenario         string
	subscribers      int
	messages         int
	publishers       int
	clients          int
	channels         int
	wait             bool
	batch            int
	sources          int
	timeout          time.Duration
	dialers          int
	syscalls         bool
	role             string
	publisherProcess bool
	cpuProfile       string
}

func main() {
	var o options
	flag.StringVar(&o.server, "server", "herald", "herald or nats")
	flag.StringVar(&o.bin, "bin", "", "server binary to start on a free loopback port (herald: its path; nats: default nats-server)")
	flag.StringVar(&o.addr, "addr", "", "measure a server already running at host:port instead (with -pid, and -api-key for Herald)")
	flag.IntVar(&o.pid, "pid", 0, "the running server's pid (with -addr)")
	flag.StringVar(&o.apiKey, "api-key", os.Getenv("HERALD_API_KEY"), "Herald's publisher or admin key (with -addr)")
	flag.StringVar(&o.scenario, "scenario", "burst", "burst or storm")
	flag.IntVar(&o.subscribers, "subscribers", 10000, "burst: subscribers of the one channel")
	flag.IntVar(&o.messages, "messages", 1000, "burst: messages published as fast as possible")
	flag.IntVar(&o.publishers, "publishers", 4, "burst: publishers (Herald: HTTP, one request at a time each)")
	flag.IntVar(&o.clients, "clients", 100, "storm: connections")
	flag.IntVar(&o.channels, "channels", 1000, "storm: new channels each connection subscribes to")
	flag.BoolVar(&o.wait, "wait", false, "storm: each subscribe waits for its acknowledgement (default: pipelined)")
	flag.IntVar(&o.batch, "batch", 1, "storm, Herald, pipelined: subscribe commands per WebSocket message (more than 1: a JSON array of commands, a batch)")
	flag.IntVar(&o.sources, "sources", 1, "spread connections over 127.0.0.1 .. 127.0.0.N")
	flag.DurationVar(&o.timeout, "timeout", 120*time.Second, "longest wait for deliveries or acknowledgements")
	flag.IntVar(&o.dialers, "dialers", 64, "connections opened at once")
	flag.BoolVar(&o.syscalls, "syscalls", false, "count the server's system calls with `perf stat` while it works (adds perf's own cost)")
	flag.BoolVar(&o.publisherProcess, "publisher-process", false, "burst: publish from a child process of this tool (as an app backend would), not from the process that holds the subscribers")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "storm: write this tool's own CPU profile of the measured span (from the first subscribe to the last acknowledgement) to this file, for `go tool pprof`")
	flag.StringVar(&o.role, "role", "", "internal: `publish` runs only the publishers (the child of -publisher-process)")
	flag.Parse()
	if o.role == "publish" {
		publishRole(&o)
		return
	}

	s, err := start(&o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadcheck:", err)
		os.Exit(1)
	}
	defer s.stop()
	var result map[string]any
	switch o.scenario {
	case "burst":
		result, err = burst(&o, s)
	case "storm":
		result, err = storm(&o, s)
	default:
		err = fmt.Errorf("unknown scenario %q (burst or storm)", o.scenario)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadcheck:", err)
		s.stop()
		os.Exit(1)
	}
	result["server"] = s.kind
	result["scenario"] = o.scenario
	result["time"] = time.Now().UTC().Format(time.RFC3339)
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		result["loadavg"] = string(bytes.TrimSpace(b))
	}
	j, _ := json.Marshal(result)
	fmt.Println(string(j))
}

func start(o *options) (*server, error) {
	if o.addr != "" {
		if o.pid == 0 {
			return nil, fmt.Errorf("-addr needs -pid (the server's CPU is read from /proc)")
		}
		return &server{kind: o.server, addr: o.addr, pid: o.pid, apiKey: o.apiKey}, nil
	}
	switch o.server {
	case "herald":
		if o.bin == "" {
			return nil, fmt.Errorf("-server herald needs -bin PATH (or -addr and -pid)")
		}
		return startHerald(o.bin)
	case "nats":
		if o.bin == "" {
			o.bin = "nats-server"
		}
		return startNATS(o.bin)
	}
	return nil, fmt.Errorf("unknown server %q (herald or nats)", o.server)
}

// source is the local address of connection i.
func source(o *options, i int) net.IP {
	return net.IPv4(127, 0, 0, byte(1+i%max(o.sources, 1)))
}

// stampOf reads the send time from a frame's last `"ts":N`.
func stampOf(frame []byte) (int64, bool) {
	i := bytes.LastIndex(frame, []byte(`"ts":`))
	if i < 0 {
		return 0, false
	}
	j := i + 5
	k := j
	for k < len(frame) && frame[k] >= '0' && frame[k] <= '9' {
		k++
	}
	n, err := strconv.ParseInt(string(frame[j:k]), 10, 64)
	return n, err == nil
}

// openAll opens n connections with at most o.dialers at once.
func openAll[T any](o *options, n int, open func(i int) (T, error)) ([]T, error) {
	out := make([]T, n)
	errs := make([]error, n)
	sem := make(chan struct{}, o.dialers)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			out[i], errs[i] = open(i)
		}(i)
	}
	wg.Wait()
	for i, e := range errs {
		if e != nil {
			return nil, fmt.Errorf("connection %d: %w", i, e)
		}
	}
	return out, nil
}

type subscriber struct {
	next  func() ([]byte, error)
	close func()
}

// burst: o.subscribers subscribe to one channel; o.publishers publish o.messages as fast as
// they can; every subscriber reads until it has them all.
func burst(o *options, s *server) (map[string]any, error) {
	deadline := time.Now().Add(o.timeout + 10*time.Minute)
	n := o.subscribers
	hists := make([]histogram, n)
	lasts := make([]int64, n)
	counts := make([]int, n)
	sizes := make([]int, n)
	var readers sync.WaitGroup
	var disconnected atomic.Int64
	var ends endings
	// Each subscriber reads from the moment it is subscribed, as a real client does: one that
	// waited for all 10,000 to open would leave the server's keep-alive pings unanswered (the
	// server closes a WebSocket that sends nothing between two pings, code 4002).
	read := func(i int, next func() ([]byte, error)) {
		defer readers.Done()
		h := &hists[i]
		var last []byte
		for counts[i] < o.messages {
			f, err := next()
			if err != nil {
				disconnected.Add(1)
				ends.note(err, last)
				return
			}
			now := time.Now().UnixNano()
			ts, ok := stampOf(f)
			if !ok {
				last = append(last[:0], f...)
				continue
			}
			counts[i]++
			sizes[i] += len(f)
			lasts[i] = now
			if now > ts {
				h.record(uint64(now-ts) / 1000)
			} else {
				h.record(0)
			}
		}
	}
	subs, err := openAll(o, n, func(i int) (subscriber, error) {
		var next func() ([]byte, error)
		var cl func()
		var err error
		if s.kind == "nats" {
			next, cl, err = natsSubscriber(s.addr, source(o, i), "burst", deadline)
		} else {
			next, cl, err = heraldSubscriber(s.addr, source(o, i), "burst")
		}
		if err == nil {
			readers.Add(1)
			go read(i, next)
		}
		return subscriber{next, cl}, err
	})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "loadcheck: %d subscribers of one channel; publishing %d messages\n", len(subs), o.messages)

	time.Sleep(200 * time.Millisecond)
	counter := maybeCount(o, s)
	cpu0 := readProc(s.pid)
	self0 := readProc(os.Getpid())
	t0 := time.Now()
	var refused int64
	var pubHist histogram
	if o.publisherProcess {
		refused, pubHist, err = publishInChild(o, s)
	} else {
		refused, pubHist, err = publishAll(o, s)
	}
	if err != nil {
		return nil, err
	}
	published := time.Since(t0)
	done := make(chan struct{})
	go func() { readers.Wait(); close(done) }()
	timedOut := false
	select {
	case <-done:
	case <-time.After(o.timeout):
		timedOut = true
	}
	cpu1 := readProc(s.pid)
	self1 := readProc(os.Getpid())
	calls := stopCount(counter)
	for _, sub := range subs {
		sub.close()
	}

	var h histogram
	var delivered, frameBytes int
	var last int64
	for i := range subs {
		h.merge(&hists[i])
		delivered += counts[i]
		frameBytes += sizes[i]
		if lasts[i] > last {
			last = lasts[i]
		}
	}
	span := time.Duration(last - t0.UnixNano())
	d := cpu0.delta(cpu1)
	per := func(x float64) float64 { return x / float64(max(delivered, 1)) }
	return map[string]any{
		"subscribers":                  len(subs),
		"publishers":                   o.publishers,
		"published":                    o.messages - int(refused),
		"refused":                      refused,
		"delivered":                    delivered,
		"expected":                     len(subs) * o.messages,
		"timed_out":                    timedOut,
		"disconnected":                 disconnected.Load(),
		"disconnect_samples":           ends.samples(),
		"seconds":                      round(span.Seconds(), 3),
		"publish_p50_ms":               pubHist.percentileMs(0.5),
		"publish_p99_ms":               pubHist.percentileMs(0.99),
		"publish_seconds":              round(published.Seconds(), 3),
		"deliveries_per_sec":           round(float64(delivered)/span.Seconds(), 0),
		"p50_ms":                       h.percentileMs(0.50),
		"p99_ms":                       h.percentileMs(0.99),
		"max_ms":                       float64(h.Max) / 1000,
		"server_cpu_s":                 round(d.cpuSeconds, 2),
		"server_cpu_us_per_delivery":   round(per(d.cpuSeconds*1e6), 3),
		"frame_bytes":                  round(per(float64(frameBytes)), 1),
		"server_syscalls_per_delivery": perUnit(calls, delivered),
		"server_sleeps_per_delivery":   round(per(float64(d.volCtx)), 4),
		"server_preempts_per_delivery": round(per(float64(d.involCtx)), 4),
		"client_cpu_us_per_delivery":   round(per(self0.delta(self1).cpuSeconds*1e6), 3),
	}, nil
}

// storm: o.clients connections each subscribe to o.channels channels nobody used before.
func storm(o *options, s *server) (map[string]any, error) {
	prefix := fmt.Sprintf("storm%d", time.Now().UnixNano()%1_000_000)
	var run func(i int) (int, error)
	var closers []func()
	if s.kind == "nats" {
		conns, err := openAll(o, o.clients, func(i int) (*nats.Conn, error) { return dialNATS(s.addr, source(o, i)) })
		if err != nil {
			return nil, err
		}
		for _, c := range conns {
			closers = append(closers, c.Close)
		}
		run = func(i int) (int, error) {
			return natsStormClient(conns[i], fmt.Sprintf("%s.%d", prefix, i), o.channels, o.wait)
		}
	} else {
		conns, err := openAll(o, o.clients, func(i int) (*heraldConn, error) { return dialHerald(s.addr, source(o, i)) })
		if err != nil {
			return nil, err
		}
		for _, c := range conns {
			closers = append(closers, func() { c.ws.Close() })
		}
		run = func(i int) (int, error) {
			return heraldStormClient(conns[i], fmt.Sprintf("%s/%d", prefix, i), o.channels, o.wait, o.batch)
		}
	}
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	time.Sleep(200 * time.Millisecond)
	counter := maybeCount(o, s)
	cpu0 := readProc(s.pid)
	self0 := readProc(os.Getpid())
	stopProfile := startProfile(o.cpuProfile)
	t0 := time.Now()
	var refused, failed atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < o.clients; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r, err := run(i)
			refused.Add(int64(r))
			if err != nil {
				failed.Add(1)
				fmt.Fprintln(os.Stderr, "loadcheck: storm client:", err)
			}
		}(i)
	}
	wg.Wait()
	span := time.Since(t0)
	stopProfile()
	cpu1 := readProc(s.pid)
	self1 := readProc(os.Getpid())
	calls := stopCount(counter)
	n := o.clients * o.channels
	d := cpu0.delta(cpu1)
	per := func(x float64) float64 { return x / float64(n) }
	return map[string]any{
		"clients":                          o.clients,
		"channels_each":                    o.channels,
		"pipelined":                        !o.wait,
		"commands_per_message":             commandsPerMessage(o, s),
		"subscriptions":                    n,
		"refused":                          refused.Load(),
		"failed_clients":                   failed.Load(),
		"seconds":                          round(span.Seconds(), 3),
		"subscriptions_per_sec":            round(float64(n)/span.Seconds(), 0),
		"server_cpu_s":                     round(d.cpuSeconds, 2),
		"server_cpu_us_per_subscription":   round(per(d.cpuSeconds*1e6), 3),
		"server_syscalls_per_subscription": perUnit(calls, n),
		"server_sleeps_per_subscription":   round(per(float64(d.volCtx)), 4),
		"client_cpu_us_per_subscription":   round(per(self0.delta(self1).cpuSeconds*1e6), 3),
	}, nil
}

func round(x float64, digits int) float64 {
	p := 1.0
	for i := 0; i < digits; i++ {
		p *= 10
	}
	if x < 0 {
		return -float64(int64(-x*p+0.5)) / p
	}
	return float64(int64(x*p+0.5)) / p
}

// maybeCount starts counting the server's system calls when -syscalls asks.
func maybeCount(o *options, s *server) *syscallCounter {
	if !o.syscalls {
		return nil
	}
	c, err := startSyscallCounter(s.pid)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadcheck: perf stat:", err)
		return nil
	}
	return c
}

func stopCount(c *syscallCounter) map[string]uint64 {
	if c == nil {
		return nil
	}
	return c.stop()
}

// publishAll publishes o.messages "burst" messages from o.publishers publishers in this process,
// each as fast as its previous publish is answered (NATS: buffered, flushed at the end); returns
// the refusals and the publish round trips in microseconds.
func publishAll(o *options, s *server) (int64, histogram, error) {
	var pubs []func() error
	var flushes []func() error
	for p := 0; p < o.publishers; p++ {
		if s.kind == "nats" {
			pub, flush, err := natsPublisher(s, "burst")
			if err != nil {
				return 0, histogram{}, err
			}
			pubs = append(pubs, pub)
			flushes = append(flushes, flush)
		} else {
			pubs = append(pubs, heraldPublisher(s, "burst"))
		}
	}
	var next, refused atomic.Int64
	var wg sync.WaitGroup
	hists := make([]histogram, len(pubs))
	for p := range pubs {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			for next.Add(1) <= int64(o.messages) {
				sent := time.Now()
				if err := pubs[p](); err != nil {
					refused.Add(1)
				}
				hists[p].record(uint64(time.Since(sent).Microseconds()))
			}
			if flushes != nil {
				if err := flushes[p](); err != nil {
					fmt.Fprintln(os.Stderr, "loadcheck: flush:", err)
				}
			}
		}(p)
	}
	wg.Wait()
	var h histogram
	for i := range hists {
		h.merge(&hists[i])
	}
	return refused.Load(), h, nil
}

// publishedReport is what the publishing child prints.
type publishedReport struct {
	Refused int64
	Hist    histogram
}

// publishInChild runs the publishers in a child process (this program with -role publish).
func publishInChild(o *options, s *server) (int64, histogram, error) {
	cmd := exec.Command(os.Args[0], "-role", "publish", "-server", s.kind, "-addr", s.addr,
		"-api-key", s.apiKey, "-publishers", fmt.Sprint(o.publishers), "-messages", fmt.Sprint(o.messages))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, histogram{}, fmt.Errorf("publishing child: %w", err)
	}
	var r publishedReport
	if err := json.Unmarshal(out, &r); err != nil {
		return 0, histogram{}, fmt.Errorf("publishing child: %w", err)
	}
	return r.Refused, r.Hist, nil
}

// publishRole is the publishing child: publishes and prints its report.
func publishRole(o *options) {
	s := &server{kind: o.server, addr: o.addr, apiKey: o.apiKey}
	refused, h, err := publishAll(o, s)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadcheck:", err)
		os.Exit(1)
	}
	b, _ := json.Marshal(publishedReport{refused, h})
	fmt.Println(string(b))
}

// endings keeps a few distinct ways subscribers' connections ended: the error (for a WebSocket
// close, its code and reason) and the last frame the server sent that was not a message.
type endings struct {
	mu   sync.Mutex
	seen map[string]int
}

func (e *endings) note(err error, last []byte) {
	key := err.Error()
	if len(last) > 0 {
		key += "; last non-message frame: " + string(last)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.seen == nil {
		e.seen = map[string]int{}
	}
	if _, ok := e.seen[key]; ok || len(e.seen) < 5 {
		e.seen[key]++
	}
}

func (e *endings) samples() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.seen
}

// commandsPerMessage is how many subscribe commands the storm put in one WebSocket message
// (Herald, pipelined), or 0 where that does not apply.
func commandsPerMessage(o *options, s *server) int {
	if s.kind != "herald" || o.wait {
		return 0
	}
	return max(o.batch, 1)
}
