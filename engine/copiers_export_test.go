package engine

// CopierWorkers counts the copier's leader workers, follower workers and
// group recorders held now.
func (e *Engine) CopierWorkers() (leaders, followers, recorders int) {
	c := e.copier
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.workers), len(c.followers), len(c.recorders)
}
