package domain

// leafSet is a set of leaves in the order added.
type leafSet struct {
	list []int32
	mark []bool // by node id
}

func (s *leafSet) reset(n int) { s.list, s.mark = s.list[:0], make([]bool, n) }

func (s *leafSet) add(l int32) {
	if !s.mark[l] {
		s.mark[l] = true
		s.list = append(s.list, l)
	}
}

// take hands the leaves over and forgets them; the list is the set's
// until the next add.
func (s *leafSet) take() []int32 {
	out := s.list
	for _, l := range out {
		s.mark[l] = false
	}
	s.list = s.list[:0]
	return out
}
