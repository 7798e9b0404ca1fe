package engine

// CopierWorkers counts the copier's leader workers, follower workers and
// group recorders held now.
func (e *Engine) CopierWorkers() (leaders, followers, recorders int) {
	c := e.copier
	for i := range c.followers {
		sh := &c.followers[i]
		sh.mu.Lock()
		followers += len(sh.m)
		sh.mu.Unlock()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.workers), followers, len(c.recorders)
}
