package upstream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"
)

// TestTokensSend: a request is sent again only after the bank refused its
// token, once, with a new token.
func TestTokensSend(t *testing.T) {
	type answer struct {
		rep     Reply
		refused bool
		err     error
	}
	ok := answer{rep: Reply{Status: 200}}
	refused := answer{rep: Reply{Status: 401}, refused: true}
	reset := fmt.Errorf("%w: connection reset", ErrMaybeSent)
	for _, tc := range []struct {
		name    string
		answers []answer // the bank's, one per request sent
		sent    []string // the tokens the requests carried
		status  int      // of the reply Send returns
		err     error
		then    string // the token of the next request
	}{
		{"answered: sent once", []answer{ok}, []string{"t1"}, 200, nil, "t1"},
		{"another answer: sent once", []answer{{rep: Reply{Status: 500}}}, []string{"t1"}, 500, nil, "t1"},
		{"token refused: sent again with a new one", []answer{refused, ok}, []string{"t1", "t2"}, 200, nil, "t2"},
		{"refused twice: an error", []answer{refused, refused}, []string{"t1", "t2"}, 401, ErrTokenRefused, "t3"},
		{"an error: not sent again", []answer{{err: reset}}, []string{"t1"}, 0, ErrMaybeSent, "t1"},
		{"an error is no refusal", []answer{{rep: Reply{Status: 401}, refused: true, err: reset}}, []string{"t1"}, 401, ErrMaybeSent, "t1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			tok := NewTokens(func(context.Context) (Token, error) {
				n++
				return Token{Value: "t" + strconv.Itoa(n), Life: time.Hour}, nil
			}, new(clock).Now, time.Minute, nil)
			var sent []string
			rep, err := tok.Send(context.Background(), func(token string) (Reply, bool, error) {
				sent = append(sent, token)
				if len(sent) > len(tc.answers) {
					t.Fatalf("request %d sent, the bank answers %d", len(sent), len(tc.answers))
				}
				a := tc.answers[len(sent)-1]
				return a.rep, a.refused, a.err
			})
			if !slices.Equal(sent, tc.sent) {
				t.Errorf("requests sent with tokens %q, want %q", sent, tc.sent)
			}
			if rep.Status != tc.status || !errors.Is(err, tc.err) || (err == nil) != (tc.err == nil) {
				t.Errorf("reply HTTP %d, err %v; want HTTP %d, err %v", rep.Status, err, tc.status, tc.err)
			}
			if v, _ := tok.Get(context.Background()); v != tc.then {
				t.Errorf("next token %q, want %q", v, tc.then)
			}
		})
	}
}

// TestTokensSendWithoutToken: no token, nothing sent.
func TestTokensSendWithoutToken(t *testing.T) {
	down := errors.New("connection refused")
	tok := NewTokens(func(context.Context) (Token, error) { return Token{}, down }, new(clock).Now, time.Minute, nil)
	_, err := tok.Send(context.Background(), func(string) (Reply, bool, error) {
		t.Error("a request sent without a token")
		return Reply{}, false, nil
	})
	if !errors.Is(err, down) {
		t.Errorf("err %v, want the token fetch's", err)
	}
}
