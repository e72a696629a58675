package upstream

import (
	"context"
	"errors"
	"fmt"
)

// ErrTokenRefused is wrapped by Tokens.Send's error when the bank refused
// the token of the request sent again too.
var ErrTokenRefused = errors.New("token refused twice")

// Send sends a request with a valid token: the one repeat of a lookup
// that the money rules allow besides Send's own. send sends it once with
// token (through Send, so nothing it sends is repeated behind it) and
// reports whether the bank refused the token, which means it expired and
// the bank ran nothing: then the token is dropped and the request sent
// once more with a new one. A second refusal drops that token too and is
// an error wrapping ErrTokenRefused. send's reply and error are returned
// as they are; refused counts only when its error is nil. An error getting
// a token is returned as it is, and the request it was for is not sent.
func (t *Tokens) Send(ctx context.Context, send func(token string) (rep Reply, refused bool, err error)) (Reply, error) {
	for attempt := 0; ; attempt++ {
		token, err := t.Get(ctx)
		if err != nil {
			return Reply{}, err
		}
		rep, refused, err := send(token)
		if err != nil || !refused {
			return rep, err
		}
		t.drop(token)
		if attempt > 0 {
			return rep, fmt.Errorf("%w (HTTP %d)", ErrTokenRefused, rep.Status)
		}
	}
}
