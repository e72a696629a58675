package upstream

// Reserve returns how many of n lookup slots are kept for services that
// hold less than their share: an eighth, rounded up (8 of 64), and never
// all of them.
func Reserve(n int) int {
	return min((n+7)/8, max(n-1, 0))
}

// mayTake is the rule that shares an upstream's n lookup slots among the
// services asking it: whether a lookup of a service holding held slots,
// while others other services hold some, may take one of the free slots.
//
//   - No slot is free: no (the lookup is refused at once, as it always was).
//   - More than the reserve is free: yes. Idle capacity is anyone's, so a
//     service alone may use all but the reserve.
//   - Only the reserve is free: yes only to a service below its share,
//     n/(others+2) slots: every service holding slots, itself, and one
//     more about to ask. So a service alone stops at n-reserve, and
//     whatever it holds, a service that holds nothing finds a slot.
//
// When several services ask more than the bank can answer, the slots each
// frees go back to the reserve until those below their share have taken
// them: the shares even out as lookups end, with no queue.
func mayTake(n, reserve, free, held, others int) bool {
	switch {
	case free <= 0:
		return false
	case free > reserve:
		return true
	}
	return held*(others+2) < n
}

// slots counts the lookups in flight to one upstream, by service when
// they are capped. Its memory is bounded by the slots: a service holding
// none has no entry. The caller serialises its use.
type slots struct {
	n, reserve int // n zero: no cap
	inUse      int
	held       map[string]int
}

func newSlots(n int) slots {
	if n <= 0 {
		return slots{}
	}
	return slots{n: n, reserve: Reserve(n), held: make(map[string]int, n)}
}

// take takes a slot for service if mayTake allows it.
func (s *slots) take(service string) bool {
	if s.n == 0 {
		s.inUse++
		return true
	}
	h := s.held[service]
	others := len(s.held)
	if h > 0 {
		others--
	}
	if !mayTake(s.n, s.reserve, s.n-s.inUse, h, others) {
		return false
	}
	s.held[service] = h + 1
	s.inUse++
	return true
}

// give returns a slot service took.
func (s *slots) give(service string) {
	s.inUse--
	if s.n == 0 {
		return
	}
	if h := s.held[service]; h > 1 {
		s.held[service] = h - 1
	} else {
		delete(s.held, service)
	}
}
