package simkit

// Counts is how many times each tag (a client order id, an order's text) was accepted per owner (an
// API key, an account): how a test sees an order placed twice. Guarded by the simulator's lock.
type Counts map[string]map[string]int

// Add counts one tag of owner; an empty tag is not counted.
func (c Counts) Add(owner, tag string) {
	if tag == "" {
		return
	}
	if c[owner] == nil {
		c[owner] = map[string]int{}
	}
	c[owner][tag]++
}

// Copy is a deep copy of c.
func (c Counts) Copy() Counts {
	out := make(Counts, len(c))
	for k, v := range c {
		out[k] = make(map[string]int, len(v))
		for t, n := range v {
			out[k][t] = n
		}
	}
	return out
}
