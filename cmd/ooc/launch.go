package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/gorgonia-ooc/outofcore/dist"
)

// launchOptions are "ooc launch"'s flags and the command it runs.
type launchOptions struct {
	NProc      int
	MasterPort int
	Grace      time.Duration
	Args       []string // the ooc command each rank runs, e.g. train -device cuda ...
}

func parseLaunchFlags(args []string, stderr io.Writer) (*launchOptions, error) {
	fs := newFlagSet("launch", "-nproc N [-master-port P] [-grace D] -- COMMAND [FLAGS]",
		"Run N copies of \"ooc COMMAND FLAGS\" on this machine as the ranks of one run: each gets RANK,\n"+
			"WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT and OOC_RUN_ID, as\n"+
			"torchrun sets them. Output lines are prefixed with \"[rank R]\"; SIGINT and SIGTERM are passed to\n"+
			"every rank; the first rank to fail stops the others (SIGTERM, then SIGKILL after -grace) and\n"+
			"its exit status is launch's.", stderr)
	o := &launchOptions{}
	fs.IntVar(&o.NProc, "nproc", 0, "the number of processes (ranks) to run, one per GPU (required)")
	fs.IntVar(&o.MasterPort, "master-port", 0, "rank 0's rendezvous port on 127.0.0.1 (default: a free port)")
	fs.DurationVar(&o.Grace, "grace", 15*time.Second, "how long ranks stopped after a failure have to exit before they are killed")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return nil, err
		}
		return nil, usageError{err}
	}
	o.Args = fs.Args()
	switch {
	case o.NProc < 1:
		return nil, usagef("-nproc %d: want at least 1 process", o.NProc)
	case o.MasterPort < 0 || o.MasterPort > 65535:
		return nil, usagef("-master-port %d: not a port (1..65535, or 0 for a free one)", o.MasterPort)
	case o.Grace <= 0:
		return nil, usagef("-grace %v: want a positive duration", o.Grace)
	case len(o.Args) == 0:
		return nil, usagef("no command to run: ooc launch -nproc N -- train [flags]")
	case o.Args[0] == "launch":
		return nil, usagef("ooc launch cannot launch itself")
	}
	return o, nil
}

// exitStatus is an error that sets ooc's exit status: a rank's.
type exitStatus struct {
	code int
	msg  string
}

func (e *exitStatus) Error() string { return e.msg }

// runLaunch is "ooc launch": it starts the ranks and supervises them until
// all have exited.
func runLaunch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseLaunchFlags(args, stderr)
	if err != nil {
		return err
	}
	bin, err := os.Executable()
	if err != nil {
		return fmt.Errorf("cannot find the ooc binary to start the ranks: %w", err)
	}
	port := o.MasterPort
	if port == 0 {
		if port, err = freePort(); err != nil {
			return err
		}
	}
	runID, err := newRunID()
	if err != nil {
		return err
	}
	l := &launcher{opts: o, bin: bin, master: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), runID: runID,
		stdout: stdout, stderr: stderr}

	// The launcher passes each signal on itself, once: main's handler (the
	// context, which stops training) would be a second, and for ooc train a
	// second interrupt kills. In a test that calls this directly, ending
	// ctx stands for one SIGTERM.
	signal.Reset(os.Interrupt, syscall.SIGTERM)
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	// Children die with the thread that started them (Pdeathsig, where the
	// system has it): keep that thread until they have all exited.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return l.run(ctx, sigs)
}

// freePort is a loopback port nobody listened on a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port for the rendezvous (give -master-port): %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func newRunID() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("making a run id: %w", err)
	}
	return "launch-" + hex.EncodeToString(b), nil
}

// launcher runs one process per rank and passes signals and failures on.
type launcher struct {
	opts           *launchOptions
	bin, master    string
	runID          string
	stdout, stderr io.Writer
	mu             sync.Mutex // one line at a time on stdout and stderr
	ranks          []*rankProc
}

// rankProc is one child.
type rankProc struct {
	rank      int
	cmd       *exec.Cmd
	out, errw *prefixWriter
	signaled  bool // has been sent a signal to stop: a second SIGTERM would kill ooc train mid-checkpoint
	exited    bool
}

func (l *launcher) say(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.stderr, "ooc launch: "+format+"\n", args...)
}

func (l *launcher) run(ctx context.Context, sigs <-chan os.Signal) error {
	n := l.opts.NProc
	l.say("%d ranks on this machine, rendezvous at %s, run %s", n, l.master, l.runID)
	exits := make(chan *rankProc, n)
	for r := range n {
		p, err := l.start(r)
		if err != nil {
			l.say("%v; killing the ranks already started", err)
			l.signalAll(syscall.SIGKILL, false)
			for range r {
				<-exits
			}
			return err
		}
		l.ranks = append(l.ranks, p)
		go func() {
			p.cmd.Wait()
			exits <- p
		}()
	}
	return l.supervise(ctx, sigs, exits)
}

// start starts rank r: the same binary with the launch's arguments and the
// rank's environment.
func (l *launcher) start(r int) (*rankProc, error) {
	n := l.opts.NProc
	w := dist.World{Rank: r, Size: n, LocalRank: r, Master: l.master, RunID: l.runID}
	cmd := exec.Command(l.bin, l.opts.Args...)
	cmd.Env = append(append(os.Environ(), w.Env()...), "LOCAL_WORLD_SIZE="+strconv.Itoa(n))
	p := &rankProc{rank: r, cmd: cmd}
	prefix := fmt.Sprintf("[rank %d] ", r)
	p.out = &prefixWriter{mu: &l.mu, w: l.stdout, prefix: prefix}
	p.errw = &prefixWriter{mu: &l.mu, w: l.stderr, prefix: prefix}
	cmd.Stdout, cmd.Stderr = p.out, p.errw
	cmd.SysProcAttr = rankProcAttr()
	// A grandchild that keeps the output open does not hold the launcher.
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting rank %d: %w", r, err)
	}
	return p, nil
}

// supervise waits for every rank: it passes signals on, and on the first
// failure stops the others, killing those that outlive the grace period.
func (l *launcher) supervise(ctx context.Context, sigs <-chan os.Signal, exits <-chan *rankProc) error {
	var first *exitStatus
	var kill <-chan time.Time
	stopped := false // the user stopped the run: exits that follow are not failures to act on
	done := ctx.Done()
	for running := len(l.ranks); running > 0; {
		select {
		case p := <-exits:
			running--
			p.exited = true
			p.out.flush()
			p.errw.flush()
			code, how := exitOf(p.cmd.ProcessState)
			if code == 0 || first != nil {
				continue
			}
			first = &exitStatus{code, fmt.Sprintf("rank %d %s", p.rank, how)}
			if !stopped && running > 0 {
				l.say("rank %d %s: stopping the other ranks", p.rank, how)
				l.signalAll(syscall.SIGTERM, false)
				kill = time.After(l.opts.Grace)
			}
		case s := <-sigs:
			stopped = true
			l.say("%v: passing it to the %d running ranks", s, running)
			l.signalAll(s, true)
		case <-done:
			done = nil
			stopped = true
			l.signalAll(syscall.SIGTERM, false)
		case <-kill:
			for _, p := range l.ranks {
				if !p.exited {
					l.say("rank %d did not stop within %v: killing it", p.rank, l.opts.Grace)
					p.cmd.Process.Kill()
				}
			}
		}
	}
	if first != nil {
		return first
	}
	return nil
}

// signalAll sends s to every running rank; again says whether ranks that
// were already sent one get it too (a user's second interrupt, passed on).
func (l *launcher) signalAll(s os.Signal, again bool) {
	for _, p := range l.ranks {
		if p.exited || (p.signaled && !again) {
			continue
		}
		p.signaled = true
		p.cmd.Process.Signal(s)
	}
}

// exitOf is a rank's exit status as a shell reports it (128+N for a death
// by signal N) and a phrase saying how it ended.
func exitOf(ps *os.ProcessState) (int, string) {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), fmt.Sprintf("was killed by signal %d (%v)", int(ws.Signal()), ws.Signal())
	}
	return ps.ExitCode(), fmt.Sprintf("exited with status %d", ps.ExitCode())
}

// prefixWriter writes whole lines, each behind a prefix, so that ranks'
// lines do not mix. Its Write is called from one goroutine (exec's copier).
type prefixWriter struct {
	mu     *sync.Mutex
	w      io.Writer
	prefix string
	buf    []byte
}

// maxLine bounds a line held back waiting for its end.
const maxLine = 64 << 10

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			break
		}
		p.emit(p.buf[:i+1])
		p.buf = p.buf[i+1:]
	}
	if len(p.buf) == 0 {
		p.buf = nil
	}
	if len(p.buf) > maxLine {
		p.flush()
	}
	return len(b), nil
}

// flush writes a last line that had no newline.
func (p *prefixWriter) flush() {
	if len(p.buf) > 0 {
		p.emit(append(p.buf, '\n'))
		p.buf = nil
	}
}

func (p *prefixWriter) emit(line []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	io.WriteString(p.w, p.prefix)
	p.w.Write(line)
}
