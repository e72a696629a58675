// Command slipsign sends a request signed the way spec 5.2 tells clients to
// sign: it is the quickest way to try /b2b and signed v2 calls against a
// running stack.
//
//	slipsign [-key K] [-secret S] METHOD URL [BODY]
//
// The key and secret default to SLIP_SIGN_KEY and SLIP_SIGN_SECRET. With
// -curl it prints the equivalent curl command instead of sending.
package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/slipverify/slipverify/edge/authn"
)

func main() {
	if err := run(os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "slipsign:", err)
		os.Exit(1)
	}
}

func run(args []string, getenv func(string) string, out io.Writer) error {
	fs := flag.NewFlagSet("slipsign", flag.ContinueOnError)
	// The defaults come from the environment after parsing, so that the
	// usage text never shows the secret.
	key := fs.String("key", "", "X-API-Key: a B2B client key, or a branch key for v2 calls (default SLIP_SIGN_KEY)")
	secret := fs.String("secret", "", "the B2B client's secret (default SLIP_SIGN_SECRET)")
	curl := fs.Bool("curl", false, "print the curl command instead of sending")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *key == "" {
		*key = getenv("SLIP_SIGN_KEY")
	}
	if *secret == "" {
		*secret = getenv("SLIP_SIGN_SECRET")
	}
	switch {
	case fs.NArg() < 2 || fs.NArg() > 3:
		return fmt.Errorf("usage: slipsign [-key K] [-secret S] [-curl] METHOD URL [BODY]")
	case *key == "":
		return fmt.Errorf("no key: set SLIP_SIGN_KEY or -key")
	case *secret == "":
		return fmt.Errorf("no secret: set SLIP_SIGN_SECRET or -secret")
	}
	method, rawURL, body := strings.ToUpper(fs.Arg(0)), fs.Arg(1), fs.Arg(2)
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%q is not a URL", rawURL)
	}
	headers := Sign(*key, *secret, method, u.RequestURI(), body, time.Now(), uuid.NewString())
	if *curl {
		fmt.Fprintf(out, "curl -sS -X %s %s", method, shellQuote(rawURL))
		for _, h := range headers {
			fmt.Fprintf(out, " -H %s", shellQuote(h[0]+": "+h[1]))
		}
		if body != "" {
			fmt.Fprintf(out, " -H 'Content-Type: application/json' --data-raw %s", shellQuote(body))
		}
		fmt.Fprintln(out)
		return nil
	}
	req, err := http.NewRequest(method, rawURL, strings.NewReader(body))
	if err != nil {
		return err
	}
	for _, h := range headers {
		req.Header.Set(h[0], h[1])
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	fmt.Fprintln(os.Stderr, res.Status)
	_, err = io.Copy(out, res.Body)
	fmt.Fprintln(out)
	return err
}

// Sign returns the headers of a signed request: X-API-Key, X-Timestamp,
// X-Nonce and X-Signature over METHOD, the request URI without /v2, the
// timestamp, the nonce and the body's SHA-256.
func Sign(key, secret, method, requestURI, body string, now time.Time, nonce string) [][2]string {
	ts := strconv.FormatInt(now.Unix(), 10)
	sts := authn.AppendStringToSign(nil, []byte(method), authn.SignedPath([]byte(requestURI)), []byte(ts), []byte(nonce), []byte(body))
	return [][2]string{{"X-API-Key", key}, {"X-Timestamp", ts}, {"X-Nonce", nonce}, {"X-Signature", authn.NewSigner(secret).Sign(sts)}}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
