package main

// NATS's side, with the official client (nats.go): one connection per subscriber with a
// synchronous subscription read by the subscriber's goroutine, and publishers that `Publish` as
// fast as the client buffers and `Flush` (PING/PONG) at the end.

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/nats-io/nats.go"
)

func dialNATS(addr string, local net.IP) (*nats.Conn, error) {
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: local}, Timeout: 30 * time.Second}
	return nats.Connect("nats://"+addr,
		nats.SetCustomDialer(dialer),
		nats.MaxReconnects(0),
		nats.Timeout(30*time.Second),
		nats.FlusherTimeout(30*time.Second),
	)
}

// natsSubscriber opens a connection subscribed to subject (confirmed by a PING/PONG).
func natsSubscriber(addr string, local net.IP, subject string, deadline time.Time) (func() ([]byte, error), func(), error) {
	nc, err := dialNATS(addr, local)
	if err != nil {
		return nil, nil, err
	}
	sub, err := nc.SubscribeSync(subject)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	// A burst's messages must not be dropped by the client's own pending limit.
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		nc.Close()
		return nil, nil, err
	}
	if err := nc.FlushTimeout(30 * time.Second); err != nil {
		nc.Close()
		return nil, nil, err
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	next := func() ([]byte, error) {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return nil, err
		}
		return m.Data, nil
	}
	return next, func() { cancel(); nc.Close() }, nil
}

// natsPublisher returns a function that publishes one message carrying `{"ts":NOW}` (buffered
// by the client, not waited for) and one that flushes.
func natsPublisher(s *server, subject string) (func() error, func() error, error) {
	nc, err := dialNATS(s.addr, net.IPv4(127, 0, 0, 1))
	if err != nil {
		return nil, nil, err
	}
	pub := func() error {
		return nc.Publish(subject, []byte(fmt.Sprintf(`{"ts":%d}`, time.Now().UnixNano())))
	}
	flush := func() error {
		err := nc.FlushTimeout(60 * time.Second)
		nc.Close()
		return err
	}
	return pub, flush, nil
}

// natsStormClient subscribes one connection to `channels` new subjects: pipelined (every SUB
// buffered, then one Flush) or, with wait, a Flush after each SUB. The subscriptions share one
// Go channel (`ChanSubscribe`): a synchronous subscription would allocate a 65,536-message
// channel each, which costs the client far more than the server. It returns 0 refusals: NATS
// refuses a subscription only by an asynchronous error.
func natsStormClient(nc *nats.Conn, prefix string, channels int, wait bool) (int, error) {
	sink := make(chan *nats.Msg, 1)
	for i := 1; i <= channels; i++ {
		if _, err := nc.ChanSubscribe(fmt.Sprintf("%s.%d", prefix, i), sink); err != nil {
			return 0, err
		}
		if wait {
			if err := nc.FlushTimeout(30 * time.Second); err != nil {
				return 0, err
			}
		}
	}
	return 0, nc.FlushTimeout(60 * time.Second)
}
