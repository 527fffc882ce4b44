package main

// Starting the server under test (a `herald serve` or a `nats-server` on a free loopback port,
// each with a data directory or nothing of its own) and stopping it by its pid.

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// server is a started (or given) server.
type server struct {
	kind   string // "herald" or "nats"
	addr   string // host:port of its HTTP listener (Herald) or client port (NATS)
	pid    int
	apiKey string // Herald's publisher (admin) key
	cmd    *exec.Cmd
	dir    string
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// startHerald runs `bin serve` on 127.0.0.1:0 with a fresh data directory, anonymous clients
// allowed and every rate limit off (as `herald bench --spawn` runs it), and waits for its address.
func startHerald(bin string) (*server, error) {
	dir, err := os.MkdirTemp("", "loadcheck-herald-")
	if err != nil {
		return nil, err
	}
	key := "hk_" + randomHex(16)
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--data", dir,
		"--api-key", key, "--token-secret", randomHex(32), "--allow-anonymous")
	cmd.Env = append(os.Environ(), "HERALD_LOG=warn")
	for _, l := range []string{"PUBLISH", "PUSH", "REGISTRATION", "COMMAND", "CONNECTION", "LOGIN"} {
		cmd.Env = append(cmd.Env, "HERALD_LIMITS_"+l+"=off")
	}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "herald listening on http://"); ok {
				found <- strings.TrimSpace(a)
			}
		}
	}()
	s := &server{kind: "herald", pid: cmd.Process.Pid, apiKey: key, cmd: cmd, dir: dir}
	select {
	case s.addr = <-found:
		return s, nil
	case <-time.After(30 * time.Second):
		s.stop()
		return nil, fmt.Errorf("%s did not print its address within 30 s", bin)
	}
}

// startNATS runs `bin -a 127.0.0.1 -p PORT` (its defaults otherwise) and waits until it accepts.
func startNATS(bin string) (*server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "-a", "127.0.0.1", "-p", fmt.Sprint(port))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &server{kind: "nats", addr: fmt.Sprintf("127.0.0.1:%d", port), pid: cmd.Process.Pid, cmd: cmd}
	for i := 0; i < 300; i++ {
		if c, err := net.Dial("tcp", s.addr); err == nil {
			c.Close()
			return s, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.stop()
	return nil, fmt.Errorf("%s did not accept connections within 30 s", bin)
}

// stop sends SIGTERM to the server it started, waits up to 5 s, then SIGKILL; removes its data.
func (s *server) stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
}
