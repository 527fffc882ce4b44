package main

// Herald's side: WebSocket subscribers (docs/protocol.md section 4: text frames of JSON, a
// `subscribe` command answered by a reply carrying its `id`) over gorilla/websocket with its
// defaults (4 KiB buffers, no compression), and publishers over the HTTP API
// (`POST /v1/channels/{name}/messages` with the publisher key), one request at a time each.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/websocket"
)

// heraldConn is one WebSocket connection with a buffer reused for every frame it reads.
type heraldConn struct {
	ws  *websocket.Conn
	buf bytes.Buffer
}

func dialHerald(addr string, local net.IP) (*heraldConn, error) {
	d := websocket.Dialer{
		HandshakeTimeout: 30 * time.Second,
		NetDialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
			nd := net.Dialer{LocalAddr: &net.TCPAddr{IP: local}}
			return nd.DialContext(ctx, network, a)
		},
	}
	ws, _, err := d.Dial("ws://"+addr+"/v1/ws", nil)
	if err != nil {
		return nil, err
	}
	return &heraldConn{ws: ws}, nil
}

// next reads one frame; the slice is valid until the next call.
func (c *heraldConn) next() ([]byte, error) {
	_, r, err := c.ws.NextReader()
	if err != nil {
		return nil, err
	}
	c.buf.Reset()
	if _, err := c.buf.ReadFrom(r); err != nil {
		return nil, err
	}
	return c.buf.Bytes(), nil
}

func subscribeFrame(id int, channel string) []byte {
	return []byte(fmt.Sprintf(`{"id":%d,"subscribe":{"channel":%q}}`, id, channel))
}

// isReply says whether frame answers command id (a reply or an error carrying it), and if so
// whether it is an error.
func isReply(frame []byte, id int) (reply, failed bool) {
	tag := fmt.Sprintf(`"id":%d,`, id)
	if !bytes.HasPrefix(frame, []byte("{"+tag)) && !bytes.Contains(frame, []byte(tag)) {
		return false, false
	}
	return true, bytes.Contains(frame, []byte(`"error":`))
}

// heraldSubscriber opens a connection subscribed to channel (the reply read).
func heraldSubscriber(addr string, local net.IP, channel string) (func() ([]byte, error), func(), error) {
	c, err := dialHerald(addr, local)
	if err != nil {
		return nil, nil, err
	}
	if err := c.ws.WriteMessage(websocket.TextMessage, subscribeFrame(1, channel)); err != nil {
		c.ws.Close()
		return nil, nil, err
	}
	for {
		f, err := c.next()
		if err != nil {
			c.ws.Close()
			return nil, nil, err
		}
		if reply, failed := isReply(f, 1); reply {
			if failed {
				c.ws.Close()
				return nil, nil, fmt.Errorf("subscribe refused: %s", f)
			}
			break
		}
	}
	return c.next, func() { c.ws.Close() }, nil
}

// heraldPublisher returns a function that publishes one message carrying `{"ts":NOW}`.
func heraldPublisher(s *server, channel string) func() error {
	tr := &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	url := "http://" + s.addr + "/v1/channels/" + channel + "/messages"
	return func() error {
		body := fmt.Sprintf(`{"data":{"ts":%d}}`, time.Now().UnixNano())
		req, err := http.NewRequest("POST", url, strings.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+s.apiKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("publish: HTTP %d %s", resp.StatusCode, answer)
		}
		return nil
	}
}

// heraldStormClient subscribes one connection to `channels` new channels: pipelined (every
// command written while a reader counts the replies; `batch` commands to a WebSocket message,
// more than one as a JSON array, docs/protocol.md "Batches") or, with wait, each command after
// the previous one's reply. It returns the number of refusals.
func heraldStormClient(c *heraldConn, prefix string, channels int, wait bool, batch int) (int, error) {
	refused := 0
	if wait {
		for i := 1; i <= channels; i++ {
			if err := c.ws.WriteMessage(websocket.TextMessage, subscribeFrame(i, fmt.Sprintf("%s/%d", prefix, i))); err != nil {
				return refused, err
			}
			for {
				f, err := c.next()
				if err != nil {
					return refused, err
				}
				if reply, failed := isReply(f, i); reply {
					if failed {
						refused++
					}
					break
				}
			}
		}
		return refused, nil
	}
	readErr := make(chan error, 1)
	go func() {
		got := 0
		for got < channels {
			f, err := c.next()
			if err != nil {
				readErr <- err
				return
			}
			if bytes.Contains(f, []byte(`"id":`)) {
				got++
				if bytes.Contains(f, []byte(`"error":`)) {
					refused++
				}
			}
		}
		readErr <- nil
	}()
	if batch <= 1 {
		for i := 1; i <= channels; i++ {
			if err := c.ws.WriteMessage(websocket.TextMessage, subscribeFrame(i, fmt.Sprintf("%s/%d", prefix, i))); err != nil {
				return refused, err
			}
		}
	} else {
		var message []byte
		for first := 1; first <= channels; first += batch {
			message = append(message[:0], '[')
			for i := first; i < first+batch && i <= channels; i++ {
				if i > first {
					message = append(message, ',')
				}
				message = append(message, subscribeFrame(i, fmt.Sprintf("%s/%d", prefix, i))...)
			}
			message = append(message, ']')
			if err := c.ws.WriteMessage(websocket.TextMessage, message); err != nil {
				return refused, err
			}
		}
	}
	err := <-readErr
	return refused, err
}
