package checkrun

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// TB is the part of testing.TB the shared checks use.
type TB interface {
	Helper()
	Errorf(format string, args ...any)
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
	Cleanup(func())
}

// ErrTimeout is what Run returns when the context ended before the check did.
var ErrTimeout = errors.New("deadline passed")

// Result is how one check went under Run.
type Result struct {
	// Errors are the check's Errorf and Fatal messages, in order.
	Errors []string
	// Logs are its Logf messages.
	Logs []string
	// Err is nil when the check passed, ErrTimeout when the context ended
	// first, else an error joining Errors (or a panic's value).
	Err error
}

// runner is the TB of one Run.
type runner struct {
	ctx      context.Context
	res      *Result
	cleanups []func()
}

// stop unwinds a check's stack from Fatal or an expired deadline; Run
// recovers it.
type stop struct{ timeout bool }

// Helper checks the deadline: every shared helper calls it first, so a check
// stops within one helper call of its context ending (the checks have no
// other place to look at a context).
func (r *runner) Helper() {
	if r.ctx.Err() != nil {
		panic(stop{timeout: true})
	}
}

func (r *runner) Errorf(format string, args ...any) {
	r.res.Errors = append(r.res.Errors, fmt.Sprintf(format, args...))
}

func (r *runner) Fatal(args ...any) {
	r.res.Errors = append(r.res.Errors, strings.TrimSuffix(fmt.Sprintln(args...), "\n"))
	panic(stop{})
}

func (r *runner) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	panic(stop{})
}

func (r *runner) Logf(format string, args ...any) {
	r.res.Logs = append(r.res.Logs, fmt.Sprintf(format, args...))
}

func (r *runner) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }

// Run runs check with a TB whose Fatal ends the check (not the process)
// and whose Helper ends it once ctx is done; cleanups run last-in first-out
// at the end, as in a test. A panic inside the check is a failure, not a
// crash: "ooc doctor" must reach its next part.
func Run(ctx context.Context, check func(TB)) (res Result) {
	r := &runner{ctx: ctx, res: &res}
	defer func() {
		for i := len(r.cleanups) - 1; i >= 0; i-- {
			func() {
				defer func() { _ = recover() }()
				r.cleanups[i]()
			}()
		}
	}()
	defer func() {
		switch v := recover().(type) {
		case nil:
		case stop:
			if v.timeout {
				res.Err = ErrTimeout
				return
			}
		default:
			res.Errors = append(res.Errors, fmt.Sprintf("panic: %v", v))
		}
		if res.Err == nil && len(res.Errors) > 0 {
			res.Err = errors.New(strings.Join(res.Errors, "; "))
		}
	}()
	if ctx.Err() != nil {
		panic(stop{timeout: true})
	}
	check(r)
	return res
}
