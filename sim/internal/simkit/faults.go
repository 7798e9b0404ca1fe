package simkit

// Faults is a simulator's injected faults of one kind, in the order they were added: each applies to
// the requests of its route ("" for every route), for the next times of them (0: until Clear), one
// fault per request. Guarded by the simulator's lock; the zero value is empty.
type Faults[F any] struct{ list []*injected[F] }

type injected[F any] struct {
	route string
	left  int
	f     F
}

// Add appends f for the requests of route, for times of them (0: until Clear).
func (l *Faults[F]) Add(route string, times int, f F) {
	l.list = append(l.list, &injected[F]{route: route, left: times, f: f})
}

// Clear removes every fault.
func (l *Faults[F]) Clear() { l.list = nil }

// Take returns the first fault for a request of route that skip (when not nil) does not pass over,
// and uses one of its times up; nil when there is none.
func (l *Faults[F]) Take(route string, skip func(*F) bool) *F {
	for i, in := range l.list {
		if in.route != "" && in.route != route {
			continue
		}
		if skip != nil && skip(&in.f) {
			continue
		}
		got := in.f
		if in.left > 0 {
			in.left--
			if in.left == 0 {
				l.list = append(l.list[:i:i], l.list[i+1:]...)
			}
		}
		return &got
	}
	return nil
}
