package dist

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"time"
)

// The TCP rendezvous: each rank but 0 connects to w.Master and sends one
// hello (a JSON line); rank 0 answers every rank with one answer once all
// have checked in, or with the reason it refuses them.
const protoMagic = "ooc-dist/1"

type hello struct {
	Magic string `json:"magic"`
	Rank  int    `json:"rank"`
	Size  int    `json:"size"`
	Run   string `json:"run"`
}

type answer struct {
	Payload []byte `json:"payload,omitempty"`
	Error   string `json:"error,omitempty"`
}

// replyTimeout bounds one answer's write, so that a rank that stopped
// reading cannot hold rank 0.
const replyTimeout = 5 * time.Second

// errorLinger is how long rank 0, when it could not make what it shares,
// still answers the ranks that check in with its error, before it returns
// the error itself; later ranks find no master.
var errorLinger = 10 * time.Second

// checkIn is one connection's hello, or why it was not one.
type checkIn struct {
	conn  net.Conn
	hello hello
	err   error
}

// listenAddr is where rank 0 listens: on the loopback address itself when
// the master is one, else on every interface, since the name the others use
// may resolve to any of this machine's addresses.
func listenAddr(master string) string {
	host, port, _ := net.SplitHostPort(master)
	if ip := net.ParseIP(host); (ip != nil && ip.IsLoopback()) || host == "localhost" {
		return master
	}
	return net.JoinHostPort("", port)
}

// serve is rank 0's side: listen, make the payload, collect every other
// rank's hello, then answer them all.
func serve(ctx context.Context, w World, create func() ([]byte, error), timeout time.Duration) ([]byte, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", listenAddr(w.Master))
	if err != nil {
		return nil, fmt.Errorf("dist: rank 0: cannot listen for the other ranks at %s (is another run using this port?): %w", w.Master, err)
	}
	defer ln.Close()
	done := make(chan struct{})
	defer close(done)
	ins := make(chan checkIn)
	go accept(ln, ins, done)

	payload, makeErr := makePayload(create)
	var linger <-chan time.Time
	if makeErr != nil {
		linger = time.After(errorLinger)
	}
	checked := map[int]net.Conn{}
	var strangers []string // ranks of other runs, refused
	defer func() {
		for _, c := range checked {
			c.Close()
		}
	}()
	for len(checked) < w.Size-1 {
		select {
		case in := <-ins:
			if in.err != nil {
				// Not one of ours (a port scan, a health check): ignore it.
				in.conn.Close()
				continue
			}
			if in.hello.Run != w.RunID {
				// Another job's rank at this port: refuse it, but do not let
				// it stop this run.
				reply(in.conn, answer{Error: fmt.Sprintf("%s is rank 0 of run %q, not of run %q", w.Master, w.RunID, in.hello.Run)})
				in.conn.Close()
				strangers = append(strangers, fmt.Sprintf("rank %d of run %q from %s", in.hello.Rank, in.hello.Run, in.conn.RemoteAddr()))
				continue
			}
			if reason := refuse(w, in, checked); reason != "" {
				reply(in.conn, answer{Error: reason})
				in.conn.Close()
				tellAll(checked, "rank 0 stopped the rendezvous: "+reason)
				return nil, fmt.Errorf("dist: rank 0: %s", reason)
			}
			checked[in.hello.Rank] = in.conn
			if makeErr != nil {
				reply(in.conn, answer{Error: "rank 0 could not make what it shares: " + makeErr.Error()})
			}
		case <-linger:
			return nil, makeErr
		case <-ctx.Done():
			if makeErr != nil {
				return nil, makeErr
			}
			missing := missingRanks(w.Size, checked)
			reason := fmt.Sprintf("rank(s) %s did not check in at %s within %v", missing, w.Master, timeout)
			if len(strangers) > 0 {
				reason += fmt.Sprintf(" (refused as of another run: %s)", strings.Join(strangers, "; "))
			}
			tellAll(checked, "rank 0 gave up: "+reason)
			return nil, fmt.Errorf("dist: rank 0: %s: %w", reason, context.Cause(ctx))
		}
	}
	if makeErr != nil {
		return nil, makeErr
	}
	for _, c := range checked {
		reply(c, answer{Payload: payload})
	}
	return payload, nil
}

// accept reads each connection's hello on its own goroutine, so that a slow
// or silent connection holds no one up, until done is closed.
func accept(ln net.Listener, ins chan<- checkIn, done <-chan struct{}) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			conn.SetReadDeadline(time.Now().Add(replyTimeout))
			var h hello
			err := json.NewDecoder(io.LimitReader(conn, 64<<10)).Decode(&h)
			if err == nil && h.Magic != protoMagic {
				err = fmt.Errorf("not an %s hello", protoMagic)
			}
			conn.SetReadDeadline(time.Time{})
			select {
			case ins <- checkIn{conn, h, err}:
			case <-done:
				conn.Close()
			}
		}()
	}
}

// refuse is why rank 0 will not take a hello, or "".
func refuse(w World, in checkIn, checked map[int]net.Conn) string {
	h := in.hello
	switch {
	case h.Size != w.Size:
		return fmt.Sprintf("world size mismatch: rank %d has world size %d, rank 0 has %d", h.Rank, h.Size, w.Size)
	case h.Rank == 0:
		return "a second process says it is rank 0"
	case h.Rank < 0 || h.Rank >= w.Size:
		return fmt.Sprintf("rank %d is out of range for world size %d", h.Rank, w.Size)
	case checked[h.Rank] != nil:
		return fmt.Sprintf("rank %d checked in twice (from %s and from %s)", h.Rank, checked[h.Rank].RemoteAddr(), in.conn.RemoteAddr())
	}
	return ""
}

func reply(c net.Conn, a answer) {
	c.SetWriteDeadline(time.Now().Add(replyTimeout))
	json.NewEncoder(c).Encode(a)
}

func tellAll(checked map[int]net.Conn, reason string) {
	for _, c := range checked {
		reply(c, answer{Error: reason})
	}
}

func missingRanks(size int, checked map[int]net.Conn) string {
	var m []string
	for r := 1; r < size; r++ {
		if checked[r] == nil {
			m = append(m, fmt.Sprint(r))
		}
	}
	if len(m) > 8 {
		m = append(slices.Clip(m[:8]), fmt.Sprintf("... (%d in all)", len(m)))
	}
	return strings.Join(m, ", ")
}

// join is the side of every rank but 0: connect (retrying until rank 0
// listens, or the deadline), say who it is, and wait for the answer.
func join(ctx context.Context, w World, timeout time.Duration) ([]byte, error) {
	wait := 20 * time.Millisecond
	for {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", w.Master)
		if err == nil {
			return exchange(ctx, w, conn, timeout)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("dist: rank %d: the master %s (rank 0) could not be reached within %v (last try: %v): %w", w.Rank, w.Master, timeout, err, context.Cause(ctx))
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

func exchange(ctx context.Context, w World, conn net.Conn, timeout time.Duration) ([]byte, error) {
	defer conn.Close()
	// The context's end unblocks the read below.
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	if err := json.NewEncoder(conn).Encode(hello{protoMagic, w.Rank, w.Size, w.RunID}); err != nil {
		return nil, fmt.Errorf("dist: rank %d: the master %s: %w", w.Rank, w.Master, err)
	}
	var a answer
	err := json.NewDecoder(io.LimitReader(conn, 2*MaxPayload+4096)).Decode(&a)
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, fmt.Errorf("dist: rank %d: rank 0 at %s did not answer within %v (another rank has not checked in?): %w", w.Rank, w.Master, timeout, context.Cause(ctx))
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return nil, fmt.Errorf("dist: rank %d: rank 0 at %s closed the connection before answering (did it exit, or is it not an ooc rank?)", w.Rank, w.Master)
	case err != nil:
		return nil, fmt.Errorf("dist: rank %d: rank 0 at %s: %w", w.Rank, w.Master, err)
	case a.Error != "":
		return nil, fmt.Errorf("dist: rank %d: refused by rank 0: %s", w.Rank, a.Error)
	}
	return a.Payload, nil
}
