package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Token is an OAuth access token and how long the bank said it lives.
type Token struct {
	Value string
	Life  time.Duration
}

// Tokens caches the access token of one credential set. Concurrent callers
// that find no valid token share one fetch. A token is refreshed before it
// expires: from 80% of its life (at most a minute early) one fetch runs
// while callers go on with the old token, which they use until shortly
// before it expires (5% of its life, at most 10 s early); after that they
// wait for the new one. It is safe for concurrent use.
type Tokens struct {
	fetch   func(context.Context) (Token, error)
	now     func() time.Time
	timeout time.Duration
	fetched func() // counts a completed fetch (metrics); may be nil

	mu        sync.Mutex
	value     string
	renewAt   time.Time // a refresh starts
	expiresAt time.Time // the token is no longer used
	retryAt   time.Time // no background refresh before, after one failed
	flight    *flight
}

// flight is one token fetch that callers wait for.
type flight struct {
	done  chan struct{}
	value string
	err   error
}

// NewTokens returns a cache over fetch, which asks the bank for a token; a
// fetch that fails is tried once more, since asking for a token costs
// nothing. timeout bounds one fetch, independent of the callers waiting for
// it, so one caller giving up does not fail the others. fetched, if not
// nil, is called after each successful fetch.
func NewTokens(fetch func(context.Context) (Token, error), now func() time.Time, timeout time.Duration, fetched func()) *Tokens {
	return &Tokens{fetch: fetch, now: now, timeout: timeout, fetched: fetched}
}

// Get returns a valid token, fetching one if there is none.
func (t *Tokens) Get(ctx context.Context) (string, error) {
	t.mu.Lock()
	now := t.now()
	if t.value != "" && now.Before(t.renewAt) {
		v := t.value
		t.mu.Unlock()
		return v, nil
	}
	usable := t.value != "" && now.Before(t.expiresAt)
	f := t.flight
	if f == nil && (!usable || !now.Before(t.retryAt)) {
		f = &flight{done: make(chan struct{})}
		t.flight = f
		go t.run(context.WithoutCancel(ctx), f)
	}
	if usable {
		v := t.value // the refresh runs behind this call
		t.mu.Unlock()
		return v, nil
	}
	t.mu.Unlock()
	select {
	case <-f.done:
		return f.value, f.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// refreshBackoff is how long background refreshes pause after one failed
// while the old token is still usable.
const refreshBackoff = 5 * time.Second

func (t *Tokens) run(ctx context.Context, f *flight) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	var tok Token
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		if tok, err = t.fetch(ctx); err == nil || ctx.Err() != nil {
			break
		}
	}
	if err == nil && tok.Value == "" {
		err = errors.New("token reply without a token")
	}
	t.mu.Lock()
	now := t.now()
	if err == nil {
		t.value = tok.Value
		t.renewAt = now.Add(tok.Life - min(tok.Life/5, time.Minute))
		t.expiresAt = now.Add(tok.Life - min(tok.Life/20, 10*time.Second))
		f.value = tok.Value
	} else {
		t.retryAt = now.Add(refreshBackoff)
		f.err = fmt.Errorf("token: %w", err)
	}
	t.flight = nil
	t.mu.Unlock()
	if err == nil && t.fetched != nil {
		t.fetched()
	}
	close(f.done)
}

// drop forgets value if it is the cached token: the bank answered that it
// expired (Send). A newer token fetched meanwhile is kept.
func (t *Tokens) drop(value string) {
	t.mu.Lock()
	if t.value == value {
		t.value = ""
		t.retryAt = time.Time{}
	}
	t.mu.Unlock()
}

// Seconds is a duration in seconds sent as a JSON number or a string
// ("expires_in": 1799 or "1799"), as token endpoints in the wild do.
type Seconds time.Duration

// UnmarshalJSON reads 1799, 1799.0, "1799", "" or null (zero).
func (s *Seconds) UnmarshalJSON(b []byte) error {
	text := string(b)
	if text == "null" {
		*s = 0
		return nil
	}
	if strings.HasPrefix(text, `"`) {
		if err := json.Unmarshal(b, &text); err != nil {
			return err
		}
		text = strings.TrimSpace(text)
		if text == "" {
			*s = 0
			return nil
		}
	}
	n, err := strconv.ParseFloat(text, 64)
	if err != nil || n < 0 || n > 1e7 {
		return fmt.Errorf("expiry %.20q is not a number of seconds", text)
	}
	*s = Seconds(time.Duration(n * float64(time.Second)))
	return nil
}

// DefaultLife is a token's life when the bank does not say: short, so a
// token without an expiry is renewed often rather than used expired.
const DefaultLife = 5 * time.Minute

// Life returns s as a token life, DefaultLife when the bank sent none.
func (s Seconds) Life() time.Duration {
	if s <= 0 {
		return DefaultLife
	}
	return time.Duration(s)
}

// IsBearer reports whether a token type names a bearer token as the banks
// spell it: "Bearer", "bearer", "BearerToken", or nothing at all.
func IsBearer(tokenType string) bool {
	t := strings.ToLower(strings.TrimSpace(tokenType))
	return t == "" || strings.HasPrefix(t, "bearer")
}
