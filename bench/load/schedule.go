package load

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Stage is one piece of an open-loop rate profile: the arrival rate moves
// linearly from From to To requests a second over Duration (From == To is a
// steady rate, From < To a ramp up).
type Stage struct {
	Duration time.Duration `json:"duration"`
	From     float64       `json:"from"`
	To       float64       `json:"to"`
}

// Schedule is the intended send time of every request of an open-loop run:
// a pure function of the stages, so it is tested without a clock. Request i
// (from 0) is due when the integral of the rate reaches i.
type Schedule struct {
	stages []Stage
	first  []float64       // requests due before each stage
	start  []time.Duration // offset of each stage
	total  uint64
}

// NewSchedule returns the schedule of stages, or an error naming every bad
// stage.
func NewSchedule(stages ...Stage) (*Schedule, error) {
	if len(stages) == 0 {
		return nil, errors.New("load: a schedule needs at least one stage")
	}
	s := &Schedule{stages: stages}
	var errs []error
	var n float64
	var at time.Duration
	for i, st := range stages {
		if st.Duration <= 0 {
			errs = append(errs, fmt.Errorf("stage %d: duration %v must be positive", i+1, st.Duration))
		}
		if st.From < 0 || st.To < 0 || math.IsNaN(st.From) || math.IsNaN(st.To) || math.IsInf(st.From, 0) || math.IsInf(st.To, 0) {
			errs = append(errs, fmt.Errorf("stage %d: rates %v..%v must be finite and not negative", i+1, st.From, st.To))
		}
		s.first = append(s.first, n)
		s.start = append(s.start, at)
		n += (st.From + st.To) / 2 * st.Duration.Seconds()
		at += st.Duration
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	s.total = uint64(math.Ceil(n - 1e-9))
	return s, nil
}

// Total returns how many requests the schedule holds.
func (s *Schedule) Total() uint64 { return s.total }

// Duration returns the length of the whole profile.
func (s *Schedule) Duration() time.Duration {
	last := len(s.stages) - 1
	return s.start[last] + s.stages[last].Duration
}

// Stages returns the profile's stages.
func (s *Schedule) Stages() []Stage { return s.stages }

// At returns the offset from the start at which request i is due and the
// index of its stage; ok is false when i is past the end of the profile.
func (s *Schedule) At(i uint64) (off time.Duration, stage int, ok bool) {
	if i >= s.total {
		return 0, 0, false
	}
	n := float64(i)
	stage = len(s.stages) - 1
	for k := 1; k < len(s.stages); k++ {
		if s.first[k] > n {
			stage = k - 1
			break
		}
	}
	st := s.stages[stage]
	m := n - s.first[stage] // requests due inside this stage before i
	// Within a stage the count is N(t) = r0*t + k*t*t/2 with k the slope;
	// N(t) = m solved in the form that stays exact when k is 0.
	r0 := st.From
	k := (st.To - st.From) / st.Duration.Seconds()
	t := 0.0
	if m > 0 {
		disc := math.Max(r0*r0+2*k*m, 0)
		t = 2 * m / (r0 + math.Sqrt(disc))
	}
	t = math.Min(t, st.Duration.Seconds())
	return s.start[stage] + time.Duration(t*float64(time.Second)), stage, true
}
