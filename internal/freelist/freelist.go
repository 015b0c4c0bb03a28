package freelist

// List is a stack of spare *T. It is not safe for concurrent use: a list
// shared between goroutines is guarded by its owner's lock.
type List[T any] struct{ spare []*T }

// Get returns the spare put last, as Put left it, or a new zero T.
func (l *List[T]) Get() *T {
	n := len(l.spare)
	if n == 0 {
		return new(T)
	}
	x := l.spare[n-1]
	l.spare[n-1] = nil
	l.spare = l.spare[:n-1]
	return x
}

// Put keeps x for Get. The caller clears what x must not keep alive (or
// keeps what Get's next caller may use again, such as a channel).
func (l *List[T]) Put(x *T) { l.spare = append(l.spare, x) }

// Len is the number of spares kept.
func (l *List[T]) Len() int { return len(l.spare) }
